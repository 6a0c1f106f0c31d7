// The local hash group-by (groupby.hpp): rows hashed on their keys, each row's group found in
// an open-addressed table of the groups (grown as they come), then every aggregation
// accumulated per group a column at a time.
#include <spillway/table/groupby.hpp>

#include <spillway/core/error.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/hashing.hpp>

#include "table/detail/groupby_common.hpp"
#include "table/detail/key_equality.hpp"
#include "table/detail/spread_hash.hpp"
#include "table/detail/type_dispatch.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace spillway {

const char* to_string(AggOp op) noexcept {
  switch (op) {
    case AggOp::count:
      return "count";
    case AggOp::sum:
      return "sum";
    case AggOp::min:
      return "min";
    case AggOp::max:
      return "max";
    case AggOp::mean:
      return "mean";
  }
  return "?";
}

namespace {

/// A fixed-width column of `values` with nulls where `valid` is 0 (no mask when all are valid).
template <typename T>
Column make_column(DataType type, const std::vector<T>& values,
                   const std::vector<std::uint8_t>& valid, BufferResource& br) {
  const std::size_t n = values.size();
  auto data = br.allocate(MemoryType::HOST, n * sizeof(T));
  if (n > 0) std::memcpy(data->data(), values.data(), n * sizeof(T));
  std::unique_ptr<Buffer> mask;
  bool all_valid = true;
  for (std::uint8_t v : valid) all_valid = all_valid && v != 0;
  if (!all_valid) {
    mask = br.allocate(MemoryType::HOST, mask_bytes(n));
    auto* m = reinterpret_cast<std::uint8_t*>(mask->data());
    std::memset(m, 0, mask->size());
    for (std::size_t i = 0; i < n; ++i) {
      if (valid[i] != 0) m[i / 8] = static_cast<std::uint8_t>(m[i / 8] | (1U << (i % 8)));
    }
  }
  return Column(type, n, std::move(data), nullptr, std::move(mask));
}

/// One aggregation over the groups: `group[r]` is row r's group, of `ngroups`.
Column aggregate(const ColumnView& col, AggOp op, const std::vector<std::uint32_t>& group,
                 std::size_t ngroups, BufferResource& br) {
  if (op == AggOp::count) {
    std::vector<std::int64_t> count(ngroups, 0);
    for (std::size_t r = 0; r < group.size(); ++r) count[group[r]] += col.is_valid(r) ? 1 : 0;
    return make_column(TypeId::INT64, count, std::vector<std::uint8_t>(ngroups, 1), br);
  }
  return detail::dispatch_fixed(col.type, [&]<typename T>() -> Column {
    std::vector<std::uint8_t> seen(ngroups, 0);
    if (op == AggOp::min || op == AggOp::max) {
      std::vector<T> best(ngroups, T{});
      const bool is_min = op == AggOp::min;
      // NaN is the greatest float, as SQL engines order it.
      const auto less = [](T x, T y) {
        if constexpr (std::is_floating_point_v<T>) {
          return (!std::isnan(x) && std::isnan(y)) || x < y;
        } else {
          return x < y;
        }
      };
      for (std::size_t r = 0; r < group.size(); ++r) {
        if (!col.is_valid(r)) continue;
        const T v = col.value<T>(r);
        const std::uint32_t g = group[r];
        if (seen[g] == 0 || (is_min ? less(v, best[g]) : less(best[g], v))) best[g] = v;
        seen[g] = 1;
      }
      return make_column(col.type, best, seen, br);
    }
    // sum and mean
    using Acc = detail::sum_t<T>;
    std::vector<Acc> sum(ngroups, Acc{});
    std::vector<std::int64_t> count(ngroups, 0);
    for (std::size_t r = 0; r < group.size(); ++r) {
      if (!col.is_valid(r)) continue;
      sum[group[r]] += static_cast<Acc>(col.value<T>(r));
      ++count[group[r]];
      seen[group[r]] = 1;
    }
    if (op == AggOp::sum) {
      return make_column(detail::aggregate_type(col.type, AggOp::sum), sum, seen, br);
    }
    const double unit = detail::value_unit(col.type);
    std::vector<double> mean(ngroups, 0);
    for (std::size_t g = 0; g < ngroups; ++g) {
      if (count[g] > 0) {
        mean[g] = detail::sum_as_double(sum[g], unit) / static_cast<double>(count[g]);
      }
    }
    return make_column(TypeId::FLOAT64, mean, seen, br);
  });
}

}  // namespace

