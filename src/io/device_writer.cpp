#include <spillway/io/device_writer.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/io/staged_copy.hpp>

#include "io/detail/bounce_lanes.hpp"
#include "io/detail/gds.hpp"
#include "io/detail/tasks.hpp"

#include <fcntl.h>

namespace spillway::io {

using detail::direct_align;

DevicePath write_file_from_device(const std::string& path, const void* src, std::size_t bytes,
                                  std::uint64_t offset, ThreadPool* pool,
                                  const ReadOptions& options, Staging staging) {
  SPILLWAY_EXPECTS(cuda::is_available(), "write_file_from_device needs a GPU");
  SPILLWAY_EXPECTS(options.task_size > 0, "write_file_from_device: the task size must be positive");
  if (const auto* gds = detail::CuFile::get(options.gds);
      gds != nullptr && bytes > 0 && gds->write(path, src, bytes, offset)) {
    return DevicePath::gds;
  }
  FileHandle buffered(path, O_WRONLY | O_CREAT);
  FileHandle direct;
  if (options.direct && options.task_size % direct_align == 0) {
    direct = detail::open_direct(path, O_WRONLY);
  }
  staged_write_from_device(
      static_cast<const std::byte*>(src), bytes, options.task_size,
      [&](std::size_t begin, std::size_t len, const std::byte* from) {
        const std::uint64_t at = offset + begin;
        const bool aligned = at % direct_align == 0 && len % direct_align == 0 &&
                             reinterpret_cast<std::uintptr_t>(from) % direct_align == 0;
        (direct.is_open() && aligned ? direct : buffered).pwrite(from, len, at);
      },
      staging, pool);
  return DevicePath::bounce;
}

std::future<DevicePath> write_file_from_device_async(std::string path, const void* src,
                                                     std::size_t bytes, std::uint64_t offset,
                                                     ThreadPool& pool, ReadOptions options,
                                                     Staging staging) {
  return detail::submit_on_callers_gpu(
      pool, [path = std::move(path), src, bytes, offset, &pool, options, staging] {
        return write_file_from_device(path, src, bytes, offset, &pool, options, staging);
      });
}

}  // namespace spillway::io
