#include <spillway/table/checksum.hpp>

#include "checksum_hash.hpp"
#include "cpu_threads.hpp"

#include <vector>

namespace spillway {

namespace {
std::uint32_t raw_row_hash(const TableView& t, std::size_t row, std::uint32_t seed) {
  std::uint32_t h = seed;
  for (const auto& c : t.columns) {
    std::uint32_t e = 0;
    if (c.type == TypeId::STRING) {
      const auto s = c.string(row);
      e = detail::raw_element_hash(c.is_valid(row), s.data(), s.size(), seed);
    } else {
      const std::size_t w = size_of(c.type);
      e = detail::raw_element_hash(c.is_valid(row), static_cast<const std::byte*>(c.data) + row * w,
                                   w, seed);
    }
    h = hash_combine(h, e);
  }
  return h;
}
}  // namespace

TableChecksum checksum(const TableView& table, std::size_t threads) {
  threads = detail::resolve_threads(threads);
  struct alignas(64) Partial {
    std::uint64_t sum{0};
  };
  std::vector<Partial> partial(threads);
  detail::parallel_ranges(
      table.num_rows(), threads, [&](std::size_t t, std::size_t a, std::size_t b) {
        std::uint64_t s = 0;
        for (std::size_t r = a; r < b; ++r) {
          const std::uint64_t hi = raw_row_hash(table, r, detail::checksum_seed_hi);
          const std::uint64_t lo = raw_row_hash(table, r, detail::checksum_seed_lo);
          s += (hi << 32) | lo;
        }
        partial[t].sum = s;
      });
  TableChecksum out{table.num_rows(), 0};
  for (const auto& p : partial) out.sum += p.sum;
  return out;
}

}  // namespace spillway
