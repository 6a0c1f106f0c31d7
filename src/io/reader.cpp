#include <spillway/io/reader.hpp>

#include <spillway/core/error.hpp>
#include <spillway/core/options.hpp>

#include "io/detail/tasks.hpp"

#include <fcntl.h>

#include <cstdint>

namespace spillway::io {

using detail::direct_align;

ReadOptions ReadOptions::from_options() {
  const OptionValues v = options::get();
  return ReadOptions{v.io_task_size, v.io_direct, v.io_gds};
}

ReadPath read_file(const std::string& path, void* dst, std::size_t bytes, std::uint64_t offset,
                   ThreadPool* pool, const ReadOptions& options) {
  SPILLWAY_EXPECTS(options.task_size > 0, "read_file: the task size must be positive");
  FileHandle buffered(path, O_RDONLY);
  auto* out = static_cast<std::byte*>(dst);
  // The aligned middle [a, b) of the range, read direct when asked and possible.
  const std::uint64_t a = (offset + direct_align - 1) / direct_align * direct_align;
  const std::uint64_t b = (offset + bytes) / direct_align * direct_align;
  FileHandle direct;
  if (options.direct && b > a) {
    SPILLWAY_EXPECTS(options.task_size % direct_align == 0,
                     "read_file: direct reads need a task size that is a multiple of 4096");
    direct = detail::open_direct(path);
  }
  if (!direct.is_open()) {
    const std::size_t tasks = (bytes + options.task_size - 1) / options.task_size;
    detail::run_tasks(pool, tasks, [&](std::size_t i) {
      const std::size_t begin = i * options.task_size;
      buffered.pread(out + begin, std::min(options.task_size, bytes - begin), offset + begin);
    });
    return ReadPath::buffered;
  }
  if (a > offset) buffered.pread(out, a - offset, offset);
  if (offset + bytes > b) buffered.pread(out + (b - offset), offset + bytes - b, b);
  const std::size_t middle = b - a;
  const std::size_t tasks = (middle + options.task_size - 1) / options.task_size;
  detail::run_tasks(pool, tasks, [&](std::size_t i) {
    const std::size_t begin = i * options.task_size;
    const std::size_t len = std::min(options.task_size, middle - begin);
    std::byte* to = out + (a - offset) + begin;
    // O_DIRECT needs an aligned destination. An unaligned one reads through the page cache
    // rather than through a bounce buffer of its own: the reader allocates nothing, so all
    // the memory a read uses is the caller's (and within its tiers' limits).
    const bool aligned = reinterpret_cast<std::uintptr_t>(to) % direct_align == 0;
    (aligned ? direct : buffered).pread(to, len, a + begin);
  });
  return ReadPath::direct;
}

std::future<ReadPath> read_file_async(std::string path, void* dst, std::size_t bytes,
                                      std::uint64_t offset, ThreadPool& pool, ReadOptions options) {
  // The task takes part in its own parallel_for, so it never waits on a busy pool.
  return pool.submit([path = std::move(path), dst, bytes, offset, &pool, options] {
    return read_file(path, dst, bytes, offset, &pool, options);
  });
}

}  // namespace spillway::io
