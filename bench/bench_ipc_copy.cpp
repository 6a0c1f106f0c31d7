// The cuda_ipc backend's ways of moving a batch, timed on the GPU alone (CUDA events, one
// process, no engine): the gather/scatter kernel, cudaMemcpyBatchAsync, both at once (mixed)
// and a cudaMemcpyAsync per chunk, for chunks scattered at random over regions of twice the batch,
// from device memory into device memory, pinned host memory (cudaMallocHost) or shared host
// memory (a memfd mapped and page-locked with cudaHostRegister, the memory one process can map
// from another). Beside each, one contiguous
// cudaMemcpyAsync of the same bytes on the same path, in the same run. Medians of 11 runs.
// What it finds sets choose() in src/transfer/cuda_ipc.cpp.
#include <spillway/core/cuda.hpp>

#include <spillway/transfer/gpu_copies.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

using namespace spillway;
using namespace spillway::transfer::detail;

namespace {

constexpr std::size_t kBatch = 64 << 20;
constexpr int kRuns = 11;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// GB/s of `pieces` as `copy()` queues them on `stream`, median of kRuns, after one warm-up.
template <typename Copy>
double timed(std::span<const Piece> pieces, Stream stream, Copy&& copy) {
  std::size_t bytes = 0;
  for (const Piece& p : pieces) bytes += p.bytes;
  void* start = cuda::event_create();
  void* end = cuda::event_create();
  std::vector<double> v;
  for (int r = 0; r <= kRuns; ++r) {
    cuda::event_record(start, stream);
    copy();
    cuda::event_record(end, stream);
    cuda::event_synchronize(end);
    if (r > 0) v.push_back(static_cast<double>(bytes) / (cuda::event_elapsed_ms(start, end) * 1e6));
  }
  cuda::event_destroy(start);
  cuda::event_destroy(end);
  return median(v);
}

double rate(std::span<const Piece> pieces, CopyMethod method, Stream stream, CopyScratch& scratch) {
  return timed(pieces, stream, [&] { copy_pieces(pieces, method, stream, scratch); });
}

/// With `share` of the bytes to the kernel.
double rate_mixed(std::span<const Piece> pieces, double share, Stream stream,
                  const SideStream& side, CopyScratch& scratch) {
  return timed(pieces, stream, [&] { copy_mixed(pieces, share, stream, side, scratch); });
}

}  // namespace

