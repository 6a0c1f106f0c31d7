#include <spillway/io/file_handle.hpp>

#include <spillway/core/error.hpp>
#include <spillway/io/thread_pool.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>

#include <algorithm>
#include <utility>

namespace spillway::io {

namespace {
std::string where(const std::string& name, std::uint64_t offset, std::size_t bytes) {
  return "'" + name + "' (offset " + std::to_string(offset) + ", size " + std::to_string(bytes) +
         ")";
}
std::size_t ntasks_for(std::size_t bytes, std::size_t task_size) {
  return task_size == 0 ? 1 : std::max<std::size_t>(1, (bytes + task_size - 1) / task_size);
}
}  // namespace

FileHandle::FileHandle(const std::string& path, int flags, unsigned mode) : name_{path} {
  fd_ = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd_ < 0) {
    const int err = errno;
    SPILLWAY_FAIL("cannot open '" + path + "': " + detail::errno_string(err), io_error);
  }
}

FileHandle::~FileHandle() {
  if (fd_ >= 0) ::close(fd_);
}

FileHandle::FileHandle(FileHandle&& other) noexcept
    : fd_{std::exchange(other.fd_, -1)}, name_{std::move(other.name_)} {}

FileHandle& FileHandle::operator=(FileHandle&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    name_ = std::move(other.name_);
  }
  return *this;
}

std::size_t FileHandle::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    SPILLWAY_FAIL("cannot stat '" + name_ + "': " + detail::errno_string(err), io_error);
  }
  return static_cast<std::size_t>(st.st_size);
}

void FileHandle::pread(void* dst, std::size_t bytes, std::uint64_t offset) const {
  auto* p = static_cast<char*>(dst);
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      SPILLWAY_FAIL(
          "read error on " + where(name_, offset, bytes) + ": " + detail::errno_string(err),
          io_error);
    }
    if (n == 0) {
      SPILLWAY_FAIL("short read on " + where(name_, offset, bytes) + ": the file ended after " +
                        std::to_string(done) + " bytes",
                    io_error);
    }
    done += static_cast<std::size_t>(n);
  }
}

void FileHandle::pwrite(const void* src, std::size_t bytes, std::uint64_t offset) const {
  const auto* p = static_cast<const char*>(src);
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pwrite(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      SPILLWAY_FAIL("write error on " + where(name_, offset, bytes) + ": " +
                        detail::errno_string(err) +
                        (err == ENOSPC ? " (the file system is full)" : ""),
                    io_error);
    }
    done += static_cast<std::size_t>(n);
  }
}

void FileHandle::pread(void* dst, std::size_t bytes, std::uint64_t offset, ThreadPool& pool,
                       std::size_t task_size) const {
  const std::size_t n = ntasks_for(bytes, task_size);
  pool.parallel_for(n, [&](std::size_t i) {
    const std::size_t begin = i * task_size;
    const std::size_t len = std::min(task_size, bytes - begin);
    pread(static_cast<char*>(dst) + begin, len, offset + begin);
  });
}

void FileHandle::pwrite(const void* src, std::size_t bytes, std::uint64_t offset, ThreadPool& pool,
                        std::size_t task_size) const {
  const std::size_t n = ntasks_for(bytes, task_size);
  pool.parallel_for(n, [&](std::size_t i) {
    const std::size_t begin = i * task_size;
    const std::size_t len = std::min(task_size, bytes - begin);
    pwrite(static_cast<const char*>(src) + begin, len, offset + begin);
  });
}

void FileHandle::punch_hole(std::uint64_t offset, std::size_t bytes) const noexcept {
  if (bytes == 0) return;
  (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                    static_cast<off_t>(bytes));
}

void FileHandle::truncate(std::size_t bytes) const {
  if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    SPILLWAY_FAIL("cannot truncate '" + name_ + "': " + detail::errno_string(err), io_error);
  }
}

void FileHandle::close() {
  if (fd_ < 0) return;
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {
    const int err = errno;
    SPILLWAY_FAIL("cannot close '" + name_ + "': " + detail::errno_string(err), io_error);
  }
}

}  // namespace spillway::io
