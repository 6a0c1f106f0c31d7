#include <spillway/io/file_io.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/io/device_reader.hpp>
#include <spillway/io/device_writer.hpp>

#include "io/detail/bounce_lanes.hpp"

#include <sys/stat.h>

#include <string>

namespace spillway::io {

namespace {

/// A path that opens the same file again: its name when that still names the same inode, else
/// /proc/self/fd/N (renamed, unlinked or adopted descriptors).
std::string reopen_path(const FileHandle& file) {
  struct stat by_fd {};
  struct stat by_name {};
  SPILLWAY_EXPECTS(file.is_open(), "io::pread/pwrite: the file handle is closed");
  if (::fstat(file.fd(), &by_fd) == 0 && ::stat(file.name().c_str(), &by_name) == 0 &&
      by_fd.st_dev == by_name.st_dev && by_fd.st_ino == by_name.st_ino) {
    return file.name();
  }
  return "/proc/self/fd/" + std::to_string(file.fd());
}

/// pread's and pwrite's common body: `device(path)` for device memory, with the file reopened
/// by path, on the pool with the caller's GPU current; `host()` for host memory on the pool (the
/// task takes part in its own parallel_for, so it never waits on a busy pool). The future gives
/// `bytes`.
template <typename Device, typename Host>
std::future<std::size_t> transfer(const char* what, const FileHandle& file, const void* ptr,
                                  std::size_t bytes, ThreadPool& pool, const ReadOptions& options,
                                  Device device, Host host) {
  SPILLWAY_EXPECTS(options.task_size > 0, std::string(what) + ": the task size must be positive");
  if (bytes > 0 && cuda::is_device_pointer(ptr)) {
    return detail::submit_on_callers_gpu(pool, [path = reopen_path(file), bytes, device] {
      device(path);
      return bytes;
    });
  }
  return pool.submit([bytes, host] {
    if (bytes > 0) host();
    return bytes;
  });
}

}  // namespace

std::future<std::size_t> pread(const FileHandle& file, void* dst, std::size_t bytes,
                               std::uint64_t offset, ThreadPool& pool, ReadOptions options) {
  return transfer(
      "io::pread", file, dst, bytes, pool, options,
      [=, &pool](const std::string& path) {
        (void)read_file_to_device(path, dst, bytes, offset, &pool, options);
      },
      [=, &file, &pool] { file.pread(dst, bytes, offset, pool, options.task_size); });
}

std::future<std::size_t> pwrite(const FileHandle& file, const void* src, std::size_t bytes,
                                std::uint64_t offset, ThreadPool& pool, ReadOptions options) {
  return transfer(
      "io::pwrite", file, src, bytes, pool, options,
      [=, &pool](const std::string& path) {
        (void)write_file_from_device(path, src, bytes, offset, &pool, options);
      },
      [=, &file, &pool] { file.pwrite(src, bytes, offset, pool, options.task_size); });
}

}  // namespace spillway::io