int main() {
  if (!cuda::is_available()) {
    std::printf("bench_ipc_copy: no GPU, nothing to measure\n");
    return 0;
  }
  Stream stream{cuda::stream_create()};
  const SideStream side{Stream{cuda::stream_create()}, cuda::event_create(), cuda::event_create()};
  CopyScratch scratch;
  auto* src = static_cast<std::uint8_t*>(cuda::malloc_device(2 * kBatch));
  auto* dev = static_cast<std::uint8_t*>(cuda::malloc_device(2 * kBatch));
  auto* pinned = static_cast<std::uint8_t*>(cuda::malloc_pinned(2 * kBatch));
  const int fd = ::memfd_create("bench_ipc_copy", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, 2 * kBatch) != 0) {
    std::perror("bench_ipc_copy: memfd");
    return 1;
  }
  void* mapped = ::mmap(nullptr, 2 * kBatch, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED || !cuda::host_register(mapped, 2 * kBatch)) {
    std::fprintf(stderr, "bench_ipc_copy: could not map and register the memfd\n");
    return 1;
  }
  auto* shared = static_cast<std::uint8_t*>(mapped);
  const auto name_of = [&](const std::uint8_t* p) {
    return p == dev ? "device" : p == pinned ? "pinned" : "shared";
  };
  // The source's bytes, different at every 4 KiB, to check what the mixed copies wrote.
  std::vector<std::uint8_t> want(2 * kBatch);
  for (std::size_t i = 0; i < want.size(); ++i) {
    want[i] = static_cast<std::uint8_t>(i * 131 + i / 4096);
  }
  cuda::memcpy_async(src, want.data(), want.size(), stream);
  std::vector<std::uint8_t> got(2 * kBatch);
  int wrong = 0;
  std::printf(
      "bench_ipc_copy: %s, device -> dst, random layout, %zu MiB a batch, GB/s (median "
      "of %d), ratio to one contiguous cudaMemcpyAsync of the same bytes; mixed: the kernel "
      "and the copy engines at once, the kernel's share as auto picks it, then (host memory) by "
      "share\n",
      cuda::device_name(), kBatch >> 20, kRuns);
  std::printf("%-7s %8s %8s %10s %8s %10s %8s %10s %8s %10s %8s\n", "dst", "chunk", "contig",
              "kernel", "of cont", "batch", "of cont", "per_chunk", "of cont", "mixed", "of cont");
  for (auto* dst : {dev, pinned, shared}) {
    for (const std::size_t chunk :
         {std::size_t{4} << 10, std::size_t{16} << 10, std::size_t{64} << 10,
          std::size_t{256} << 10, std::size_t{1} << 20, std::size_t{16} << 20}) {
      const std::size_t n = kBatch / chunk;
      std::vector<std::size_t> s(2 * n);
      std::vector<std::size_t> d(2 * n);
      std::iota(s.begin(), s.end(), 0);
      std::iota(d.begin(), d.end(), 0);
      std::mt19937_64 rng(chunk);
      std::shuffle(s.begin(), s.end(), rng);
      std::shuffle(d.begin(), d.end(), rng);
      std::vector<Piece> pieces(n);
      for (std::size_t i = 0; i < n; ++i) {
        pieces[i] = {dst + d[i] * chunk, src + s[i] * chunk, chunk};
      }
      const std::vector<Piece> contiguous{{dst, src, kBatch}};
      const double c = rate(contiguous, CopyMethod::per_chunk, stream, scratch);
      const double k = rate(pieces, CopyMethod::kernel, stream, scratch);
      const double b = rate(pieces, CopyMethod::batch, stream, scratch);
      const double p = rate(pieces, CopyMethod::per_chunk, stream, scratch);
      cuda::stream_synchronize(stream);  // then clear what the others wrote
      if (dst == dev) {
        cuda::memset_device(dev, 0, 2 * kBatch);
      } else {
        std::memset(dst, 0, 2 * kBatch);
      }
      const double m = rate_mixed(pieces, kernel_share(chunk), stream, side, scratch);
      cuda::memcpy_async(got.data(), dst, got.size(), stream);
      cuda::stream_synchronize(stream);
      for (std::size_t i = 0; i < n; ++i) {
        if (std::memcmp(got.data() + d[i] * chunk, want.data() + s[i] * chunk, chunk) != 0) {
          ++wrong;
        }
      }
      std::printf("%-7s %8zu %8.1f %10.1f %8.3f %10.1f %8.3f %10.1f %8.3f %10.1f %8.3f\n",
                  name_of(dst), chunk, c, k, k / c, b, b / c, p, p / c, m, m / c);
      if (dst != dev && chunk >= (std::size_t{16} << 10)) {
        std::printf("  mixed by share of the kernel, of cont:");
        for (const double share : {0.9, 0.7, 0.5, 0.3, 0.1}) {
          std::printf(" %.1f: %.3f", share, rate_mixed(pieces, share, stream, side, scratch) / c);
        }
        std::printf("\n");
      }
    }
  }
  std::printf("mixed copies checked: %s\n", wrong == 0 ? "every chunk right" : "SOME CHUNKS WRONG");
  cuda::free_device(src);
  cuda::free_device(dev);
  cuda::free_pinned(pinned);
  cuda::host_unregister(shared);
  ::munmap(shared, 2 * kBatch);
  ::close(fd);
  cuda::stream_destroy(stream.handle());
  cuda::stream_destroy(side.stream.handle());
  cuda::event_destroy(side.fork);
  cuda::event_destroy(side.join);
  return wrong == 0 ? 0 : 1;
}
