// The probe behind 2026-11-30-pinned-pool.md: does a pinned-host cudaMemPool grow past its
// first allocation on a freshly booted machine, and does cudaMallocHost work then?
// nvcc -O2 -std=c++17 -cudart static -o pinprobe pinprobe.cu; ./pinprobe GiB allocs threads
// [maxSize GiB]
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>
static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
size_t g_max = 0;
void run(int dev, size_t bytes, int n) {
  cudaSetDevice(dev);
  cudaMemPoolProps p{};
  p.allocType = cudaMemAllocationTypePinned;
  p.handleTypes = cudaMemHandleTypeNone;
  p.location.type = cudaMemLocationTypeHost;
  p.location.id = 0;
  p.maxSize = g_max;
  cudaMemPool_t pool;
  cudaError_t e = cudaMemPoolCreate(&pool, &p);
  printf("dev %d create %s\n", dev, cudaGetErrorName(e));
  uint64_t th = UINT64_MAX;
  cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &th);
  cudaMemAccessDesc d{};
  d.location.type = cudaMemLocationTypeDevice;
  d.location.id = dev;
  d.flags = cudaMemAccessFlagsProtReadWrite;
  cudaMemPoolSetAccess(pool, &d, 1);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  std::vector<void*> ptrs;
  for (int i = 0; i < n; ++i) {
    void* q = nullptr;
    double t = now();
    e = cudaMallocFromPoolAsync(&q, bytes, pool, s);
    cudaError_t e2 = cudaStreamSynchronize(s);
    printf("dev %d pool alloc %d: %s / sync %s %.3f s\n", dev, i, cudaGetErrorName(e),
           cudaGetErrorName(e2), now() - t);
    fflush(stdout);
    if (e != cudaSuccess) {
      cudaGetLastError();
      void* h = nullptr;
      t = now();
      e = cudaMallocHost(&h, bytes);
      printf("dev %d   cudaMallocHost: %s %.3f s\n", dev, cudaGetErrorName(e), now() - t);
      cudaGetLastError();
      t = now();
      e = cudaMallocFromPoolAsync(&q, bytes, pool, s);
      cudaStreamSynchronize(s);
      printf("dev %d   pool retry: %s %.3f s\n", dev, cudaGetErrorName(e), now() - t);
      cudaGetLastError();
      if (h) cudaFreeHost(h);
    }
    if (q) ptrs.push_back(q);
  }
  for (void* q : ptrs) cudaFreeAsync(q, s);
  cudaStreamSynchronize(s);
}
int main(int argc, char** argv) {
  size_t gib = argc > 1 ? atoi(argv[1]) : 5;
  int n = argc > 2 ? atoi(argv[2]) : 3;
  int threads = argc > 3 ? atoi(argv[3]) : 2;
  g_max = argc > 4 ? size_t(atoi(argv[4])) << 30 : 0;
  printf("maxSize %zu\n", g_max);
  std::vector<std::thread> t;
  for (int i = 0; i < threads; ++i) t.emplace_back(run, i, gib << 30, n);
  for (auto& x : t) x.join();
}
