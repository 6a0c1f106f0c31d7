#include <spillway/io/device_reader.hpp>

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

DevicePath read_file_to_device(const std::string& path, void* dst, std::size_t bytes,
                               std::uint64_t offset, ThreadPool* pool, const ReadOptions& options) {
  SPILLWAY_EXPECTS(cuda::is_available(), "read_file_to_device needs a GPU");
  SPILLWAY_EXPECTS(options.task_size > 0, "read_file_to_device: the task size must be positive");
  if (const auto* gds = detail::CuFile::get(options.gds);
      gds != nullptr && bytes > 0 && gds->read(path, dst, bytes, offset)) {
    return DevicePath::gds;
  }
  if (cuda::reads_pageable_memory()) {
    read_file(path, dst, bytes, offset, pool, options);
    return DevicePath::pageable;
  }
  FileHandle buffered(path, O_RDONLY);
  FileHandle direct;
  if (options.direct && options.task_size % direct_align == 0) direct = detail::open_direct(path);
  const std::size_t tasks = (bytes + options.task_size - 1) / options.task_size;
  auto* out = static_cast<std::byte*>(dst);
  detail::run_on_lanes(
      pool, tasks, options.task_size, [&](std::size_t s, std::size_t stripes, Lane& lane) {
        std::size_t k = 0;
        for (std::size_t t = s; t < tasks; t += stripes, ++k) {
          const std::size_t begin = t * options.task_size;
          const std::size_t len = std::min(options.task_size, bytes - begin);
          const std::uint64_t at = offset + begin;
          const std::size_t slot = k & 1U;
          lane.done[slot].synchronize();  // the copy out of this buffer, two tasks ago
          const bool aligned = at % direct_align == 0 && len % direct_align == 0;
          (direct.is_open() && aligned ? direct : buffered).pread(lane.buf[slot], len, at);
          cuda::memcpy_async(out + begin, lane.buf[slot], len, lane.stream);
          lane.done[slot].record(lane.stream);
        }
        lane.stream.view().synchronize();
      });
  return DevicePath::bounce;
}

std::future<DevicePath> read_file_to_device_async(std::string path, void* dst, std::size_t bytes,
                                                  std::uint64_t offset, ThreadPool& pool,
                                                  ReadOptions options) {
  return detail::submit_on_callers_gpu(
      pool, [path = std::move(path), dst, bytes, offset, &pool, options] {
        return read_file_to_device(path, dst, bytes, offset, &pool, options);
      });
}

}  // namespace spillway::io
