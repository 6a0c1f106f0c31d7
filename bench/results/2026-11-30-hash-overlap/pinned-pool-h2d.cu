// Probe: H2D copy rate from cudaMallocHost memory vs a pinned host cudaMemPool (as spillway
// makes it), 1 GiB at once and 64 MiB pieces; medians of 5 after a warm-up.
#include <cuda_runtime.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
#define CK(x)                                        \
  do {                                               \
    cudaError_t e = (x);                             \
    if (e != cudaSuccess) {                          \
      printf("%s: %s\n", #x, cudaGetErrorString(e)); \
      return 1;                                      \
    }                                                \
  } while (0)
static double rate(void* dst, void* const* src, size_t piece, int pieces, cudaStream_t s) {
  std::vector<double> r;
  for (int rep = 0; rep < 6; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < pieces; ++i)
      cudaMemcpyAsync((char*)dst + i * piece, src[i], piece, cudaMemcpyHostToDevice, s);
    cudaStreamSynchronize(s);
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep) r.push_back(double(piece) * pieces / sec / 1e9);
  }
  std::sort(r.begin(), r.end());
  return r[r.size() / 2];
}
int main() {
  const size_t G = size_t(1) << 30, P = size_t(64) << 20;
  const int n = int(G / P);
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  void* dev;
  CK(cudaMalloc(&dev, G));
  void* host;
  CK(cudaMallocHost(&host, G));
  memset(host, 1, G);
  std::vector<void*> hp(n);
  for (int i = 0; i < n; ++i) hp[i] = (char*)host + i * P;
  printf("cudaMallocHost 1 GiB at once: %.1f GB/s\n", rate(dev, &host, G, 1, s));
  printf("cudaMallocHost 64 MiB x 16:  %.1f GB/s\n", rate(dev, hp.data(), P, n, s));
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeHost;
  props.location.id = 0;
  props.maxSize = ((size_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE) + G - 1) / G * G;
  cudaMemPool_t pool;
  CK(cudaMemPoolCreate(&pool, &props));
  uint64_t th = UINT64_MAX;
  CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &th));
  cudaMemAccessDesc d{};
  d.location.type = cudaMemLocationTypeDevice;
  d.location.id = 0;
  d.flags = cudaMemAccessFlagsProtReadWrite;
  CK(cudaMemPoolSetAccess(pool, &d, 1));
  void* big;
  CK(cudaMallocFromPoolAsync(&big, G, pool, s));
  CK(cudaStreamSynchronize(s));
  memset(big, 1, G);
  printf("pool 1 GiB at once:          %.1f GB/s\n", rate(dev, &big, G, 1, s));
  std::vector<void*> pp(n);
  for (int i = 0; i < n; ++i) {
    CK(cudaMallocFromPoolAsync(&pp[i], P, pool, s));
  }
  CK(cudaStreamSynchronize(s));
  for (int i = 0; i < n; ++i) memset(pp[i], 1, P);
  printf("pool 64 MiB x 16 (separate): %.1f GB/s\n", rate(dev, pp.data(), P, n, s));
  std::vector<void*> bp(n);
  for (int i = 0; i < n; ++i) bp[i] = (char*)big + i * P;
  printf("pool 1 GiB as 64 MiB x 16:   %.1f GB/s\n", rate(dev, bp.data(), P, n, s));
  return 0;
}
