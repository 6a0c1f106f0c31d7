#pragma once
// What the parallel readers and writers share (internal): direct-I/O alignment, opening a file for
// O_DIRECT where the file system allows it, and running tasks on a pool or the caller.

#include <spillway/core/error.hpp>
#include <spillway/io/file_handle.hpp>
#include <spillway/io/thread_pool.hpp>

#include <fcntl.h>

#include <cstddef>
#include <functional>
#include <string>

namespace spillway::io::detail {

inline constexpr std::size_t direct_align = 4096;

/// `path` opened with `flags` | O_DIRECT, or a closed handle where the file system refuses it
/// (tmpfs, for one).
inline FileHandle open_direct(const std::string& path, int flags = O_RDONLY) {
  try {
    return FileHandle(path, flags | O_DIRECT);
  } catch (const io_error&) {
    return FileHandle();
  }
}

/// fn(0) .. fn(n-1) on `pool` and the caller, or on the caller alone when `pool` is null.
inline void run_tasks(ThreadPool* pool, std::size_t n, const std::function<void(std::size_t)>& fn) {
  if (pool != nullptr) {
    pool->parallel_for(n, fn);
  } else {
    for (std::size_t i = 0; i < n; ++i) fn(i);
  }
}

}  // namespace spillway::io::detail
