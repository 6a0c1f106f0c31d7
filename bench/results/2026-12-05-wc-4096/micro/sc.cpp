// Micro-benchmark of 2026-12-05 (bench/NOTES.md, "The CPU scatter's write-combining groups").
// Build: g++ -O2 -march=native -o sc sc.cpp; run without arguments (sc: [block rows] [P] [K]).
#include <emmintrin.h>
#include <sys/mman.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
// Scatter R rows of K int32 columns into P partitions; destinations contiguous per partition (as
// hash_partition).
constexpr size_t R = 8u << 20;
static size_t P = 1024, K = 2;
struct alignas(64) Line {
  uint32_t v[16];
};
static inline void nt_line(void* to, const void* from) {
  auto* d = (__m128i*)to;
  auto* s = (const __m128i*)from;
  _mm_stream_si128(d, _mm_load_si128(s));
  _mm_stream_si128(d + 1, _mm_load_si128(s + 1));
  _mm_stream_si128(d + 2, _mm_load_si128(s + 2));
  _mm_stream_si128(d + 3, _mm_load_si128(s + 3));
}
int main(int argc, char** argv) {
  size_t B = argc > 1 ? atoi(argv[1]) : 16384;
  if (argc > 2) P = atoi(argv[2]);
  if (argc > 3) K = atoi(argv[3]);
  std::vector<uint16_t> pid(R);
  std::mt19937 rng(1);
  for (auto& p : pid) p = rng() % P;
  std::vector<std::vector<uint32_t>> col(K, std::vector<uint32_t>(R));
  for (auto& c : col)
    for (size_t i = 0; i < R; ++i) c[i] = i * 7;
  std::vector<size_t> cnt(P + 1);
  for (auto p : pid) ++cnt[p + 1];
  for (size_t p = 0; p < P; ++p) cnt[p + 1] += cnt[p];
  std::vector<uint32_t*> outc(K);
  for (auto& o : outc) {
    o = (uint32_t*)aligned_alloc(1 << 21, R * 4 + (1 << 21));
    madvise(o, R * 4, MADV_HUGEPAGE);
    memset(o, 0, R * 4);
  }
  // pad partitions to line starts for simplicity: destinations at cnt[p] (unaligned in general);
  // handle via fill offset
  auto run_a = [&] {  // per-row WC
    std::vector<Line> buf(P * K);
    std::vector<uint32_t> fill(P);
    std::vector<uint32_t*> to(P * K);
    for (size_t p = 0; p < P; ++p) {
      for (size_t k = 0; k < K; ++k) to[p * K + k] = outc[k] + cnt[p];
      fill[p] = (cnt[p] % 16);
    }
    for (size_t i = 0; i < R; ++i) {
      const uint16_t p = pid[i];
      uint32_t f = fill[p];
      for (size_t k = 0; k < K; ++k) buf[p * K + k].v[f] = col[k][i];
      if (++f == 16) {
        for (size_t k = 0; k < K; ++k) {
          uint32_t*& t = to[p * K + k];
          if (((uintptr_t)t & 63) == 0) {
            nt_line(t, &buf[p * K + k]);
            t += 16;
          } else {
            size_t s = ((uintptr_t)t & 63) / 4;
            memcpy(t, buf[p * K + k].v + s, (16 - s) * 4);
            t += 16 - s;
          }
        }
        f = 0;
      }
      fill[p] = f;
    }
  };
  auto run_b = [&] {  // blocked: counting sort of each block, then per partition bulk append
    std::vector<Line> buf(P * K);
    std::vector<uint32_t> fill(P);
    std::vector<uint32_t*> to(P * K);
    for (size_t p = 0; p < P; ++p) {
      for (size_t k = 0; k < K; ++k) to[p * K + k] = outc[k] + cnt[p];
      fill[p] = (cnt[p] % 16);
    }
    std::vector<uint32_t> h(P + 1);
    std::vector<uint16_t> idx(B);
    for (size_t a = 0; a < R; a += B) {
      const size_t n = std::min(B, R - a);
      std::fill(h.begin(), h.end(), 0);
      for (size_t i = 0; i < n; ++i) ++h[pid[a + i] + 1];
      for (size_t p = 0; p < P; ++p) h[p + 1] += h[p];
      std::vector<uint32_t> at(h.begin(), h.end() - 1);
      for (size_t i = 0; i < n; ++i) idx[at[pid[a + i]]++] = (uint16_t)i;
      for (size_t p = 0; p < P; ++p) {
        uint32_t fend = fill[p];
        for (size_t k = 0; k < K; ++k) {
          const uint32_t* src = col[k].data() + a;
          uint32_t f = fill[p];
          Line& L = buf[p * K + k];
          for (uint32_t j = h[p]; j < h[p + 1]; ++j) {
            L.v[f] = src[idx[j]];
            if (++f == 16) {
              uint32_t*& t = to[p * K + k];
              if (((uintptr_t)t & 63) == 0) {
                nt_line(t, &L);
                t += 16;
              } else {
                size_t s = ((uintptr_t)t & 63) / 4;
                memcpy(t, L.v + s, (16 - s) * 4);
                t += 16 - s;
              }
              f = 0;
            }
          }
          fend = f;
        }
        fill[p] = fend;
      }
      // fill is shared across columns: recompute once after all columns (each column advanced the
      // same)
    }
  };
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    run_a();
    _mm_sfence();
    double ta = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t0 = std::chrono::steady_clock::now();
    run_b();
    _mm_sfence();
    double tb = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t0 = std::chrono::steady_clock::now();
    for (size_t k = 0; k < K; ++k) memcpy(outc[k], col[k].data(), R * 4);
    double tm = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("a: %.1f ms  b(B=%zu): %.1f ms  memcpy %.1f ms\n", ta * 1e3, B, tb * 1e3, tm * 1e3);
  }
}
