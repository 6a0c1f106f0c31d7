// Micro-benchmark of 2026-12-05 (bench/NOTES.md, "The CPU scatter's write-combining groups").
// Build: g++ -O2 -march=native -o cma cma.cpp; run without arguments (sc: [block rows] [P] [K]).
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>
int main() {
  const size_t N = 64 << 20, C = 64 << 10, n = N / C;
  char* src = (char*)aligned_alloc(4096, 2 * N);
  memset(src, 1, 2 * N);
  char* dst = (char*)aligned_alloc(4096, 2 * N);
  memset(dst, 2, 2 * N);
  pid_t self = getpid();
  std::vector<size_t> so(2 * n), dof(2 * n);
  std::iota(so.begin(), so.end(), 0);
  std::iota(dof.begin(), dof.end(), 0);
  std::mt19937_64 rng(1);
  std::shuffle(so.begin(), so.end(), rng);
  std::shuffle(dof.begin(), dof.end(), rng);
  auto t = [&](int per) {
    auto t0 = std::chrono::steady_clock::now();
    if (per == 0) {
      iovec l{dst, N}, r{src, N};
      process_vm_readv(self, &l, 1, &r, 1, 0);
    } else
      for (size_t i = 0; i < n; i += per) {
        iovec l[1024], r[1024];
        for (int k = 0; k < per; ++k) {
          l[k] = {dst + dof[i + k] * C, C};
          r[k] = {src + so[i + k] * C, C};
        }
        if (process_vm_readv(self, l, per, r, per, 0) != (ssize_t)(per * C)) {
          perror("readv");
          return 0.0;
        }
      }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int rep = 0; rep < 3; ++rep) {
    for (int per : {0, 1, 4, 16, 64}) {
      std::vector<double> v;
      for (int k = 0; k < 9; ++k) v.push_back(t(per));
      std::sort(v.begin(), v.end());
      printf("per %2d: %.2f GB/s  ", per, N / v[4] / 1e9);
    }
    printf("\n");
  }
}
