// The local sort (sort.hpp): one fixed-width key without nulls sorts (key, row) pairs; any other
// keys sort row indices with a comparator of every key. Either way each thread sorts its share
// and the shares are merged (std::inplace_merge is stable, the shares are in row order).
#include <spillway/core/error.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/sort.hpp>

#include "table/detail/cpu_threads.hpp"
#include "table/detail/type_dispatch.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string_view>
#include <type_traits>
#include <utility>

namespace spillway {

namespace {

template <typename T>
int compare_values(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool xn = std::isnan(x);
    const bool yn = std::isnan(y);
    if (xn || yn) return static_cast<int>(xn) - static_cast<int>(yn);  // NaN after numbers
  }
  if (x < y) return -1;
  if (y < x) return 1;
  return 0;  // -0.0 == 0.0
}

void check_keys(const TableView& t, std::span<const SortKey> keys) {
  if (keys.empty()) throw logic_error("sort: no keys");
  for (const SortKey& k : keys) {
    if (k.column >= t.num_columns()) {
      throw logic_error("sort: key column " + std::to_string(k.column) + " out of range (" +
                        std::to_string(t.num_columns()) + " columns)");
    }
  }
}

/// The comparator of one key column of `a` against `b`, order and nulls applied. It keeps
/// copies of the views (a RowOrder outlives the TableViews it was made from).
std::function<int(std::size_t, std::size_t)> column_order(const ColumnView& a, const ColumnView& b,
                                                          const SortKey& k) {
  const int sign = k.descending ? -1 : 1;
  const int null_side = k.nulls_first ? -1 : 1;
  std::function<int(std::size_t, std::size_t)> values;
  if (a.type == TypeId::STRING) {
    values = [a, b](std::size_t i, std::size_t j) {
      const int c = a.string(i).compare(b.string(j));
      return (c > 0) - (c < 0);
    };
  } else {
    values = detail::dispatch_fixed(a.type, [&]<typename T>() {
      const T* x = static_cast<const T*>(a.data);
      const T* y = static_cast<const T*>(b.data);
      return std::function<int(std::size_t, std::size_t)>(
          [x, y](std::size_t i, std::size_t j) { return compare_values(x[i], y[j]); });
    });
  }
  if (!a.nullable() && !b.nullable()) {
    return [values, sign](std::size_t i, std::size_t j) { return sign * values(i, j); };
  }
  return [a, b, values, sign, null_side](std::size_t i, std::size_t j) {
    const bool vi = a.is_valid(i);
    const bool vj = b.is_valid(j);
    if (!vi || !vj) return vi == vj ? 0 : (vi ? -null_side : null_side);
    return sign * values(i, j);
  };
}

/// Sorts [first, last) by `less` with each thread's share sorted apart, then merged.
template <typename It, typename Less>
void parallel_sort(It first, It last, Less less, std::size_t threads) {
  const auto n = static_cast<std::size_t>(last - first);
  threads = std::min(detail::resolve_threads(threads), std::max<std::size_t>(1, n / 65536));
  std::vector<std::size_t> bounds(threads + 1, n);
  detail::parallel_ranges(n, threads, [&](std::size_t t, std::size_t b, std::size_t e) {
    bounds[t] = b;
    std::sort(first + static_cast<std::ptrdiff_t>(b), first + static_cast<std::ptrdiff_t>(e), less);
  });
  bounds[threads] = n;
  for (std::size_t width = 1; width < threads; width *= 2) {
    for (std::size_t t = 0; t + width < threads; t += 2 * width) {
      const std::size_t mid = bounds[t + width];
      const std::size_t end = bounds[std::min(threads, t + 2 * width)];
      std::inplace_merge(first + static_cast<std::ptrdiff_t>(bounds[t]),
                         first + static_cast<std::ptrdiff_t>(mid),
                         first + static_cast<std::ptrdiff_t>(end), less);
    }
  }
}

/// A value of T as an unsigned integer of the same order (compare_values'): two's complement
/// with its sign bit flipped; a float's bits with the negatives reversed, -0.0 as 0.0 and every
/// NaN above +inf. Complemented for a descending key.
template <typename T>
std::uint64_t radix_key(T v, bool descending) {
  std::uint64_t u = 0;
  if constexpr (std::is_floating_point_v<T>) {
    using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    constexpr Bits sign = Bits{1} << (8 * sizeof(T) - 1);
    if (std::isnan(v)) {
      u = ~Bits{0};
    } else {
      Bits b = 0;
      const T w = v == T(0) ? T(0) : v;  // -0.0 as 0.0
      std::memcpy(&b, &w, sizeof b);
      u = (b & sign) != 0 ? static_cast<Bits>(~b) : static_cast<Bits>(b | sign);
    }
  } else if constexpr (std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    u = static_cast<U>(static_cast<U>(v) ^ (U{1} << (8 * sizeof(T) - 1)));
  } else {
    u = v;
  }
  return descending ? ~u : u;
}

/// One integer or float key without nulls, by an LSD radix sort of (key, row) on bytes: each
/// pass is stable, so rows of equal keys stay in row order. Bytes every key shares are skipped.
template <typename T>
std::vector<std::int64_t> radix_sort_one_key(const ColumnView& c, bool descending) {
  const std::size_t n = c.size;
  const T* v = static_cast<const T*>(c.data);
  std::vector<std::uint64_t> keys(n);
  std::vector<std::uint64_t> keys2(n);
  std::vector<std::int64_t> rows(n);
  std::vector<std::int64_t> rows2(n);
  constexpr std::size_t kBytes = sizeof(T);
  std::vector<std::array<std::size_t, 256>> count(kBytes, std::array<std::size_t, 256>{});
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t k = radix_key(v[i], descending);
    keys[i] = k;
    rows[i] = static_cast<std::int64_t>(i);
    for (std::size_t b = 0; b < kBytes; ++b) ++count[b][(k >> (8 * b)) & 0xFF];
  }
  for (std::size_t b = 0; b < kBytes; ++b) {
    auto& cb = count[b];
    if (std::find(cb.begin(), cb.end(), n) != cb.end()) continue;  // one value of this byte
    std::size_t at = 0;
    for (std::size_t& x : cb) at += std::exchange(x, at);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t to = cb[(keys[i] >> (8 * b)) & 0xFF]++;
      keys2[to] = keys[i];
      rows2[to] = rows[i];
    }
    keys.swap(keys2);
    rows.swap(rows2);
  }
  return rows;
}

