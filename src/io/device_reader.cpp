#include <spillway/io/device_reader.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/io/staged_copy.hpp>

#include "io/detail/bounce_lanes.hpp"
#include "io/detail/gds.hpp"
#include "io/detail/tasks.hpp"

#include <fcntl.h>

namespace spillway::io {

using detail::direct_align;

DevicePath read_file_to_device(const std::string& path, void* dst, std::size_t bytes,
                               std::uint64_t offset, ThreadPool* pool, const ReadOptions& options,
                               Staging staging) {
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
  staged_read_to_device(
      static_cast<std::byte*>(dst), bytes, options.task_size,
      [&](std::size_t begin, std::size_t len, std::byte* to) {
        const std::uint64_t at = offset + begin;
        const bool aligned = at % direct_align == 0 && len % direct_align == 0 &&
                             reinterpret_cast<std::uintptr_t>(to) % direct_align == 0;
        (direct.is_open() && aligned ? direct : buffered).pread(to, len, at);
      },
      staging, pool);
  return DevicePath::bounce;
}

std::future<DevicePath> read_file_to_device_async(std::string path, void* dst, std::size_t bytes,
                                                  std::uint64_t offset, ThreadPool& pool,
                                                  ReadOptions options, Staging staging) {
  return detail::submit_on_callers_gpu(
      pool, [path = std::move(path), dst, bytes, offset, &pool, options, staging] {
        return read_file_to_device(path, dst, bytes, offset, &pool, options, staging);
      });
}

}  // namespace spillway::io
