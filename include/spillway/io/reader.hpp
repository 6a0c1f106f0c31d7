#pragma once
/// @file reader.hpp
/// Parallel reads of a file range into host memory: split into tasks on a thread pool, through
/// the page cache or with O_DIRECT (the aligned middle direct, unaligned head and tail
/// buffered).

#include <spillway/core/options.hpp>
#include <spillway/io/file_handle.hpp>
#include <spillway/io/thread_pool.hpp>

#include <cstddef>
#include <cstdint>
#include <future>
#include <string>

namespace spillway::io {

struct ReadOptions {
  std::size_t task_size{4u << 20};  // bytes per task; a multiple of 4096 for direct reads
  bool direct{false};               // O_DIRECT for the aligned middle of the range
  IoGds gds{IoGds::off};            // GPUDirect Storage for device memory (options.hpp)

  /// SPILLWAY_IO_TASK_SIZE, SPILLWAY_IO_DIRECT and SPILLWAY_IO_GDS (see options.hpp).
  static ReadOptions from_options();
};

/// Which path a read took.
enum class ReadPath { buffered, direct };

/// Reads exactly `bytes` at `offset` of `path` into host memory `dst`, with `pool`'s threads and
/// the caller's (only the caller's when `pool` is null). When O_DIRECT is asked for but the file
/// system refuses it, the read is buffered and says so in the result. @throws spillway::io_error
/// naming file, offset and size
ReadPath read_file(const std::string& path, void* dst, std::size_t bytes, std::uint64_t offset,
                   ThreadPool* pool, const ReadOptions& options = {});

/// read_file in the background on `pool` (its task and the read's pieces all run there): the
/// future gives the path taken, or rethrows the read's io_error. `dst` must stay valid until
/// the future is ready.
std::future<ReadPath> read_file_async(std::string path, void* dst, std::size_t bytes,
                                      std::uint64_t offset, ThreadPool& pool,
                                      ReadOptions options = {});

}  // namespace spillway::io
