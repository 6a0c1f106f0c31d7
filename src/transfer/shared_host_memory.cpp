// SharedHostMemory: a memfd mapped here and page-locked for the GPU, in a registry of this
// process that the cuda_ipc backend reads when a region is registered; and a peer's such
// memory mapped here, through /proc/<pid>/fd (the memfd has no name a peer could open).

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/transfer/shared_host_memory.hpp>

#include "transfer/detail/shared_host.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace spillway::transfer {

namespace {

struct Entry {
  std::size_t bytes;
  int fd;
  std::uint64_t inode;
};

/// Every live SharedHostMemory of this process, by its first byte.
struct Registry {
  std::mutex mutex;
  std::map<std::uintptr_t, Entry> by_base;
};

Registry& registry() {
  static Registry r;
  return r;
}

[[noreturn]] void fail(const std::string& what, int err) {
  SPILLWAY_FAIL("transfer: " + what + ": " + spillway::detail::errno_string(err), io_error);
}

}  // namespace

SharedHostMemory SharedHostMemory::allocate(std::size_t bytes) {
  SPILLWAY_EXPECTS(bytes > 0, "transfer: SharedHostMemory::allocate of 0 bytes");
  const int fd = ::memfd_create("spillway-shared-host", MFD_CLOEXEC);
  if (fd < 0) fail("memfd_create for " + std::to_string(bytes) + " bytes of shared memory", errno);
  struct stat st {};
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0 || ::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("sizing a memfd of " + std::to_string(bytes) + " bytes", err);
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    fail("mapping a memfd of " + std::to_string(bytes) + " bytes", err);
  }
  const bool pinned = cuda::is_available() && cuda::host_register(p, bytes);
  {
    std::lock_guard lock(registry().mutex);
    registry().by_base[reinterpret_cast<std::uintptr_t>(p)] = {
        bytes, fd, static_cast<std::uint64_t>(st.st_ino)};
  }
  return {p, bytes, fd, pinned};
}

SharedHostMemory::SharedHostMemory(SharedHostMemory&& other) noexcept
    : data_{std::exchange(other.data_, nullptr)},
      bytes_{std::exchange(other.bytes_, 0)},
      fd_{std::exchange(other.fd_, -1)},
      pinned_{std::exchange(other.pinned_, false)} {}

SharedHostMemory& SharedHostMemory::operator=(SharedHostMemory&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    fd_ = std::exchange(other.fd_, -1);
    pinned_ = std::exchange(other.pinned_, false);
  }
  return *this;
}

SharedHostMemory::~SharedHostMemory() {
  release();
}

void SharedHostMemory::release() noexcept {
  if (data_ == nullptr) return;
  {
    std::lock_guard lock(registry().mutex);
    registry().by_base.erase(reinterpret_cast<std::uintptr_t>(data_));
  }
  if (pinned_) cuda::host_unregister(data_);
  ::munmap(data_, bytes_);
  ::close(fd_);
  data_ = nullptr;
}

namespace detail {

std::optional<SharedFile> shared_file_of(const void* ptr, std::size_t bytes) {
  const auto at = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(registry().mutex);
  auto it = registry().by_base.upper_bound(at);
  if (it == registry().by_base.begin()) return std::nullopt;
  --it;
  const auto& [base, e] = *it;
  if (at - base > e.bytes || bytes > e.bytes - (at - base)) return std::nullopt;
  return SharedFile{e.fd, e.inode, e.bytes, at - base, base};
}

MappedPeerFile::MappedPeerFile(pid_t pid, int fd, std::uint64_t inode, std::uint64_t bytes) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int mine = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (mine < 0) fail("opening the peer's shared memory " + path, errno);
  struct stat st {};
  if (::fstat(mine, &st) != 0) {
    const int err = errno;
    ::close(mine);
    fail("fstat of the peer's shared memory " + path, err);
  }
  if (static_cast<std::uint64_t>(st.st_ino) != inode ||
      static_cast<std::uint64_t>(st.st_size) != bytes) {
    ::close(mine);
    SPILLWAY_FAIL("transfer: " + path + " is no longer the peer's shared memory (inode " +
                      std::to_string(st.st_ino) + " of " + std::to_string(st.st_size) +
                      " bytes, where the region names inode " + std::to_string(inode) + " of " +
                      std::to_string(bytes) + ")",
                  io_error);
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mine, 0);
  const int err = errno;
  ::close(mine);  // the mapping holds the file
  if (p == MAP_FAILED) fail("mapping the peer's shared memory " + path, err);
  data_ = static_cast<std::uint8_t*>(p);
  bytes_ = bytes;
  if (cuda::is_available() && cuda::host_register(p, bytes)) {
    device_ = static_cast<std::uint8_t*>(cuda::host_device_pointer(p));
  }
}

MappedPeerFile::MappedPeerFile(MappedPeerFile&& other) noexcept
    : data_{std::exchange(other.data_, nullptr)},
      device_{std::exchange(other.device_, nullptr)},
      bytes_{std::exchange(other.bytes_, 0)} {}

MappedPeerFile::~MappedPeerFile() {
  if (data_ == nullptr) return;
  if (device_ != nullptr) cuda::host_unregister(data_);
  ::munmap(data_, bytes_);
}

}  // namespace detail

}  // namespace spillway::transfer
