#include <spillway/table/checksum.hpp>

#include <spillway/table/hashing.hpp>

#include "cpu_threads.hpp"

#include <vector>

namespace spillway {

namespace {
// Raw bytes (no float normalization: -0.0 and 0.0 differ here), nulls as a marker.
std::uint32_t raw_element_hash(const ColumnView& col, std::size_t row, std::uint32_t seed) {
  if (!col.is_valid(row)) return murmur3_32("null", 4, seed ^ 0x5bd1e995U);
  if (col.type == TypeId::STRING) {
    const auto s = col.string(row);
    return murmur3_32(s.data(), s.size(), seed);
  }
  const std::size_t w = size_of(col.type);
  return murmur3_32(static_cast<const std::byte*>(col.data) + row * w, w, seed);
}

std::uint32_t raw_row_hash(const TableView& t, std::size_t row, std::uint32_t seed) {
  std::uint32_t h = seed;
  for (const auto& c : t.columns) h = hash_combine(h, raw_element_hash(c, row, seed));
  return h;
}
}  // namespace

TableChecksum checksum(const TableView& table, std::size_t threads) {
  threads = detail::resolve_threads(threads);
  struct alignas(64) Partial {
    std::uint64_t sum{0};
  };
  std::vector<Partial> partial(threads);
  detail::parallel_ranges(table.num_rows(), threads,
                          [&](std::size_t t, std::size_t a, std::size_t b) {
                            std::uint64_t s = 0;
                            for (std::size_t r = a; r < b; ++r) {
                              const std::uint64_t hi = raw_row_hash(table, r, 0x2545f491U);
                              const std::uint64_t lo = raw_row_hash(table, r, 0x9e3779b9U);
                              s += (hi << 32) | lo;
                            }
                            partial[t].sum = s;
                          });
  TableChecksum out{table.num_rows(), 0};
  for (const auto& p : partial) out.sum += p.sum;
  return out;
}

}  // namespace spillway
