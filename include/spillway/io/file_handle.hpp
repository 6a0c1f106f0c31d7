#pragma once
/// @file file_handle.hpp
/// An owned file descriptor with complete (short-read/EINTR-safe) positional reads and writes,
/// optionally split into tasks on a thread pool.

#include <cstddef>
#include <cstdint>
#include <string>

namespace spillway::io {

class ThreadPool;

/// An open file, move-only; closes on destruction. Reads and writes are thread-safe (pread and
/// pwrite at explicit offsets). Every error is a spillway::io_error naming the file, the
/// offset and the size.
class FileHandle {
 public:
  FileHandle() noexcept = default;
  /// Opens `path` with open(2) `flags` and `mode`. @throws spillway::io_error
  FileHandle(const std::string& path, int flags, unsigned mode = 0600);
  /// Adopts an open descriptor; `name` is used in error messages.
  FileHandle(int fd, std::string name) noexcept : fd_{fd}, name_{std::move(name)} {}
  ~FileHandle();
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;
  FileHandle(FileHandle&& other) noexcept;
  FileHandle& operator=(FileHandle&& other) noexcept;

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] bool is_open() const noexcept { return fd_ >= 0; }
  /// The file's size in bytes. @throws spillway::io_error
  [[nodiscard]] std::size_t size() const;

  /// Reads exactly `bytes` at `offset` into host memory `dst`.
  /// @throws spillway::io_error on an I/O error or when the file ends first (a short read).
  void pread(void* dst, std::size_t bytes, std::uint64_t offset) const;
  /// Writes exactly `bytes` from host memory `src` at `offset`.
  /// @throws spillway::io_error, e.g. when the file system is full (ENOSPC).
  void pwrite(const void* src, std::size_t bytes, std::uint64_t offset) const;
  /// The same, split into `task_size` pieces run on `pool` (and the calling thread).
  void pread(void* dst, std::size_t bytes, std::uint64_t offset, ThreadPool& pool,
             std::size_t task_size) const;
  void pwrite(const void* src, std::size_t bytes, std::uint64_t offset, ThreadPool& pool,
              std::size_t task_size) const;
  /// Releases the disk blocks of a range (fallocate PUNCH_HOLE); a no-op where unsupported.
  void punch_hole(std::uint64_t offset, std::size_t bytes) const noexcept;
  /// Truncates the file to `bytes`. @throws spillway::io_error
  void truncate(std::size_t bytes) const;
  /// Closes the descriptor now. @throws spillway::io_error when close(2) reports an error.
  void close();

 private:
  int fd_{-1};
  std::string name_;
};

}  // namespace spillway::io
