#pragma once
/// @file spill_files.hpp
/// The DISK tier's storage: checksummed extents in unnamed spill files inside a private
/// directory that never outlives the process.

#include <spillway/io/file_handle.hpp>
#include <spillway/io/thread_pool.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace spillway {

namespace detail {
/// A set of spill files written side by side (buffered writes to one file are serialized by
/// the kernel's inode lock, so parallel writers need several files). Shared by the extents
/// placed in it; its files close when the last extent goes.
struct SpillFileGroup {
  std::vector<io::FileHandle> files;
  std::vector<std::uint64_t> append;  // next free offset per file
  std::size_t live_extents{0};
};
}  // namespace detail

/// Where one spilled buffer lives: pieces of `piece_size` bytes dealt round-robin over the
/// files of a group, each with an xxHash3 checksum. Released through SpillFiles::release.
struct DiskExtent {
  std::shared_ptr<detail::SpillFileGroup> group;
  std::size_t first_file{0};           // the file of piece 0
  std::vector<std::uint64_t> offsets;  // per file: where this extent's pieces start
  std::size_t size{0};
  std::size_t piece_size{0};
  std::vector<std::uint64_t> checksums;

  [[nodiscard]] std::size_t num_pieces() const noexcept { return checksums.size(); }
  /// The file and offset of piece `i`.
  [[nodiscard]] std::pair<const io::FileHandle*, std::uint64_t> locate(std::size_t i) const;
};

/// Spill files of one BufferResource. The private directory (`<parent>/spillway-<pid>-XXXXXX`,
/// mode 0700) is made at first use; files are created unnamed in it (O_TMPFILE, else created
/// with mode 0600 and unlinked at once), so their space is freed when closed, also when the
/// process dies. The directory is removed by the destructor, at exit and on std::terminate;
/// empty directories left by killed processes are removed when the next SpillFiles is made,
/// and under spillway-run by the launcher once the process is gone.
/// Thread-safe; reads and writes run in parallel pieces on an I/O thread pool.
class SpillFiles {
 public:
  /// @param parent_dir where the private directory goes.
  /// @param file_size a file takes new extents until it is this big.
  /// @param piece_size bytes per parallel task and per checksum.
  /// @param io_threads threads of the I/O pool, and files per group.
  SpillFiles(std::string parent_dir, std::size_t file_size, std::size_t piece_size,
             std::size_t io_threads);
  ~SpillFiles();
  SpillFiles(const SpillFiles&) = delete;
  SpillFiles& operator=(const SpillFiles&) = delete;
  SpillFiles(SpillFiles&&) = delete;
  SpillFiles& operator=(SpillFiles&&) = delete;

  /// Places an extent of `bytes` (no data written yet). @throws spillway::io_error
  DiskExtent allocate(std::size_t bytes);
  /// Writes `len` bytes at `pos` within the extent and records their checksums. `pos` must be a
  /// multiple of piece_size and `len` too unless the write reaches the extent's end.
  /// @throws spillway::io_error (ENOSPC: "the file system is full")
  void write(DiskExtent& extent, std::size_t pos, const void* src, std::size_t len);
  /// Reads `len` bytes at `pos` (piece-aligned as for write) and verifies their checksums.
  /// @throws spillway::io_error on a read error or a checksum mismatch.
  void read(const DiskExtent& extent, std::size_t pos, void* dst, std::size_t len);
  /// Frees the extent's disk space. Never throws.
  void release(DiskExtent& extent) noexcept;

  /// The disk space an extent of `bytes` takes (whole 4 KiB blocks: a small extent shares no
  /// block, so that freeing it frees its space), what the DISK tier is charged for it.
  [[nodiscard]] static std::size_t footprint(std::size_t bytes) noexcept;
  /// The private directory ("" until the first spill).
  [[nodiscard]] std::string directory() const;
  /// Free space on the parent directory's file system, in bytes.
  [[nodiscard]] std::size_t free_space() const;
  [[nodiscard]] std::size_t piece_size() const noexcept { return piece_size_; }
  [[nodiscard]] io::ThreadPool& pool() noexcept { return pool_; }
  /// Threads of the I/O pool, which is also the number of files per group.
  [[nodiscard]] std::size_t io_threads() const noexcept { return pool_.size(); }

 private:
  void ensure_directory();                               // mutex_ held
  std::shared_ptr<detail::SpillFileGroup> open_group();  // mutex_ held

  std::string parent_;
  std::size_t file_size_;
  std::size_t piece_size_;
  io::ThreadPool pool_;
  mutable std::mutex mutex_;
  std::string dir_;
  std::shared_ptr<detail::SpillFileGroup> current_;
  std::size_t next_first_file_{0};
  std::size_t files_made_{0};
};

}  // namespace spillway
