#include <spillway/table/checksum.hpp>

#include "table/detail/checksum_hash.hpp"
#include "table/detail/cpu_threads.hpp"

#include <algorithm>
#include <array>
#include <vector>

namespace spillway {

namespace {

constexpr std::size_t block = 1024;  // rows whose terms are summed column by column

/// terms[i] += the term of fixed-width column `c`, index k, at row r0 + i, for i < n: one
/// typed loop per width (the compiler vectorizes it), nulls patched afterwards.
template <class U>
void add_fixed(const ColumnView& c, std::size_t k, std::size_t r0, std::size_t n,
               std::uint64_t* terms) {
  const U* v = static_cast<const U*>(c.data) + r0;
  for (std::size_t i = 0; i < n; ++i) terms[i] += detail::fixed_term(detail::value_bits(v[i]), k);
  if (!c.nullable()) return;
  for (std::size_t i = 0; i < n; ++i) {
    if (!c.is_valid(r0 + i)) {
      terms[i] += detail::null_term(k) - detail::fixed_term(detail::value_bits(v[i]), k);
    }
  }
}

/// The sum of the row values of rows [a, b): the same values as row by row, computed a block
/// of rows at a time.
std::uint64_t sum_rows(const TableView& t, std::size_t a, std::size_t b) {
  std::uint64_t sum = 0;
  std::array<std::uint64_t, block> terms;
  for (std::size_t r0 = a; r0 < b; r0 += block) {
    const std::size_t n = std::min(block, b - r0);
    std::fill_n(terms.begin(), n, 0);
    for (std::size_t k = 0; k < t.columns.size(); ++k) {
      const ColumnView& c = t.columns[k];
      if (c.type == TypeId::STRING) {
        for (std::size_t i = 0; i < n; ++i) {
          if (!c.is_valid(r0 + i)) {
            terms[i] += detail::null_term(k);
          } else {
            const auto s = c.string(r0 + i);
            terms[i] += detail::string_term(s.data(), s.size(), k);
          }
        }
        continue;
      }
      switch (size_of(c.type)) {  // little-endian bytes, zero-extended
        case 1:
          add_fixed<std::uint8_t>(c, k, r0, n, terms.data());
          break;
        case 2:
          add_fixed<std::uint16_t>(c, k, r0, n, terms.data());
          break;
        case 4:
          add_fixed<std::uint32_t>(c, k, r0, n, terms.data());
          break;
        case 16:
          add_fixed<Int128>(c, k, r0, n, terms.data());
          break;
        default:
          add_fixed<std::uint64_t>(c, k, r0, n, terms.data());
          break;
      }
    }
    for (std::size_t i = 0; i < n; ++i) sum += detail::row_value(terms[i]);
  }
  return sum;
}

}  // namespace

TableChecksum checksum(const TableView& table, std::size_t threads) {
  threads = detail::resolve_threads(threads);
  struct alignas(64) Partial {
    std::uint64_t sum{0};
  };
  std::vector<Partial> partial(threads);
  detail::parallel_ranges(
      table.num_rows(), threads,
      [&](std::size_t t, std::size_t a, std::size_t b) { partial[t].sum = sum_rows(table, a, b); });
  TableChecksum out{table.num_rows(), 0};
  for (const auto& p : partial) out.sum += p.sum;
  return out;
}

}  // namespace spillway
