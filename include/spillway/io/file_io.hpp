#pragma once
/// @file file_io.hpp
/// Asynchronous reads and writes on an open FileHandle into or from any memory, KvikIO-style:
/// the destination's kind (host or device) is looked up from the pointer, and the future
/// completes when every byte has moved.

#include <spillway/io/file_handle.hpp>
#include <spillway/io/reader.hpp>
#include <spillway/io/thread_pool.hpp>

#include <cstddef>
#include <cstdint>
#include <future>

namespace spillway::io {

/// Reads exactly `bytes` at `offset` of `file` into `dst`, in the background on `pool`:
/// - host memory (pageable or pinned): through `file`'s own descriptor, in tasks of
///   `options.task_size` on the pool's threads;
/// - device memory of the current GPU: as read_file_to_device (pinned bounce buffers with the
///   read of one task overlapping the copy of the last, or GDS where `options.gds` allows),
///   on the same file reopened read-only.
/// The future gives `bytes`, or rethrows the io_error naming the file, offset and size (a short
/// read included). `dst` and `file` must stay valid until it is ready.
std::future<std::size_t> pread(const FileHandle& file, void* dst, std::size_t bytes,
                               std::uint64_t offset, ThreadPool& pool,
                               ReadOptions options = ReadOptions::from_options());

/// Writes exactly `bytes` from `src` (host or device memory, as for pread) at `offset` of
/// `file`, in the background on `pool`; device memory goes through write_file_from_device. The
/// future gives `bytes` or rethrows the io_error. `src` and `file` must stay valid until then.
std::future<std::size_t> pwrite(const FileHandle& file, const void* src, std::size_t bytes,
                                std::uint64_t offset, ThreadPool& pool,
                                ReadOptions options = ReadOptions::from_options());

}  // namespace spillway::io
