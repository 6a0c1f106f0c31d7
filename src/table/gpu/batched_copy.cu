#include "table/gpu/detail/batched_copy.cuh"

#include <spillway/core/error.hpp>
#include <spillway/table/gpu.hpp>

#include <spillway/table/column_view.hpp>

#include "core/detail/cuda_try.hpp"
#include "table/gpu/detail/device_column.cuh"

#include <algorithm>
#include <vector>

namespace spillway::gpu::detail {

namespace {

constexpr unsigned block_threads = 256;

/// What one block does with items [a, b) of a range.
/// A copy is memory-latency bound unless many loads are in flight: each block copies 32 KiB
/// with four loads a thread issued before their stores (a block of 256 KiB, one load at a
/// time, left fewer blocks than SMs and a fifth of the bandwidth).
struct CopyBody {
  static constexpr std::size_t chunk = std::size_t{32} << 10;  // bytes per block
  static constexpr unsigned unroll = 4;                        // loads in flight a thread
  __host__ __device__ static std::size_t items(const CopyRange& r) { return r.bytes; }

  template <typename V>
  __device__ static void copy(const CopyRange& r, std::size_t a, std::size_t b) {
    auto* d = reinterpret_cast<V*>(r.dst + a);
    const auto* s = reinterpret_cast<const V*>(r.src + a);
    const std::size_t n = (b - a) / sizeof(V);
    if (r.src == nullptr) {
      for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = V{};
    } else {
      const std::size_t step = blockDim.x;
      std::size_t i = threadIdx.x;
      for (; i + (unroll - 1) * step < n; i += unroll * step) {
        V v[unroll];
#pragma unroll
        for (unsigned k = 0; k < unroll; ++k) v[k] = s[i + k * step];
#pragma unroll
        for (unsigned k = 0; k < unroll; ++k) d[i + k * step] = v[k];
      }
      for (; i < n; i += step) d[i] = s[i];
    }
    for (std::size_t i = a + n * sizeof(V) + threadIdx.x; i < b; i += blockDim.x) {
      r.dst[i] = r.src == nullptr ? std::byte{0} : r.src[i];
    }
  }

  __device__ void operator()(const CopyRange& r, std::size_t a, std::size_t b) const {
    // `a` is a multiple of the chunk, so the range's alignment is the chunk's.
    const auto align = reinterpret_cast<std::uintptr_t>(r.dst) |
                       (r.src == nullptr ? 0 : reinterpret_cast<std::uintptr_t>(r.src));
    if (align % 16 == 0) {
      copy<uint4>(r, a, b);
    } else if (align % 8 == 0) {
      copy<std::uint64_t>(r, a, b);
    } else if (align % 4 == 0) {
      copy<std::uint32_t>(r, a, b);
    } else {
      copy<std::uint8_t>(r, a, b);
    }
  }
};

struct BitBody {
  static constexpr std::size_t chunk = std::size_t{64} << 10;  // output bytes per block
  __host__ __device__ static std::size_t items(const BitRange& r) { return mask_bytes(r.bits); }

  __device__ void operator()(const BitRange& r, std::size_t a, std::size_t b) const {
    for (std::size_t k = a + threadIdx.x; k < b; k += blockDim.x) {
      const std::size_t s = r.src_bit + 8 * k;
      const std::size_t left = r.bits - 8 * k;  // bits still to copy, > 0
      const unsigned sh = s & 7U;
      unsigned v = r.src[s >> 3] >> sh;
      if (sh != 0 && left > 8 - sh) v |= static_cast<unsigned>(r.src[(s >> 3) + 1]) << (8 - sh);
      if (left < 8) v &= (1U << left) - 1;
      r.dst[k] = static_cast<std::uint8_t>(v);
    }
  }
};

struct RebaseBody {
  static constexpr std::size_t chunk = std::size_t{64} << 10;  // offsets per block
  __host__ __device__ static std::size_t items(const RebaseRange& r) { return r.count; }

