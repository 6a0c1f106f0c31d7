// The copies of the cuda_ipc backend: one kernel for a whole batch (resident warps take the
// pieces, cut into slices of at most 16 KiB, in turn), cudaMemcpyBatchAsync, both at once on
// two streams (mixed), or one cudaMemcpyAsync per piece.

#include <spillway/transfer/gpu_copies.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>

#include "core/detail/cuda_try.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace spillway::transfer::detail {
namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kWarp = 32;
/// Bytes a warp copies at a time: pieces above it are cut, so that a few large pieces still
/// keep every SM busy.
constexpr std::size_t kSlice = std::size_t{16} << 10;

cudaStream_t raw(Stream s) {
  return static_cast<cudaStream_t>(s.handle());
}

/// Lane `lane` of a warp's share of dst[0, bytes) = src[0, bytes): four loads in flight per
/// lane before their stores.
template <typename V>
__device__ void copy_slice(std::byte* dst, const std::byte* src, std::size_t bytes, unsigned lane) {
  constexpr unsigned kUnroll = 4;
  const std::size_t n = bytes / sizeof(V);
  auto* d = reinterpret_cast<V*>(dst);
  const auto* s = reinterpret_cast<const V*>(src);
  for (std::size_t base = lane; base < n; base += kUnroll * kWarp) {
    V v[kUnroll];
#pragma unroll
    for (unsigned k = 0; k < kUnroll; ++k) {
      const std::size_t i = base + k * kWarp;
      if (i < n) v[k] = s[i];
    }
#pragma unroll
    for (unsigned k = 0; k < kUnroll; ++k) {
      const std::size_t i = base + k * kWarp;
      if (i < n) d[i] = v[k];
    }
  }
  for (std::size_t i = n * sizeof(V) + lane; i < bytes; i += kWarp) dst[i] = src[i];
}

/// Which slice of which piece a warp copies, where a piece is cut into several.
struct Slice {
  std::uint32_t piece;
  std::uint32_t index;
};

/// Every warp takes items (piece i, or slices[i]) in turn until none is left.
__global__ void pieces_kernel(const Piece* pieces, const Slice* slices, std::uint32_t items) {
  const unsigned lane = threadIdx.x % kWarp;
  const std::uint32_t warps = gridDim.x * (blockDim.x / kWarp);
  for (std::uint32_t item = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp; item < items;
       item += warps) {
    const Slice at = slices == nullptr ? Slice{item, 0} : slices[item];
    const Piece p = pieces[at.piece];
    const std::size_t from = static_cast<std::size_t>(at.index) * kSlice;
    const std::size_t bytes = p.bytes - from < kSlice ? p.bytes - from : kSlice;
    auto* dst = static_cast<std::byte*>(p.dst) + from;
    const auto* src = static_cast<const std::byte*>(p.src) + from;
    const auto align =
        reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src);
    if (align % 16 == 0) {
      copy_slice<uint4>(dst, src, bytes, lane);
    } else if (align % 8 == 0) {
      copy_slice<std::uint64_t>(dst, src, bytes, lane);
    } else if (align % 4 == 0) {
      copy_slice<std::uint32_t>(dst, src, bytes, lane);
    } else {
      copy_slice<std::uint8_t>(dst, src, bytes, lane);
    }
  }
}

/// Blocks that keep every SM of the current GPU full, found once.
unsigned resident_blocks() {
  static const unsigned n = [] {
    int device = 0;
    int sms = 0;
    int per_sm = 0;
    SPILLWAY_CUDA_TRY(cudaGetDevice(&device));
    SPILLWAY_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    SPILLWAY_CUDA_TRY(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pieces_kernel, kThreads, 0));
    return static_cast<unsigned>(std::max(1, sms * std::max(1, per_sm)));
  }();
  return n;
}

