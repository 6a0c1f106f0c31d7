#include "table/gpu/detail/packed_outputs.hpp"

#include "table/detail/payload_blocks.hpp"

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/host_memory_resource.hpp>

#include <algorithm>

#include <array>
#include <span>

namespace spillway::gpu::detail {

PackedOutputs::~PackedOutputs() {
  if (registered_.empty()) return;
  // An exception left kernels that may still write the mapped memory: wait for them first.
  try {
    cuda::stream_synchronize(stream_);
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw
  }
  for (void* p : registered_) cuda::host_unregister(p);
}

std::unique_ptr<Buffer> PackedOutputs::allocate(std::size_t bytes) {
  static constexpr std::array<MemoryType, 3> order{MemoryType::DEVICE, MemoryType::PINNED_HOST,
                                                   MemoryType::HOST};
  // Below DEVICE, small HOST buffers share pages (slabs), which cudaHostRegister cannot map
  // twice: HOST output gets a block of its own, at least one larger than the slabs' sizes.
  const std::size_t own = std::max(bytes, HostMemoryResource::largest_slab_size + 1);
  auto res = br_.waiting_for_memory([&] {
    auto r = br_.reserve_or_spill(MemoryType::DEVICE, bytes);
    return r ? std::move(r) : br_.try_reserve_in_order(std::span(order).subspan(1), own);
  });
  if (!res) br_.throw_out_of_memory(order, bytes);
  if (res->mem_type() == MemoryType::DEVICE) return br_.allocate(*res, bytes, stream_);
  std::unique_ptr<Buffer> buf;
  if (res->mem_type() == MemoryType::HOST && own > bytes) {
    std::shared_ptr<Buffer> block = br_.allocate(*res, own, stream_);
    buf = BufferResource::view(*block, 0, bytes, block);
  } else {
    buf = br_.allocate(*res, bytes, stream_);
  }
  if (buf->mem_type() == MemoryType::HOST && bytes > 0) {
    SPILLWAY_EXPECTS(cuda::host_register(buf->data(), bytes),
                     "packing: " + format_bytes(static_cast<double>(bytes)) +
                         " of output found room only on HOST, and that memory could not be "
                         "mapped for the GPU (cudaHostRegister); usage: " +
                         br_.usage(),
                     out_of_memory);
    registered_.push_back(buf->data());
  }
  br_.statistics().add_bytes("pack-into-host-memory", static_cast<double>(bytes));
  return buf;
}

std::vector<std::unique_ptr<Buffer>> PackedOutputs::allocate_all(
    std::span<const std::size_t> sizes) {
  place_all(sizes);
  return take();
}

std::vector<std::byte*> PackedOutputs::place_all(std::span<const std::size_t> sizes) {
  SPILLWAY_EXPECTS(placed_.empty(), "PackedOutputs::place_all: the last placement not taken");
  std::vector<std::byte*> out(sizes.size());
  placed_.resize(sizes.size());
  spillway::detail::for_each_block(
      sizes.size(), [&](std::size_t i) { return sizes[i]; },
      [&](std::size_t bytes) { return br_.footprint(MemoryType::DEVICE, bytes); },
      [&](std::size_t first, std::size_t last, std::size_t total) {
        auto res = last - first > 1 ? br_.try_reserve(MemoryType::DEVICE, total) : std::nullopt;
        if (!res) {  // one payload, or no room for a block: each on its own, as allocate() does
          for (std::size_t i = first; i < last; ++i) {
            placed_[i].own = allocate(sizes[i]);
            out[i] = placed_[i].own->data();
          }
          return;
        }
        blocks_.push_back(br_.allocate(*res, total, stream_));
        std::byte* base = blocks_.back()->data();
        for (std::size_t i = first, at = 0; i < last; at += sizes[i], ++i) {
          at = spillway::detail::place_in_block(at);
          placed_[i] = Placed{nullptr, blocks_.size() - 1, at, sizes[i]};
          out[i] = base + at;
        }
      });
  return out;
}

std::vector<std::unique_ptr<Buffer>> PackedOutputs::take() {
  std::vector<std::unique_ptr<Buffer>> out(placed_.size());
  for (std::size_t i = 0; i < placed_.size(); ++i) {
    Placed& p = placed_[i];
    out[i] = p.own ? std::move(p.own)
                   : BufferResource::view(*blocks_[p.block], p.at, p.bytes, blocks_[p.block]);
  }
  placed_.clear();
  blocks_.clear();
  return out;
}

void PackedOutputs::finish() {
  if (registered_.empty()) return;
  cuda::stream_synchronize(stream_);
  for (void* p : registered_) cuda::host_unregister(p);
  registered_.clear();
}

}  // namespace spillway::gpu::detail
