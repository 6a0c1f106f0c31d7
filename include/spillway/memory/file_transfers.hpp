#pragma once
/// @file file_transfers.hpp
/// File reads into a Buffer of any tier, their staging paid for by the BufferResource.

#include <spillway/io/device_reader.hpp>
#include <spillway/io/reader.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include <cstdint>
#include <string>

namespace spillway {

/// Reads `dst.size()` bytes at `offset` of `path` into `dst` (DEVICE, PINNED_HOST or HOST),
/// with `pool`'s threads and the caller's. Host buffers are read straight into (io::read_file).
/// A DEVICE buffer goes through staging that `br` allocates (BufferResource::allocate_staging:
/// one lane per thread where the limits allow, fewer or smaller otherwise), so that its bounce
/// buffers count against PINNED_HOST or HOST and never take them past their limits. GPUDirect
/// Storage, where `options.gds` allows it, needs no staging. Returns once the bytes are in
/// `dst`. @throws spillway::io_error naming file, offset and size; spillway::out_of_memory when
/// not even the smallest staging fits; spillway::logic_error for a DISK buffer
void read_file_into(BufferResource& br, const std::string& path, std::uint64_t offset, Buffer& dst,
                    io::ThreadPool* pool,
                    const io::ReadOptions& options = io::ReadOptions::from_options());

}  // namespace spillway