void launch_kernel(std::span<const Piece> pieces, Stream stream, CopyScratch& scratch) {
  std::size_t items = 0;
  for (const Piece& p : pieces) items += (p.bytes + kSlice - 1) / kSlice;
  SPILLWAY_EXPECTS(items < 0xFFFFFFFFU, "cuda_ipc: a batch of over 2^32 kernel slices");
  const bool sliced = items != pieces.size();
  // The pieces, then (if any piece is cut) the slices, in page-locked memory.
  const std::size_t piece_bytes = pieces.size_bytes();
  const std::size_t bytes = piece_bytes + (sliced ? items * sizeof(Slice) : 0);
  // Pieces built in the scratch (CopyScratch::pieces) move with it when it grows: read them
  // only where it keeps them afterwards.
  const bool in_place = reinterpret_cast<const std::byte*>(pieces.data()) == scratch.host();
  scratch.reserve(bytes);
  std::byte* host = scratch.host();
  if (in_place) {
    pieces = {reinterpret_cast<const Piece*>(host), pieces.size()};
  } else {
    std::memcpy(host, pieces.data(), piece_bytes);
  }
  if (sliced) {
    auto* slices = reinterpret_cast<Slice*>(host + piece_bytes);
    std::size_t at = 0;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const std::size_t n = (pieces[i].bytes + kSlice - 1) / kSlice;
      for (std::size_t k = 0; k < n; ++k) {
        slices[at++] = {static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(k)};
      }
    }
  }
  // The kernel reads the descriptors where they were written: page-locked memory, read over
  // PCIe once per item. An upload of them first cost a copy call (5-10 us) on the critical
  // path of every part.
  std::byte* d = scratch.device();
  const auto* d_pieces = reinterpret_cast<const Piece*>(d);
  const auto* d_slices = sliced ? reinterpret_cast<const Slice*>(d + piece_bytes) : nullptr;
  const std::size_t warps_per_block = kThreads / kWarp;
  const auto blocks = static_cast<unsigned>(
      std::min<std::size_t>((items + warps_per_block - 1) / warps_per_block, resident_blocks()));
  pieces_kernel<<<blocks, kThreads, 0, raw(stream)>>>(d_pieces, d_slices,
                                                      static_cast<std::uint32_t>(items));
  SPILLWAY_CUDA_TRY(cudaGetLastError());
}

void copy_batch(std::span<const Piece> pieces, Stream stream) {
  std::vector<void*> dsts(pieces.size());
  std::vector<const void*> srcs(pieces.size());
  std::vector<std::size_t> sizes(pieces.size());
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    dsts[i] = pieces[i].dst;
    srcs[i] = pieces[i].src;
    sizes[i] = pieces[i].bytes;
  }
  cuda::memcpy_batch_async(dsts.data(), srcs.data(), sizes.data(), pieces.size(), stream);
}

}  // namespace

CopyScratch::~CopyScratch() {
  cuda::free_pinned(host_);
}

void CopyScratch::reserve(std::size_t bytes) {
  if (bytes <= bytes_) return;
  bytes = std::max(bytes, 2 * bytes_);
  auto* host = static_cast<std::byte*>(cuda::malloc_pinned(bytes));
  if (bytes_ > 0) std::memcpy(host, host_, bytes_);
  cuda::free_pinned(host_);
  host_ = host;
  bytes_ = bytes;
  device_ = static_cast<std::byte*>(cuda::host_device_pointer(host_));
  SPILLWAY_EXPECTS(device_ != nullptr,
                   "cuda_ipc: the descriptors' page-locked memory is not mapped", cuda_error);
}

std::span<Piece> CopyScratch::pieces(std::size_t n) {
  reserve(n * sizeof(Piece));
  return {reinterpret_cast<Piece*>(host_), n};
}

double kernel_share(std::size_t mean_bytes) noexcept {
  // The kernel's stores over PCIe reach ~0.95 of a contiguous copy at any chunk size; the
  // copy engines lose time per chunk below 256 KiB. Together they fill each other's gaps best
  // with these shares (0.2-0.35 measured alike at 64 KiB; docs/decisions/transfer-engine.md).
  return mean_bytes < (std::size_t{256} << 10) ? 0.3 : 0.1;
}

