#pragma once
/// @file device_writer.hpp
/// Parallel writes of GPU memory to a file range through pinned bounce buffers (spilling a
/// device buffer to disk, checkpointing a table).

#include <spillway/io/device_reader.hpp>

#include <cstddef>
#include <cstdint>
#include <future>
#include <string>

namespace spillway::io {

/// Writes `bytes` of device memory `src` (of the current GPU) to `path` at `offset`, creating
/// the file if needed (it is not truncated). The range is cut into tasks of
/// `options.task_size` bytes, dealt out to the caller's and `pool`'s threads (one stripe each).
/// A thread copies a task into one of its two staging buffers while it writes the one before
/// from the other (staged_write_from_device; `staging` as there: empty means the process's
/// pooled pinned lanes, outside any tier's accounting). With `options.direct`, tasks whose file
/// range is 4096-aligned are written with O_DIRECT where the file system allows it. With
/// `options.gds` allowing it, cuFile writes the whole range. Returns the path taken once the bytes
/// are written (not necessarily on the disk: no fsync).
/// @throws spillway::io_error naming file, offset and size; spillway::logic_error without a GPU
DevicePath write_file_from_device(const std::string& path, const void* src, std::size_t bytes,
                                  std::uint64_t offset, ThreadPool* pool,
                                  const ReadOptions& options = {}, Staging staging = {});

/// write_file_from_device in the background on `pool`, from the caller's current GPU; the
/// future rethrows the write's error. `src` must stay valid until it is ready.
std::future<DevicePath> write_file_from_device_async(std::string path, const void* src,
                                                     std::size_t bytes, std::uint64_t offset,
                                                     ThreadPool& pool, ReadOptions options = {},
                                                     Staging staging = {});

}  // namespace spillway::io
