// The probe of call 10 (not built by the project; nvcc -O3 -arch=sm_90 -std=c++17): does a
// kernel that writes host memory with TMA bulk stores (cp.async.bulk.global.shared::cta) reach
// the copy engines' PCIe rate, where plain stores reach ~0.94? Device -> pinned host, one
// process, CUDA events, median of 11.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#define CK(x)                                                                       \
  do {                                                                              \
    cudaError_t e = (x);                                                            \
    if (e != cudaSuccess) {                                                         \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

struct Piece {
  char* dst;
  const char* src;
  unsigned bytes;
};

__global__ void plain_kernel(const Piece* pieces, unsigned n) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned warps = gridDim.x * (blockDim.x / 32);
  for (unsigned i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; i < n; i += warps) {
    const Piece p = pieces[i];
    const uint4* s = reinterpret_cast<const uint4*>(p.src);
    uint4* d = reinterpret_cast<uint4*>(p.dst);
    const unsigned m = p.bytes / 16;
    for (unsigned b = lane; b < m; b += 128) {
      uint4 v[4];
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (b + 32 * k < m) v[k] = s[b + 32 * k];
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (b + 32 * k < m) d[b + 32 * k] = v[k];
    }
  }
}

__device__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// One block at a time per piece (pieces <= kBuf bytes, 16-byte aligned, multiple of 16):
// the block loads it into one of NBUF shared buffers, then one thread stores it with a bulk
// copy; a buffer is reused once the store that read it has read it.
template <int NBUF, unsigned kBuf>
__global__ void tma_kernel(const Piece* pieces, unsigned n) {
  extern __shared__ __align__(128) unsigned char buf[];
  unsigned k = 0;
  for (unsigned i = blockIdx.x; i < n; i += gridDim.x, ++k) {
    const unsigned slot = k % NBUF;
    unsigned char* b = buf + slot * kBuf;
    if (threadIdx.x == 0)
      asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(NBUF - 1) : "memory");
    __syncthreads();
    const Piece p = pieces[i];
    const uint4* s = reinterpret_cast<const uint4*>(p.src);
    uint4* d = reinterpret_cast<uint4*>(b);
    for (unsigned j = threadIdx.x; j < p.bytes / 16; j += blockDim.x) d[j] = s[j];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(p.dst),
                   "r"(smem_addr(b)), "r"(p.bytes)
                   : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
  }
  if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

template <typename F>
float timed(F&& f) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> v;
  for (int r = 0; r < 12; ++r) {
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (r > 0) v.push_back(ms);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  const size_t total = size_t{64} << 20;
  char *src, *dst;
  CK(cudaMalloc(&src, 2 * total));
  CK(cudaMallocHost(&dst, 2 * total));
  CK(cudaMemset(src, 7, 2 * total));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  constexpr unsigned kBuf = 16384;
  CK(cudaFuncSetAttribute(tma_kernel<4, kBuf>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          4 * kBuf));
  CK(cudaFuncSetAttribute(tma_kernel<8, kBuf>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          8 * kBuf));
  CK(cudaFuncSetAttribute(tma_kernel<2, kBuf>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          2 * kBuf));
  const float ce = timed([&] { CK(cudaMemcpyAsync(dst, src, total, cudaMemcpyDeviceToHost)); });
  const double ce_gbs = total / (ce * 1e6);
  std::printf("contiguous cudaMemcpyAsync: %.2f GB/s\n", ce_gbs);
  for (const size_t chunk : {size_t{4096}, size_t{16384}, size_t{65536}, size_t{1} << 20}) {
    const size_t n = total / chunk;
    std::vector<size_t> so(2 * n), dso(2 * n);
    for (size_t i = 0; i < 2 * n; ++i) so[i] = dso[i] = i;
    std::mt19937_64 rng(chunk);
    std::shuffle(so.begin(), so.end(), rng);
    std::shuffle(dso.begin(), dso.end(), rng);
    // Pieces of at most 16 KiB (chunks above are cut), as the engine's slices.
    std::vector<Piece> pieces;
    for (size_t i = 0; i < n; ++i)
      for (size_t at = 0; at < chunk; at += kBuf)
        pieces.push_back({dst + dso[i] * chunk + at, src + so[i] * chunk + at,
                          static_cast<unsigned>(std::min<size_t>(kBuf, chunk - at))});
    Piece* d_pieces;
    CK(cudaMalloc(&d_pieces, pieces.size() * sizeof(Piece)));
    CK(cudaMemcpy(d_pieces, pieces.data(), pieces.size() * sizeof(Piece), cudaMemcpyHostToDevice));
    const unsigned np = static_cast<unsigned>(pieces.size());
    const float plain = timed([&] {
      const unsigned blocks = std::min<unsigned>((np + 7) / 8, sms * 8);
      plain_kernel<<<blocks, 256>>>(d_pieces, np);
    });
    auto run_tma = [&](auto kernel, int nbuf, int per_sm, int threads) {
      return timed([&] { kernel<<<sms * per_sm, threads, nbuf * kBuf>>>(d_pieces, np); });
    };
    const float t4 = run_tma(tma_kernel<4, kBuf>, 4, 1, 256);
    const float t4x2 = run_tma(tma_kernel<4, kBuf>, 4, 2, 256);
    const float t2x4 = run_tma(tma_kernel<2, kBuf>, 2, 4, 256);
    std::memset(dst, 0, 2 * total);
    const float t8 = run_tma(tma_kernel<8, kBuf>, 8, 1, 512);
    CK(cudaGetLastError());
    auto f = [&](float ms) { return (total / (ms * 1e6)) / ce_gbs; };
    std::printf(
        "chunk %7zu (%u pieces): plain kernel %.3f | tma 4buf x1 %.3f, 4buf x2 %.3f, 2buf x4 %.3f, "
        "8buf x1 %.3f (of contiguous cudaMemcpyAsync)\n",
        chunk, np, f(plain), f(t4), f(t4x2), f(t2x4), f(t8));
    // every chunk's bytes after the last tma runs (the destination was zeroed before them)
    bool ok = true;
    for (size_t i = 0; i < n && ok; ++i)
      for (size_t j = 0; j < chunk && ok; ++j) ok = dst[dso[i] * chunk + j] == 7;
    std::printf("  check %s\n", ok ? "ok" : "BAD");
    CK(cudaFree(d_pieces));
  }
  return 0;
}
