// Does the decimal mean of the GPU group-by test's groups depend on the Int128 -> double
// conversion? Per group of keys (0, 1) and of key 0 alone.
#include <cstring>
#include <iostream>
#include <map>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/generator.hpp>
#include "table/detail/groupby_common.hpp"
using namespace spillway;
int main() {
  BufferResource br{BufferResourceConfig{}};
  RandomTableOptions o;
  o.rows = 30000;
  o.types = {TypeId::INT64,  TypeId::INT32,  TypeId::INT8,   TypeId::INT16, TypeId::UINT8,
             TypeId::UINT16, TypeId::UINT32, TypeId::UINT64, TypeId::BOOL8, TypeId::INT32};
  o.key_cardinality = 40;
  o.null_fraction = 0.08;
  o.seed = 1;
  Table t = random_table(o, br);
  const TableView tv = t.view();
  const ColumnView k0 = tv.columns[0], k1 = tv.columns[1], v = tv.columns[9];
  for (int two = 0; two < 2; ++two) {
    std::map<std::pair<std::int64_t, std::int64_t>, std::pair<Int128, long>> g;
    for (std::size_t r = 0; r < o.rows; ++r) {
      const std::int64_t a = k0.is_valid(r) ? k0.value<std::int64_t>(r) : -1;
      const std::int64_t b = two ? (k1.is_valid(r) ? k1.value<std::int32_t>(r) : -1) : 0;
      auto& [sum, n] = g[{a, b}];
      if (!v.is_valid(r)) continue;
      const std::int64_t x = v.value<std::int32_t>(r);
      const Int128 d{static_cast<std::uint64_t>(x) * 0x9E3779B97F4A7C15ULL, x % 2 == 0 ? -1 : 0};
      sum = sum + d;
      ++n;
    }
    int differ = 0;
    for (auto& [k, sn] : g) {
      if (sn.second == 0) continue;
      const double unit = 1e-3;
      const double old_mean = sn.first.to_double() * unit / static_cast<double>(sn.second);
      const double new_mean =
          detail::sum_as_double(sn.first, unit) / static_cast<double>(sn.second);
      if (std::memcmp(&old_mean, &new_mean, 8) != 0) ++differ;
    }
    std::cout << (two ? "keys {0, 1}: " : "key {0}: ") << g.size() << " groups, " << differ
              << " whose decimal mean differs between the two conversions\n";
  }
}
