#include <spillway/table/checksum.hpp>

#include "checksum_hash.hpp"
#include "cpu_threads.hpp"

#include <cstring>
#include <vector>

namespace spillway {

namespace {
std::uint64_t row_value(const TableView& t, std::size_t row) {
  std::uint64_t terms = 0;
  for (std::size_t k = 0; k < t.columns.size(); ++k) {
    const ColumnView& c = t.columns[k];
    if (!c.is_valid(row)) {
      terms += detail::null_term(k);
    } else if (c.type == TypeId::STRING) {
      const auto s = c.string(row);
      terms += detail::string_term(s.data(), s.size(), k);
    } else {
      const std::size_t w = size_of(c.type);
      std::uint64_t bits = 0;  // little-endian: the low bytes
      std::memcpy(&bits, static_cast<const std::byte*>(c.data) + row * w, w);
      terms += detail::fixed_term(bits, k);
    }
  }
  return detail::row_value(terms);
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
                            for (std::size_t r = a; r < b; ++r) s += row_value(table, r);
                            partial[t].sum = s;
                          });
  TableChecksum out{table.num_rows(), 0};
  for (const auto& p : partial) out.sum += p.sum;
  return out;
}

}  // namespace spillway
