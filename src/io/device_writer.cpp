#include <spillway/io/device_writer.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>

#include "io/detail/bounce_lanes.hpp"
#include "io/detail/gds.hpp"
#include "io/detail/tasks.hpp"

#include <fcntl.h>

#include <memory>
#include <vector>

namespace spillway::io {

using detail::direct_align;
using detail::Lane;

DevicePath write_file_from_device(const std::string& path, const void* src, std::size_t bytes,
                                  std::uint64_t offset, ThreadPool* pool,
                                  const ReadOptions& options) {
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
  const std::size_t tasks = (bytes + options.task_size - 1) / options.task_size;
  const auto* in = static_cast<const std::byte*>(src);
  detail::run_on_lanes(
      pool, tasks, options.task_size, [&](std::size_t s, std::size_t stripes, Lane& lane) {
        auto task = [&](std::size_t k) { return s + k * stripes; };  // the stripe's k-th task
        auto length = [&](std::size_t t) {
          return std::min(options.task_size, bytes - t * options.task_size);
        };
        auto copy_in = [&](std::size_t k) {
          const std::size_t t = task(k);
          cuda::memcpy_async(lane.buf[k & 1U], in + t * options.task_size, length(t), lane.stream);
          lane.done[k & 1U].record(lane.stream);
        };
        copy_in(0);
        for (std::size_t k = 0; task(k) < tasks; ++k) {
          // The next task's copy runs while this one is written (its buffer was written out by
          // the previous iteration, synchronously).
          if (task(k + 1) < tasks) copy_in(k + 1);
          lane.done[k & 1U].synchronize();
          const std::size_t t = task(k);
          const std::uint64_t at = offset + t * options.task_size;
          const bool aligned = at % direct_align == 0 && length(t) % direct_align == 0;
          (direct.is_open() && aligned ? direct : buffered).pwrite(lane.buf[k & 1U], length(t), at);
        }
      });
  return DevicePath::bounce;
}

std::future<DevicePath> write_file_from_device_async(std::string path, const void* src,
                                                     std::size_t bytes, std::uint64_t offset,
                                                     ThreadPool& pool, ReadOptions options) {
  return detail::submit_on_callers_gpu(
      pool, [path = std::move(path), src, bytes, offset, &pool, options] {
        return write_file_from_device(path, src, bytes, offset, &pool, options);
      });
}

}  // namespace spillway::io