/// One fixed-width key without nulls: (key, row) pairs, the row breaking ties (stable); a
/// large column of integers or floats by radix sort.
template <typename T>
std::vector<std::int64_t> sort_one_key(const ColumnView& c, bool descending, std::size_t threads) {
  if constexpr (std::is_arithmetic_v<T>) {
    if (c.size >= 65536) return radix_sort_one_key<T>(c, descending);
  }
  std::vector<std::pair<T, std::int64_t>> pairs(c.size);
  const T* v = static_cast<const T*>(c.data);
  for (std::size_t i = 0; i < c.size; ++i) pairs[i] = {v[i], static_cast<std::int64_t>(i)};
  auto less = [descending](const std::pair<T, std::int64_t>& x,
                           const std::pair<T, std::int64_t>& y) {
    const int c = compare_values(x.first, y.first);
    if (c != 0) return descending ? c > 0 : c < 0;
    return x.second < y.second;
  };
  parallel_sort(pairs.begin(), pairs.end(), less, threads);
  std::vector<std::int64_t> order(c.size);
  for (std::size_t i = 0; i < c.size; ++i) order[i] = pairs[i].second;
  return order;
}

}  // namespace

RowOrder::RowOrder(const TableView& a, const TableView& b, std::span<const SortKey> keys) {
  check_keys(a, keys);
  check_keys(b, keys);
  for (const SortKey& k : keys) {
    const ColumnView& x = a.columns[k.column];
    const ColumnView& y = b.columns[k.column];
    if (x.type != y.type)
      throw logic_error("sort: key column " + std::to_string(k.column) +
                        " has different types in the two tables");
    columns_.push_back(column_order(x, y, k));
  }
}

int RowOrder::compare(std::size_t i, std::size_t j) const {
  for (const auto& c : columns_) {
    if (const int r = c(i, j); r != 0) return r;
  }
  return 0;
}

namespace {
std::vector<std::int64_t> all_rows(std::size_t n) {
  std::vector<std::int64_t> rows(n);
  std::iota(rows.begin(), rows.end(), std::int64_t{0});
  return rows;
}

/// Row x before row y: by the keys, then by the row (stable).
auto row_less(const RowOrder& order) {
  return [&order](std::int64_t x, std::int64_t y) {
    const int c = order.compare(static_cast<std::size_t>(x), static_cast<std::size_t>(y));
    return c != 0 ? c < 0 : x < y;
  };
}
/// Sorts each run of rows whose first key (`first`, of storage type T) is equal by the other
/// `keys`; a run is in row order, and stays so among rows equal on every key (stable).
template <typename T>
void order_ties(const TableView& table, const ColumnView& first, std::span<const SortKey> keys,
                std::vector<std::int64_t>& rows) {
  const T* v = static_cast<const T*>(first.data);
  const RowOrder rest(table, table, keys);
  std::size_t b = 0;
  while (b < rows.size()) {
    std::size_t e = b + 1;
    while (e < rows.size() && compare_values(v[rows[e]], v[rows[b]]) == 0) ++e;
    if (e - b > 1) {
      std::stable_sort(
          rows.begin() + static_cast<std::ptrdiff_t>(b),
          rows.begin() + static_cast<std::ptrdiff_t>(e), [&rest](std::int64_t x, std::int64_t y) {
            return rest.compare(static_cast<std::size_t>(x), static_cast<std::size_t>(y)) < 0;
          });
    }
    b = e;
  }
}
}  // namespace

std::vector<std::int64_t> sort_order(const TableView& table, std::span<const SortKey> keys,
                                     std::size_t threads) {
  check_keys(table, keys);
  const ColumnView& first = table.columns[keys.front().column];
  if (!first.nullable() && first.type != TypeId::STRING) {
    // The first key alone, then each run of equal first keys by the others.
    return detail::dispatch_fixed(first.type, [&]<typename T>() {
      std::vector<std::int64_t> rows = sort_one_key<T>(first, keys.front().descending, threads);
      if (keys.size() > 1) order_ties<T>(table, first, keys.subspan(1), rows);
      return rows;
    });
  }
  const RowOrder order(table, table, keys);
  std::vector<std::int64_t> rows = all_rows(table.num_rows());
  parallel_sort(rows.begin(), rows.end(), row_less(order), threads);
  return rows;
}

Table sort(const TableView& table, std::span<const SortKey> keys, BufferResource& br,
           std::size_t limit, std::size_t threads) {
  std::vector<std::int64_t> rows;
  if (limit < table.num_rows() / 4) {  // top-k: only the first rows are ordered
    check_keys(table, keys);
    const RowOrder order(table, table, keys);
    rows = all_rows(table.num_rows());
    std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(limit), rows.end(),
                      row_less(order));
    rows.resize(limit);
  } else {
    rows = sort_order(table, keys, threads);
    if (rows.size() > limit) rows.resize(limit);
  }
  return gather(table, rows, br);
}

}  // namespace spillway
