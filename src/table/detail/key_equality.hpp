#pragma once
// Whether two rows' key values are equal (internal to table/: the join and the group-by).

#include <spillway/table/column_view.hpp>

#include "table/detail/type_dispatch.hpp"

#include <cmath>
#include <type_traits>

namespace spillway::detail {

/// Row i of `a` against row j of `b` (the same key types, host memory): equal values, floats
/// as SQL compares them (NaN = NaN, -0.0 = 0.0). Two nulls are equal when `nulls_equal` (a
/// GROUP BY's groups), never otherwise (a join's matches).
inline bool keys_equal(const TableView& a, std::size_t i, const TableView& b, std::size_t j,
                       bool nulls_equal) {
  for (std::size_t c = 0; c < a.columns.size(); ++c) {
    const ColumnView& x = a.columns[c];
    const ColumnView& y = b.columns[c];
    const bool vx = x.is_valid(i);
    const bool vy = y.is_valid(j);
    if (!vx || !vy) {
      if (nulls_equal && !vx && !vy) continue;
      return false;
    }
    if (x.type == TypeId::STRING) {
      if (x.string(i) != y.string(j)) return false;
      continue;
    }
    const bool same = dispatch_fixed(x.type, [&]<typename T>() {
      const T u = x.value<T>(i);
      const T v = y.value<T>(j);
      if constexpr (std::is_floating_point_v<T>) {
        return u == v || (std::isnan(u) && std::isnan(v));
      } else {
        return u == v;
      }
    });
    if (!same) return false;
  }
  return true;
}

}  // namespace spillway::detail
