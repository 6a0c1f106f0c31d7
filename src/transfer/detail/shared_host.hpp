#pragma once
// Shared host memory as the cuda_ipc backend sees it (internal): which registered host memory
// lies in a SharedHostMemory (so that its peers may map it), and a peer's such memory mapped
// here.

#include <sys/types.h>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace spillway::transfer::detail {

/// Where a range of this process's memory lies in a SharedHostMemory.
struct SharedFile {
  int fd{-1};               ///< the memfd, open in this process
  std::uint64_t inode{0};   ///< its inode: a peer checks that the fd is still this file
  std::uint64_t bytes{0};   ///< the whole file
  std::uint64_t offset{0};  ///< where the range starts in it
  std::uintptr_t base{0};   ///< the file's first byte here (for engines of this process)
};

/// The SharedHostMemory that holds all of [ptr, ptr + bytes), if one does.
std::optional<SharedFile> shared_file_of(const void* ptr, std::size_t bytes);

/// A peer's shared file mapped into this process and page-locked for the GPU.
class MappedPeerFile {
 public:
  /// Opens `fd` of process `pid` (through /proc), checks that it is the file `inode` of
  /// `bytes` bytes, maps it and, where a GPU is usable, registers it.
  /// @throws spillway::io_error naming what failed (no such fd, another file, no permission)
  MappedPeerFile(pid_t pid, int fd, std::uint64_t inode, std::uint64_t bytes);
  MappedPeerFile(MappedPeerFile&& other) noexcept;
  MappedPeerFile& operator=(MappedPeerFile&&) = delete;
  MappedPeerFile(const MappedPeerFile&) = delete;
  MappedPeerFile& operator=(const MappedPeerFile&) = delete;
  ~MappedPeerFile();

  [[nodiscard]] std::uint8_t* data() const noexcept { return data_; }
  /// Where the GPU reaches it (null when it is not page-locked).
  [[nodiscard]] std::uint8_t* device_pointer() const noexcept { return device_; }

 private:
  std::uint8_t* data_{nullptr};
  std::uint8_t* device_{nullptr};
  std::size_t bytes_{0};
};

}  // namespace spillway::transfer::detail