namespace detail {

TableView groupby_keys(const TableView& table, std::span<const std::size_t> keys,
                       std::span<const Aggregation> aggregations) {
  SPILLWAY_EXPECTS(!keys.empty(), "groupby: no key columns");
  TableView kv;
  for (std::size_t k : keys) {
    SPILLWAY_EXPECTS(k < table.num_columns(), "groupby: key column " + std::to_string(k) +
                                                  " of a table with " +
                                                  std::to_string(table.num_columns()) + " columns");
    kv.columns.push_back(table.columns[k]);
    kv.names.push_back(table.names.empty() ? "" : table.names[k]);
  }
  for (const Aggregation& a : aggregations) {
    SPILLWAY_EXPECTS(a.column < table.num_columns(),
                     "groupby: value column " + std::to_string(a.column) + " of a table with " +
                         std::to_string(table.num_columns()) + " columns");
    const DataType t = table.columns[a.column].type;
    // count of anything; min and max of all but strings; sum and mean of numbers.
    const bool ok = a.op == AggOp::count ||
                    ((a.op == AggOp::min || a.op == AggOp::max) && t != TypeId::STRING) ||
                    (t != TypeId::STRING && t != TypeId::BOOL8 && !is_temporal(t));
    SPILLWAY_EXPECTS(ok, std::string("groupby: ") + to_string(a.op) + " of a " + to_string(t) +
                             " column (column " + std::to_string(a.column) + ")");
  }
  return kv;
}

DataType aggregate_type(DataType t, AggOp op) noexcept {
  switch (op) {
    case AggOp::count:
      return TypeId::INT64;
    case AggOp::mean:
      return TypeId::FLOAT64;
    case AggOp::min:
    case AggOp::max:
      return t;
    case AggOp::sum:
      break;
  }
  switch (t.id) {
    case TypeId::DECIMAL128:
      return decimal128(decimal128_max_precision, t.scale);
    case TypeId::FLOAT32:
    case TypeId::FLOAT64:
      return TypeId::FLOAT64;
    case TypeId::UINT8:
    case TypeId::UINT16:
    case TypeId::UINT32:
    case TypeId::UINT64:
      return TypeId::UINT64;
    default:
      return TypeId::INT64;
  }
}

std::string aggregate_name(const TableView& table, const Aggregation& a) {
  return (table.names.empty() ? std::to_string(a.column) : table.names[a.column]) + "_" +
         to_string(a.op);
}

}  // namespace detail

namespace {

/// Each row's group (ids dense, in order of first appearance) and each group's first row.
struct Groups {
  std::vector<std::uint32_t> of_row;
  std::vector<std::int64_t> first;
};

/// Groups of rows with hashes `h`, by open addressing (linear probing) over slots of a hash and
/// a group, grown to keep them at most half full: a row's key is compared (`same(group, row)`)
/// only with the groups of its own hash, and the slots, not the rows, are what grows.
/// `fresh(row)` is called as a row starts a new group.
template <typename Same, typename Fresh>
void find_groups(const std::vector<std::uint32_t>& h, Groups& out, Same&& same, Fresh&& fresh) {
  struct Slot {
    std::uint32_t hash;
    std::uint32_t group;  // + 1; 0: empty
  };
  std::vector<Slot> slots(1024, Slot{0, 0});
  std::size_t mask = slots.size() - 1;
  const auto place = [&](std::vector<Slot>& into, std::size_t m, Slot s) {
    std::size_t b = detail::spread_hash(s.hash) & m;
    while (into[b].group != 0) b = (b + 1) & m;
    into[b] = s;
  };
  for (std::size_t r = 0; r < h.size(); ++r) {
    const std::uint32_t hr = h[r];
    std::size_t b = detail::spread_hash(hr) & mask;
    std::uint32_t g = 0;
    for (;; b = (b + 1) & mask) {
      const Slot s = slots[b];
      if (s.group == 0) break;
      if (s.hash == hr && same(s.group - 1, r)) {
        g = s.group;
        break;
      }
    }
    if (g == 0) {
      g = static_cast<std::uint32_t>(out.first.size() + 1);
      out.first.push_back(static_cast<std::int64_t>(r));
      fresh(r);
      slots[b] = Slot{hr, g};
      if (2 * out.first.size() > slots.size()) {  // grow: re-place every slot by its hash
        std::vector<Slot> bigger(2 * slots.size(), Slot{0, 0});
        for (const Slot& s : slots) {
          if (s.group != 0) place(bigger, bigger.size() - 1, s);
        }
        slots = std::move(bigger);
        mask = slots.size() - 1;
      }
    }
    out.of_row[r] = g - 1;
  }
}

/// The groups of the rows of `kv` (key columns; nulls one group). One integer key column is
/// compared by its value kept per group (one load beside the slot's); others by keys_equal
/// with the group's first row.
Groups group_rows(const TableView& kv, std::size_t n) {
  std::vector<std::uint32_t> h(n);
  if (n > 0) hash_rows(kv, 0, n, default_hash_seed, h.data());
  Groups out;
  out.of_row.resize(n);
  bool done = false;
  if (kv.columns.size() == 1 && kv.columns[0].type != TypeId::STRING) {
    const ColumnView& c = kv.columns[0];
    done = detail::dispatch_fixed(c.type, [&]<typename T>() {
      if constexpr (!std::is_integral_v<T>) {
        return false;
      } else {
        std::vector<T> value;  // per group
        std::vector<std::uint8_t> valid;
        find_groups(
            h, out,
            [&](std::uint32_t g, std::size_t r) {
              if (valid[g] == 0 || !c.is_valid(r)) return valid[g] == 0 && !c.is_valid(r);
              return value[g] == c.value<T>(r);
            },
            [&](std::size_t r) {
              const bool v = c.is_valid(r);
              value.push_back(v ? c.value<T>(r) : T{});
              valid.push_back(v ? 1 : 0);
            });
        return true;
      }
    });
  }
  if (!done) {
    find_groups(
        h, out,
        [&](std::uint32_t g, std::size_t r) {
          return detail::keys_equal(kv, static_cast<std::size_t>(out.first[g]), kv, r, true);
        },
        [](std::size_t) {});
  }
  return out;
}

}  // namespace