  __device__ void operator()(const RebaseRange& r, std::size_t a, std::size_t b) const {
    const std::int32_t shift = r.base - r.src[0];
    for (std::size_t i = a + threadIdx.x; i < b; i += blockDim.x) r.dst[i] = r.src[i] + shift;
  }
};

/// Block `chunk`'s part of the ranges: its range (found by binary search over the ranges'
/// first chunks) and items [a, b) of it.
template <typename R, typename Body>
__device__ void run_chunk(const R* ranges, const std::size_t* first_chunk, std::size_t n,
                          Body body) {
  const std::size_t chunk = blockIdx.x;
  const std::size_t lo = last_at_or_below(first_chunk, n, chunk);
  const R r = ranges[lo];
  const std::size_t a = (chunk - first_chunk[lo]) * Body::chunk;
  const std::size_t b = a + Body::chunk < Body::items(r) ? a + Body::chunk : Body::items(r);
  body(r, a, b);
}

template <typename R, typename Body>
__global__ void ranges_kernel(const R* ranges, const std::size_t* first_chunk, std::size_t n,
                              Body body) {
  run_chunk(ranges, first_chunk, n, body);
}

/// Up to this many ranges travel in the kernel's arguments (at most ~1.3 KiB of them), not in
/// device memory: a batch of a few ranges (a concatenation's columns) then costs one launch, not
/// two allocations, two copies from pageable memory and two frees besides (~10-15 us of host
/// time a call).
constexpr std::size_t inline_ranges = 32;

template <typename R>
struct InlineRanges {
  R ranges[inline_ranges];
  std::size_t first_chunk[inline_ranges];
  std::size_t n;
};

template <typename R, typename Body>
__global__ void inline_ranges_kernel(const InlineRanges<R> in, Body body) {
  run_chunk(in.ranges, in.first_chunk, in.n, body);
}

template <typename Body, typename R>
void launch(std::span<const R> ranges, BufferResource& br, Stream stream) {
  std::vector<R> kept;
  std::vector<std::size_t> first;
  std::size_t chunks = 0;
  for (const R& r : ranges) {
    const std::size_t items = Body::items(r);
    if (items == 0) continue;
    kept.push_back(r);
    first.push_back(chunks);
    chunks += (items + Body::chunk - 1) / Body::chunk;
  }
  if (chunks == 0) return;
  SPILLWAY_EXPECTS(chunks <= 0x7FFFFFFFU, "batched copy: too many chunks");
  const auto blocks = static_cast<unsigned>(chunks);
  if (kept.size() <= inline_ranges) {
    InlineRanges<R> in{};
    std::copy(kept.begin(), kept.end(), in.ranges);
    std::copy(first.begin(), first.end(), in.first_chunk);
    in.n = kept.size();
    inline_ranges_kernel<<<blocks, block_threads, 0, raw(stream)>>>(in, Body{});
  } else {
    auto d_ranges = to_device(kept, br, stream);
    auto d_first = to_device(first, br, stream);
    ranges_kernel<<<blocks, block_threads, 0, raw(stream)>>>(
        as<const R>(*d_ranges), as<const std::size_t>(*d_first), kept.size(), Body{});
  }
  SPILLWAY_CUDA_TRY(cudaGetLastError());
}

}  // namespace

void copy_ranges(std::span<const CopyRange> ranges, BufferResource& br, Stream stream) {
  launch<CopyBody>(ranges, br, stream);
}
void copy_ranges(std::span<const BitRange> ranges, BufferResource& br, Stream stream) {
  launch<BitBody>(ranges, br, stream);
}
void copy_ranges(std::span<const RebaseRange> ranges, BufferResource& br, Stream stream) {
  launch<RebaseBody>(ranges, br, stream);
}

}  // namespace spillway::gpu::detail

namespace spillway::gpu {

void copy_batch(std::span<void* const> dsts, std::span<const void* const> srcs,
                std::span<const std::size_t> sizes, BufferResource& br, Stream stream) {
  SPILLWAY_EXPECTS(dsts.size() == srcs.size() && srcs.size() == sizes.size(),
                   "copy_batch: " + std::to_string(dsts.size()) + " destinations, " +
                       std::to_string(srcs.size()) + " sources and " +
                       std::to_string(sizes.size()) + " sizes");
  std::vector<detail::CopyRange> ranges;
  ranges.reserve(dsts.size());
  for (std::size_t i = 0; i < dsts.size(); ++i) {
    ranges.push_back(
        {static_cast<std::byte*>(dsts[i]), static_cast<const std::byte*>(srcs[i]), sizes[i]});
  }
  detail::copy_ranges(std::span<const detail::CopyRange>(ranges), br, stream);
}

}  // namespace spillway::gpu
