// Copy rates from GPU 0 into GPU 1 memory: cudaMalloc, a private pool, a shareable (POSIX fd)
// pool in this process, and the shareable pool's allocation imported by another process.
#include <cuda_runtime.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      _exit(1);                                                                \
    }                                                                          \
  } while (0)
static const size_t N = size_t(4) << 30;
cudaMemPool_t make_pool(int dev, bool shareable) {
  cudaMemPoolProps p{};
  p.allocType = cudaMemAllocationTypePinned;
  p.location.type = cudaMemLocationTypeDevice;
  p.location.id = dev;
  p.handleTypes = shareable ? cudaMemHandleTypePosixFileDescriptor : cudaMemHandleTypeNone;
  cudaMemPool_t pool;
  CK(cudaMemPoolCreate(&pool, &p));
  cudaMemAccessDesc d{};
  d.location.type = cudaMemLocationTypeDevice;
  d.location.id = 1 - dev;
  d.flags = cudaMemAccessFlagsProtReadWrite;
  CK(cudaMemPoolSetAccess(pool, &d, 1));
  return pool;
}
double copy_rate(void* dst, void* src, cudaStream_t s) {
  CK(cudaMemcpyAsync(dst, src, N, cudaMemcpyDefault, s));
  CK(cudaStreamSynchronize(s));
  auto t = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) CK(cudaMemcpyAsync(dst, src, N, cudaMemcpyDefault, s));
  CK(cudaStreamSynchronize(s));
  return 5.0 * N / std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count() /
         1e9;
}
int main() {
  int pipefd[2];
  pipe(pipefd);
  int back[2];
  pipe(back);
  pid_t child = fork();
  if (child == 0) {  // the exporter: GPU 1, a shareable pool, one allocation
    CK(cudaSetDevice(1));
    cudaMemPool_t pool = make_pool(1, true);
    void* p;
    CK(cudaMallocFromPoolAsync(&p, N, pool, nullptr));
    CK(cudaDeviceSynchronize());
    int fd = -1;
    CK(cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor, 0));
    cudaMemPoolPtrExportData data;
    CK(cudaMemPoolExportPointer(&data, p));
    int pid = getpid();
    write(pipefd[1], &pid, sizeof pid);
    write(pipefd[1], &fd, sizeof fd);
    write(pipefd[1], &data, sizeof data);
    char c;
    read(back[0], &c, 1);  // until the parent is done
    CK(cudaFreeAsync(p, nullptr));
    CK(cudaDeviceSynchronize());
    _exit(0);
  }
  CK(cudaSetDevice(0));
  CK(cudaDeviceEnablePeerAccess(1, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void* src;
  CK(cudaMalloc(&src, N));
  CK(cudaMemset(src, 1, N));
  {
    CK(cudaSetDevice(1));
    void* d;
    CK(cudaMalloc(&d, N));
    CK(cudaSetDevice(0));
    printf("into cudaMalloc on GPU 1: %.1f GB/s\n", copy_rate(d, src, s));
  }
  for (int sh = 0; sh < 2; ++sh) {
    CK(cudaSetDevice(1));
    cudaMemPool_t pool = make_pool(1, sh);
    void* d;
    CK(cudaMallocFromPoolAsync(&d, N, pool, nullptr));
    CK(cudaDeviceSynchronize());
    CK(cudaSetDevice(0));
    printf("into a %s pool on GPU 1 (this process): %.1f GB/s\n", sh ? "shareable" : "private",
           copy_rate(d, src, s));
  }
  int pid, fd;
  cudaMemPoolPtrExportData data;
  read(pipefd[0], &pid, sizeof pid);
  read(pipefd[0], &fd, sizeof fd);
  read(pipefd[0], &data, sizeof data);
  int pidfd = syscall(SYS_pidfd_open, pid, 0);
  int mine = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
  printf("pidfd_getfd: %d\n", mine);
  cudaMemPool_t imported;
  CK(cudaMemPoolImportFromShareableHandle(&imported, (void*)(intptr_t)mine,
                                          cudaMemHandleTypePosixFileDescriptor, 0));
  cudaMemAccessDesc d{};
  d.location.type = cudaMemLocationTypeDevice;
  d.location.id = 0;
  d.flags = cudaMemAccessFlagsProtReadWrite;
  CK(cudaMemPoolSetAccess(imported, &d, 1));
  void* ip;
  CK(cudaMemPoolImportPointer(&ip, imported, &data));
  cudaPointerAttributes a;
  CK(cudaPointerGetAttributes(&a, ip));
  printf("imported pointer: type %d device %d\n", (int)a.type, a.device);
  printf("into the other process's shareable pool (imported): %.1f GB/s\n", copy_rate(ip, src, s));
  CK(cudaFree(ip));
  for (int i = 0; i < 4; ++i) {  // import, one copy, free: per transfer
    auto t0 = std::chrono::steady_clock::now();
    CK(cudaMemPoolImportPointer(&ip, imported, &data));
    auto t1 = std::chrono::steady_clock::now();
    CK(cudaMemcpyAsync(ip, src, N, cudaMemcpyDefault, s));
    CK(cudaStreamSynchronize(s));
    auto t2 = std::chrono::steady_clock::now();
    CK(cudaFreeAsync(ip, s));
    CK(cudaStreamSynchronize(s));
    auto t3 = std::chrono::steady_clock::now();
    auto ms = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count() * 1e3; };
    printf("import %.3f ms, copy %.2f ms (%.1f GB/s), free %.3f ms\n", ms(t0, t1), ms(t1, t2),
           N / (ms(t1, t2) / 1e3) / 1e9, ms(t2, t3));
  }
  write(back[1], "x", 1);
  waitpid(child, nullptr, 0);
  return 0;
}