Table groupby(const TableView& table, std::span<const std::size_t> keys,
              std::span<const Aggregation> aggregations, BufferResource& br) {
  const TableView kv = detail::groupby_keys(table, keys, aggregations);
  const std::size_t n = table.num_rows();
  SPILLWAY_EXPECTS(n < std::numeric_limits<std::uint32_t>::max(),
                   "groupby: more than 2^32 - 1 rows in one call");
  const Groups groups = group_rows(kv, n);
  Table key_table = gather(kv, groups.first, br);
  std::vector<std::string> names = key_table.names();
  std::vector<Column> columns = std::move(key_table).release();
  for (const Aggregation& a : aggregations) {
    columns.push_back(
        aggregate(table.columns[a.column], a.op, groups.of_row, groups.first.size(), br));
    names.push_back(detail::aggregate_name(table, a));
  }
  return Table(std::move(columns), std::move(names));
}

namespace detail {

void check_mean_of(const ColumnView& sums, const ColumnView& counts) {
  SPILLWAY_EXPECTS(sums.type == TypeId::INT64 || sums.type == TypeId::UINT64 ||
                       sums.type == TypeId::FLOAT64 || sums.type == TypeId::DECIMAL128,
                   "mean_of: sums of type " + to_string(sums.type) +
                       " (want int64, uint64, float64 or decimal128)");
  SPILLWAY_EXPECTS(counts.type == TypeId::INT64,
                   "mean_of: counts of type " + to_string(counts.type) + " (want int64)");
  SPILLWAY_EXPECTS(sums.size == counts.size, "mean_of: " + std::to_string(sums.size) +
                                                 " sums and " + std::to_string(counts.size) +
                                                 " counts");
}

}  // namespace detail

Column mean_of(const ColumnView& sums, const ColumnView& counts, BufferResource& br) {
  detail::check_mean_of(sums, counts);
  const std::size_t n = sums.size;
  std::vector<double> mean(n, 0);
  std::vector<std::uint8_t> valid(n, 0);
  const double unit = detail::value_unit(sums.type);
  detail::dispatch_fixed(sums.type, [&]<typename T>() {
    for (std::size_t g = 0; g < n; ++g) {
      const std::int64_t c = counts.is_valid(g) ? counts.value<std::int64_t>(g) : 0;
      if (c <= 0 || !sums.is_valid(g)) continue;
      mean[g] = detail::sum_as_double(sums.value<T>(g), unit) / static_cast<double>(c);
      valid[g] = 1;
    }
  });
  return make_column(TypeId::FLOAT64, mean, valid, br);
}

}  // namespace spillway
