// The local hash join (join.hpp): a chained hash table of the right side's rows by key hash,
// probed by ranges of left rows in parallel, each range's pairs kept apart and put together
// in range order (the output order does not depend on the thread count).
#include <spillway/table/join.hpp>

#include <spillway/core/error.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/hashing.hpp>

#include "table/detail/cpu_threads.hpp"
#include "table/detail/join_common.hpp"
#include "table/detail/key_equality.hpp"
#include "table/detail/spread_hash.hpp"

#include <atomic>
#include <bit>
#include <set>
#include <string>

namespace spillway {

const char* to_string(JoinType t) noexcept {
  switch (t) {
    case JoinType::inner:
      return "inner";
    case JoinType::left:
      return "left";
    case JoinType::left_semi:
      return "left_semi";
    case JoinType::left_anti:
      return "left_anti";
    case JoinType::full:
      return "full";
  }
  return "?";
}

namespace detail {

namespace {

TableView keys_of(const TableView& t, std::span<const std::size_t> keys, const char* side) {
  TableView v;
  for (std::size_t k : keys) {
    SPILLWAY_EXPECTS(k < t.num_columns(), std::string("join: ") + side + " key column " +
                                              std::to_string(k) + " of a table with " +
                                              std::to_string(t.num_columns()) + " columns");
    v.columns.push_back(t.columns[k]);
  }
  return v;
}

}  // namespace

std::pair<TableView, TableView> join_key_views(const TableView& left,
                                               std::span<const std::size_t> left_keys,
                                               const TableView& right,
                                               std::span<const std::size_t> right_keys) {
  SPILLWAY_EXPECTS(!left_keys.empty() && left_keys.size() == right_keys.size(),
                   "join: " + std::to_string(left_keys.size()) + " left and " +
                       std::to_string(right_keys.size()) +
                       " right key columns (want the same number, at least one)");
  TableView lk = keys_of(left, left_keys, "left");
  TableView rk = keys_of(right, right_keys, "right");
  for (std::size_t c = 0; c < lk.columns.size(); ++c) {
    SPILLWAY_EXPECTS(lk.columns[c].type == rk.columns[c].type,
                     "join: key " + std::to_string(c) + " is " +
                         std::string(to_string(lk.columns[c].type)) + " on the left and " +
                         std::string(to_string(rk.columns[c].type)) + " on the right");
  }
  return {std::move(lk), std::move(rk)};
}

Table joined_table(Table&& left, Table&& right) {
  std::vector<std::string> names = left.names();
  std::set<std::string> taken(names.begin(), names.end());
  for (std::string n : right.names()) {
    if (taken.count(n) != 0) n += "_right";
    taken.insert(n);
    names.push_back(std::move(n));
  }
  std::vector<Column> columns = std::move(left).release();
  for (Column& c : std::move(right).release()) columns.push_back(std::move(c));
  return Table(std::move(columns), std::move(names));
}

}  // namespace detail

namespace {

bool any_null(const TableView& keys, std::size_t row) {
  for (const ColumnView& c : keys.columns) {
    if (!c.is_valid(row)) return true;
  }
  return false;
}

}  // namespace

JoinMaps join_maps(const TableView& left, std::span<const std::size_t> left_keys,
                   const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
                   std::size_t threads) {
  // (Not a structured binding: the probe's lambda captures them, which clang 14 refuses.)
  const std::pair<TableView, TableView> key_views =
      detail::join_key_views(left, left_keys, right, right_keys);
  const TableView& lk = key_views.first;
  const TableView& rk = key_views.second;
  const std::size_t nl = left.num_rows();
  const std::size_t nr = right.num_rows();
  // The build side: buckets of right rows by hash, chained in row order.
  std::vector<std::uint32_t> rh(nr);
  if (nr > 0) hash_rows(rk, 0, nr, default_hash_seed, rh.data());
  const std::size_t buckets = std::bit_ceil(std::max<std::size_t>(2 * nr, 16));
  const std::size_t mask = buckets - 1;
  std::vector<std::int64_t> head(buckets, -1);
  std::vector<std::int64_t> next(nr, -1);
  for (std::size_t r = nr; r-- > 0;) {
    if (any_null(rk, r)) continue;
    const std::size_t b = detail::spread_hash(rh[r]) & mask;
    next[r] = head[b];
    head[b] = static_cast<std::int64_t>(r);
  }
  // The probe: ranges of left rows in parallel, each into its own maps.
  const std::size_t nthreads =
      std::min(detail::resolve_threads(threads), std::max<std::size_t>(1, nl / 4096));
  std::vector<JoinMaps> parts(nthreads);
  std::vector<std::uint8_t> matched(type == JoinType::full ? nr : 0, 0);
  const bool pairs = type == JoinType::inner || type == JoinType::left || type == JoinType::full;
  detail::parallel_ranges(nl, nthreads, [&](std::size_t t, std::size_t begin, std::size_t end) {
    JoinMaps& out = parts[t];
    out.left.reserve(end - begin);  // (one output row per left row is the common case)
    if (pairs) out.right.reserve(end - begin);
    std::vector<std::uint32_t> lh(end - begin);
    if (end > begin) hash_rows(lk, begin, end, default_hash_seed, lh.data());
    for (std::size_t l = begin; l < end; ++l) {
      bool found = false;
      if (!any_null(lk, l)) {
        const std::uint32_t h = lh[l - begin];
        for (std::int64_t r = head[detail::spread_hash(h) & mask]; r >= 0;
             r = next[static_cast<std::size_t>(r)]) {
          const auto ru = static_cast<std::size_t>(r);
          if (rh[ru] != h || !detail::keys_equal(lk, l, rk, ru, false)) continue;
          found = true;
          if (!pairs) break;
          out.left.push_back(static_cast<std::int64_t>(l));
          out.right.push_back(r);
          if (type == JoinType::full) {
            std::atomic_ref<std::uint8_t>(matched[ru]).store(1, std::memory_order_relaxed);
          }
        }
      }
      const bool keep = type == JoinType::left_semi   ? found
                        : type == JoinType::left_anti ? !found
                                                      : !found && type != JoinType::inner;
      if (keep) {
        out.left.push_back(static_cast<std::int64_t>(l));
        if (pairs) out.right.push_back(-1);
      }
    }
  });
  if (parts.size() == 1 && type != JoinType::full) return std::move(parts[0]);
  JoinMaps maps;
  std::size_t total = 0;
  for (const JoinMaps& p : parts) total += p.left.size();
  maps.left.reserve(total + (type == JoinType::full ? nr : 0));
  if (pairs) maps.right.reserve(maps.left.capacity());
  for (const JoinMaps& p : parts) {
    maps.left.insert(maps.left.end(), p.left.begin(), p.left.end());
    maps.right.insert(maps.right.end(), p.right.begin(), p.right.end());
  }
  if (type == JoinType::full) {
    for (std::size_t r = 0; r < nr; ++r) {
      if (matched[r] == 0) {
        maps.left.push_back(-1);
        maps.right.push_back(static_cast<std::int64_t>(r));
      }
    }
  }
  return maps;
}

Table hash_join(const TableView& left, std::span<const std::size_t> left_keys,
                const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
                BufferResource& br, std::size_t threads) {
  const JoinMaps maps = join_maps(left, left_keys, right, right_keys, type, threads);
  Table l = gather(left, maps.left, br);
  if (type == JoinType::left_semi || type == JoinType::left_anti) return l;
  return detail::joined_table(std::move(l), gather(right, maps.right, br));
}

}  // namespace spillway
