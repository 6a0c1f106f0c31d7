#include <spillway/io/file_io.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/io/device_reader.hpp>
#include <spillway/io/device_writer.hpp>

#include "bounce_lanes.hpp"

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

void check(const ReadOptions& options, const char* what) {
  SPILLWAY_EXPECTS(options.task_size > 0, std::string(what) + ": the task size must be positive");
}

}  // namespace

std::future<std::size_t> pread(const FileHandle& file, void* dst, std::size_t bytes,
                               std::uint64_t offset, ThreadPool& pool, ReadOptions options) {
  check(options, "io::pread");
  if (bytes > 0 && cuda::is_device_pointer(dst)) {
    return detail::submit_on_callers_gpu(
        pool, [path = reopen_path(file), dst, bytes, offset, &pool, options] {
          (void)read_file_to_device(path, dst, bytes, offset, &pool, options);
          return bytes;
        });
  }
  // The task takes part in its own parallel_for, so it never waits on a busy pool.
  return pool.submit([&file, dst, bytes, offset, &pool, options] {
    if (bytes > 0) file.pread(dst, bytes, offset, pool, options.task_size);
    return bytes;
  });
}

std::future<std::size_t> pwrite(const FileHandle& file, const void* src, std::size_t bytes,
                                std::uint64_t offset, ThreadPool& pool, ReadOptions options) {
  check(options, "io::pwrite");
  if (bytes > 0 && cuda::is_device_pointer(src)) {
    return detail::submit_on_callers_gpu(
        pool, [path = reopen_path(file), src, bytes, offset, &pool, options] {
          (void)write_file_from_device(path, src, bytes, offset, &pool, options);
          return bytes;
        });
  }
  return pool.submit([&file, src, bytes, offset, &pool, options] {
    if (bytes > 0) file.pwrite(src, bytes, offset, pool, options.task_size);
    return bytes;
  });
}

}  // namespace spillway::io
