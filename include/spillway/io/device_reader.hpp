#pragma once
/// @file device_reader.hpp
/// Parallel reads of a file range into GPU memory through pinned bounce buffers.

#include <spillway/io/reader.hpp>
#include <spillway/io/staged_copy.hpp>

#include <cstddef>
#include <cstdint>
#include <future>
#include <string>

namespace spillway::io {

/// How a read into device memory went.
enum class DevicePath {
  bounce,    ///< through pinned bounce buffers, each thread overlapping a read and a copy
  pageable,  ///< straight into device memory: the GPU reads pageable memory (Grace Hopper)
  gds,       ///< GPUDirect Storage through cuFile (options.gds)
};

/// Reads exactly `bytes` at `offset` of `path` into device memory `dst` of the current GPU.
/// The range is cut into tasks of `options.task_size` bytes, dealt out to the caller's and
/// `pool`'s threads (one stripe of tasks each, at most one per lane of `staging`). A thread
/// reads its tasks into its two staging buffers in turn and copies each to the device on its
/// own stream, so the read of one task overlaps the copy of the one before (KvikIO waits for
/// each copy; see staged_read_to_device). Empty `staging` means the process's pooled pinned
/// lanes, kept for reuse per GPU and task size but outside any tier's accounting; to count
/// them against PINNED_HOST use spillway::read_file_into (memory/file_transfers.hpp). Tasks
/// whose file range is 4096-aligned are read with O_DIRECT when `options.direct` is set and the
/// file system allows it. Where the GPU reads pageable memory through the host page tables,
/// the tasks read straight into `dst` instead. With `options.gds` allowing it (options.hpp),
/// cuFile reads the whole range.
/// Returns the path taken, once the bytes are on the device.
/// @throws spillway::io_error naming file, offset and size; spillway::logic_error without a GPU
DevicePath read_file_to_device(const std::string& path, void* dst, std::size_t bytes,
                               std::uint64_t offset, ThreadPool* pool,
                               const ReadOptions& options = {}, Staging staging = {});

/// read_file_to_device in the background on `pool`, onto the caller's current GPU: the future
/// gives the path taken or rethrows the read's error. `dst` must stay valid until it is ready.
std::future<DevicePath> read_file_to_device_async(std::string path, void* dst, std::size_t bytes,
                                                  std::uint64_t offset, ThreadPool& pool,
                                                  ReadOptions options = {}, Staging staging = {});

}  // namespace spillway::io
