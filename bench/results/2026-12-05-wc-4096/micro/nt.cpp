// Micro-benchmark of 2026-12-05 (bench/NOTES.md, "The CPU scatter's write-combining groups").
// Build: g++ -O2 -march=native -o nt nt.cpp; run without arguments (sc: [block rows] [P] [K]).
#include <emmintrin.h>
#include <sys/mman.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
// Write 256 MiB as NT lines into S streams (each stream a contiguous region), in random stream
// order, L lines per visit.
int main() {
  const size_t N = 256ul << 20;
  char* dst = (char*)aligned_alloc(1 << 21, N);
  madvise(dst, N, MADV_HUGEPAGE);
  memset(dst, 0, N);
  alignas(64) char line[64 * 8];
  memset(line, 7, sizeof line);
  std::mt19937 rng(1);
  for (int rep = 0; rep < 2; ++rep)
    for (size_t S : {40, 256, 2048, 8192}) {
      for (size_t L : {1, 2, 4, 8}) {
        const size_t per = N / S / 4096 * 4096;
        std::vector<size_t> pos(S, 0);
        const size_t visits = N / (64 * L);
        std::vector<unsigned> order(visits);
        for (auto& o : order) o = rng() % S;
        auto t0 = std::chrono::steady_clock::now();
        for (size_t v = 0; v < visits; ++v) {
          const size_t s = order[v];
          if (pos[s] + 64 * L > per) pos[s] = 0;
          __m128i* d = (__m128i*)(dst + s * per + pos[s]);
          const __m128i* src = (const __m128i*)line;
          for (size_t q = 0; q < 4 * L; ++q) _mm_stream_si128(d + q, _mm_load_si128(src + q));
          pos[s] += 64 * L;
        }
        _mm_sfence();
        double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        printf("S=%5zu L=%zu: %.2f GB/s   ", S, L, N / t / 1e9);
      }
      printf("\n");
    }
}