void copy_mixed(std::span<const Piece> pieces, double share, Stream stream, const SideStream& side,
                CopyScratch& scratch) {
  std::size_t bytes = 0;
  for (const Piece& p : pieces) bytes += p.bytes;
  // The kernel takes whole pieces up to `share` of the bytes and the head of the piece at the
  // boundary (cut at 4 KiB), the copy engines the rest.
  const auto want = static_cast<std::size_t>(share * static_cast<double>(bytes));
  std::size_t k = 0;
  std::size_t got = 0;
  for (; k < pieces.size() && got + pieces[k].bytes <= want; ++k) got += pieces[k].bytes;
  const std::size_t cut = k < pieces.size() ? (want - got) / 4096 * 4096 : 0;
  // The copy engines' pieces are set aside first: the kernel's launch may move the pieces.
  std::vector<Piece> rest;
  rest.reserve(pieces.size() - k);
  if (k < pieces.size()) {
    const Piece& p = pieces[k];
    rest.push_back({static_cast<std::byte*>(p.dst) + cut,
                    static_cast<const std::byte*>(p.src) + cut, p.bytes - cut});
    rest.insert(rest.end(), pieces.begin() + static_cast<std::ptrdiff_t>(k) + 1, pieces.end());
  }
  std::vector<Piece> head;
  if (cut > 0) {
    head.assign(pieces.begin(), pieces.begin() + static_cast<std::ptrdiff_t>(k));
    head.push_back({pieces[k].dst, pieces[k].src, cut});
  }
  const std::span<const Piece> kernel_part =
      cut > 0 ? std::span<const Piece>(head) : pieces.first(k);
  if (kernel_part.empty() || rest.empty()) {
    copy_pieces(pieces, rest.empty() ? CopyMethod::kernel : CopyMethod::batch, stream, scratch);
    return;
  }
  // The kernel first: the copy engines' call takes host time per piece, and a kernel queued
  // behind it started late (64 KiB chunks between two processes: 0.71-0.82 of the engine's
  // contiguous write, 0.91-0.94 with the kernel first).
  const auto t0 = std::chrono::steady_clock::now();
  cuda::event_record(side.fork, stream);
  cuda::stream_wait_event(side.stream, side.fork);
  launch_kernel(kernel_part, side.stream, scratch);
  const auto t1 = std::chrono::steady_clock::now();
  // The copy engines' pieces go in groups of kGroup, a call each. A call takes 0.4-0.8 us of
  // host time a piece, and the engines start on its pieces only once it has returned: in one
  // call they started late enough for the kernel to run out of work first.
  constexpr std::size_t kGroup = 128;
  for (std::size_t at = 0; at < rest.size(); at += kGroup) {
    copy_batch(std::span<const Piece>(rest).subspan(at, std::min(kGroup, rest.size() - at)),
               stream);
  }
  cuda::event_record(side.join, side.stream);
  cuda::stream_wait_event(stream, side.join);
  if (spillway::detail::log_enabled(LogLevel::trace)) {
    const auto t2 = std::chrono::steady_clock::now();
    using us = std::chrono::duration<double, std::micro>;
    SPILLWAY_LOG(trace, "cuda_ipc: mixed copies, "
                            << kernel_part.size() << " pieces to the kernel ("
                            << us(t1 - t0).count() << " us to launch), " << rest.size()
                            << " to the copy engines (" << us(t2 - t1).count() << " us to queue)");
  }
}

void copy_pieces(std::span<const Piece> pieces, CopyMethod method, Stream stream,
                 CopyScratch& scratch, const SideStream* side) {
  if (pieces.empty()) return;
  switch (method) {
    case CopyMethod::kernel:
      launch_kernel(pieces, stream, scratch);
      return;
    case CopyMethod::batch:
      copy_batch(pieces, stream);
      return;
    case CopyMethod::mixed: {
      SPILLWAY_EXPECTS(side != nullptr, "cuda_ipc: mixed copies need a side stream");
      std::size_t bytes = 0;
      for (const Piece& p : pieces) bytes += p.bytes;
      const double share =
          side->kernel_share > 0 ? side->kernel_share : kernel_share(bytes / pieces.size());
      copy_mixed(pieces, share, stream, *side, scratch);
      return;
    }
    case CopyMethod::per_chunk:
      for (const Piece& p : pieces) cuda::memcpy_async(p.dst, p.src, p.bytes, stream);
      return;
    case CopyMethod::automatic:
      break;
  }
  SPILLWAY_FAIL("cuda_ipc: copy_pieces needs a method chosen");
}

}  // namespace spillway::transfer::detail
