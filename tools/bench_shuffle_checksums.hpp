#pragma once
// The checksums spillway-bench-shuffle validates by: of a table or a packed chunk, on the GPU
// where the GPU can read it, else on the CPU (an order-independent TableChecksum either way).

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/pack.hpp>

#include <utility>

namespace spillway::bench {

/// The checksum of a table: on the GPU with `gpu` (device memory), else on the CPU.
inline TableChecksum checksum_of(const TableView& t, bool gpu, BufferResource& br) {
  return gpu ? gpu::checksum(t, br, br.stream()) : spillway::checksum(t);
}

/// The checksum of a packed chunk, which stays packed: on the GPU where the GPU can read it
/// (a packed chunk that found no room there may be in host memory), else on the CPU.
inline TableChecksum checksum_of(PackedData& p, bool gpu, BufferResource& br) {
  const MemoryType at = p.payload->mem_type();
  const bool on_gpu = gpu && (at == MemoryType::DEVICE || at == MemoryType::PINNED_HOST);
  UnpackedTable u = on_gpu ? gpu::unpack(std::move(p), br.stream()) : unpack(std::move(p));
  const TableChecksum c =
      on_gpu ? gpu::checksum(u.view(), br, br.stream()) : spillway::checksum(u.view());
  p = std::move(u).release();
  return c;
}

}  // namespace spillway::bench
