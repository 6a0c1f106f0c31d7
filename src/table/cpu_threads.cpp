#include "table/detail/cpu_threads.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

namespace spillway::detail {

namespace {
/// The cores, counted once: hardware_concurrency() reads /sys on every call, and small
/// partitions ask per chunk (3 reads per partition made a 20000-partition shuffle spend a
/// third of its time in open/read/close).
std::size_t cores() {
  static const std::size_t n = std::max(1U, std::thread::hardware_concurrency());
  return n;
}
}  // namespace

io::ThreadPool& cpu_pool() {
  static io::ThreadPool pool(cores());
  return pool;
}

std::size_t resolve_threads(std::size_t requested) {
  return requested > 0 ? requested : cores();
}

void parallel_ranges(std::size_t n, std::size_t threads,
                     const std::function<void(std::size_t, std::size_t, std::size_t)>& fn) {
  const std::size_t t = std::max<std::size_t>(1, threads);
  cpu_pool().parallel_for(t, [&](std::size_t i) {
    const std::size_t begin = n * i / t;
    const std::size_t end = n * (i + 1) / t;
    fn(i, begin, end);
  });
}

void copy_bits(std::uint8_t* dst, std::size_t dst_bit, const std::uint8_t* src, std::size_t src_bit,
               std::size_t count) noexcept {
  if (count == 0) return;
  if (src == nullptr) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t d = dst_bit + i;
      dst[d / 8] = static_cast<std::uint8_t>(dst[d / 8] | (1U << (d % 8)));
    }
    return;
  }
  if (dst_bit % 8 == 0 && src_bit % 8 == 0) {
    const std::size_t whole = count / 8;
    std::memcpy(dst + dst_bit / 8, src + src_bit / 8, whole);
    dst_bit += whole * 8;
    src_bit += whole * 8;
    count -= whole * 8;
  }
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t s = src_bit + i;
    const std::size_t d = dst_bit + i;
    const unsigned bit = (src[s / 8] >> (s % 8)) & 1U;
    dst[d / 8] = static_cast<std::uint8_t>((dst[d / 8] & ~(1U << (d % 8))) | (bit << (d % 8)));
  }
}

}  // namespace spillway::detail
