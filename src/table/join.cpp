// The local hash join (join.hpp): a chained hash table of the right side's rows by key hash,
// probed by ranges of left rows in parallel, each range's pairs kept apart and put together
// in range order (the output order does not depend on the thread count); an output larger
// than a chunk is counted first and made a window of positions at a time.
#include <spillway/table/join.hpp>

#include <spillway/core/error.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/hashing.hpp>

#include "table/detail/cpu_threads.hpp"
#include "table/detail/join_common.hpp"
#include "table/detail/key_equality.hpp"
#include "table/detail/spread_hash.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
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

using detail::outputs_pairs;

/// The hash table of the right (build) side and the probes of it by left rows: one pass that
/// makes the output's maps when they fit a chunk; else a count pass (each left row's output
/// rows, and a full join's matched right rows), then write passes of the pairs whose output
/// positions lie in a window, each row's at the positions the count pass's exclusive sums give
/// it.
class Probe {
 public:
  Probe(const TableView& lk, const TableView& rk, JoinType type, std::size_t threads)
      : lk_{lk}, rk_{rk}, type_{type}, nl_{lk.num_rows()}, nr_{rk.num_rows()}, rh_(nr_) {
    if (nr_ > 0) hash_rows(rk_, 0, nr_, default_hash_seed, rh_.data());
    const std::size_t buckets = std::bit_ceil(std::max<std::size_t>(2 * nr_, 16));
    mask_ = buckets - 1;
    head_.assign(buckets, -1);
    next_.assign(nr_, -1);
    for (std::size_t r = nr_; r-- > 0;) {  // chained in row order
      if (any_null(rk_, r)) continue;
      const std::size_t b = detail::spread_hash(rh_[r]) & mask_;
      next_[r] = head_[b];
      head_[b] = static_cast<std::int64_t>(r);
    }
    threads_ = std::min(detail::resolve_threads(threads), std::max<std::size_t>(1, nl_ / 4096));
    if (type_ == JoinType::full) matched_.assign(nr_, 0);
  }

  /// The left rows' output rows in one pass, when they are at most `chunk_rows`: each range
  /// of left rows makes its own maps, in order, until it has more than its share of
  /// chunk_rows; nullopt when one did (the output is larger: count() and write() take it in
  /// windows). Marks a full join's matched rows either way.
  std::optional<JoinMaps> in_one_pass(std::size_t chunk_rows) {
    const bool all = outputs_pairs(type_);
    const std::size_t share = std::max<std::size_t>(1, chunk_rows / threads_);
    std::vector<JoinMaps> parts(threads_);
    std::atomic<bool> over{false};
    detail::parallel_ranges(nl_, threads_, [&](std::size_t t, std::size_t a, std::size_t b) {
      JoinMaps& out = parts[t];
      const std::size_t guess = std::min(b - a, share);  // one row each is the common case
      out.left.reserve(guess);
      if (all) out.right.reserve(guess);
      for_each_row(a, b, [&](std::size_t l, std::uint32_t h) {
        if (over.load(std::memory_order_relaxed)) return;
        const std::uint64_t n = matches(l, h, [&](std::size_t r) {
          out.left.push_back(static_cast<std::int64_t>(l));
          out.right.push_back(static_cast<std::int64_t>(r));
        });
        if (output_rows(n) == 1 && (n == 0 || !all)) {  // a row that is not a pair
          out.left.push_back(static_cast<std::int64_t>(l));
          if (all) out.right.push_back(-1);
        }
        if (out.left.size() > share) over.store(true, std::memory_order_relaxed);
      });
    });
    std::size_t total = 0;
    for (const JoinMaps& p : parts) total += p.left.size();
    if (over.load() || total > chunk_rows) return std::nullopt;
    if (parts.size() == 1) return std::move(parts[0]);
    JoinMaps maps;
    maps.left.reserve(total);
    if (all) maps.right.reserve(total);
    for (const JoinMaps& p : parts) {
      maps.left.insert(maps.left.end(), p.left.begin(), p.left.end());
      maps.right.insert(maps.right.end(), p.right.begin(), p.right.end());
    }
    return maps;
  }

  /// offsets[l] = the first output position of left row l, offsets[nl] = the pairs (left
  /// rows' outputs; a full join's unmatched right rows come after them). Marks matched rows.
  void count(std::uint64_t* offsets) {
    std::vector<std::uint64_t> sums(threads_, 0);
    detail::parallel_ranges(nl_, threads_, [&](std::size_t t, std::size_t a, std::size_t b) {
      std::uint64_t sum = 0;
      for_each_row(a, b, [&](std::size_t l, std::uint32_t h) {
        offsets[l] = output_rows(matches(l, h, [](std::size_t) {}));
        sum += offsets[l];
      });
      sums[t] = sum;
    });
    // Exclusive sums: each range's base, then the range's own running sum.
    std::vector<std::uint64_t> base(threads_ + 1, 0);
    for (std::size_t t = 0; t < threads_; ++t) base[t + 1] = base[t] + sums[t];
    offsets[nl_] = base[threads_];
    detail::parallel_ranges(nl_, threads_, [&](std::size_t t, std::size_t a, std::size_t b) {
      std::uint64_t at = base[t];
      for (std::size_t l = a; l < b; ++l) {
        const std::uint64_t n = offsets[l];
        offsets[l] = at;
        at += n;
      }
    });
  }

  /// The output rows at positions [p, q) (of the pairs offsets[nl] counts), whose left rows
  /// are [a, b): left[i] and right[i] for position p + i (right empty for semi and anti).
  void write(const std::uint64_t* offsets, std::size_t a, std::size_t b, std::uint64_t p,
             std::uint64_t q, JoinMaps& out) {
    out.left.assign(q - p, -1);
    const bool all = outputs_pairs(type_);
    if (all) out.right.assign(q - p, -1);
    const std::size_t threads = std::min(threads_, std::max<std::size_t>(1, (b - a) / 4096));
    detail::parallel_ranges(b - a, threads, [&](std::size_t, std::size_t ra, std::size_t rb) {
      for_each_row(a + ra, a + rb, [&](std::size_t l, std::uint32_t h) {
        const std::uint64_t first = offsets[l];
        if (first >= q || offsets[l + 1] <= p) return;  // a row with no output here
        std::uint64_t at = first;                       // the position of the next output row of l
        for_each_match(l, h, [&](std::size_t r) {
          if (all && at >= p && at < q) {
            out.left[at - p] = static_cast<std::int64_t>(l);
            out.right[at - p] = static_cast<std::int64_t>(r);
          }
          ++at;
          return all && at < q;
        });
        // One output row that is not a pair: an unmatched row a left or full join keeps (right
        // -1), or the row itself in a semi or anti join.
        if (offsets[l + 1] > first && first >= p && (at == first || !all)) {
          out.left[first - p] = static_cast<std::int64_t>(l);
        }
      });
    });
  }

  /// A full join's right rows that no left row matched, in their order (after count()).
  [[nodiscard]] std::vector<std::int64_t> unmatched() const {
    std::vector<std::int64_t> rows;
    for (std::size_t r = 0; r < matched_.size(); ++r) {
      if (matched_[r] == 0) rows.push_back(static_cast<std::int64_t>(r));
    }
    return rows;
  }

  [[nodiscard]] std::size_t left_rows() const noexcept { return nl_; }

 private:
  [[nodiscard]] std::uint64_t output_rows(std::uint64_t matches) const noexcept {
    return detail::output_rows(type_, matches);
  }

  /// Left row l's matches (hash h), counted: every one for joins that output pairs, each
  /// given to pair(r) and marked matched for a full join; the first only for semi and anti.
  template <typename Pair>
  std::uint64_t matches(std::size_t l, std::uint32_t h, const Pair& pair) {
    const bool all = outputs_pairs(type_);
    std::uint64_t n = 0;
    for_each_match(l, h, [&](std::size_t r) {
      ++n;
      if (type_ == JoinType::full) {
        std::atomic_ref<std::uint8_t>(matched_[r]).store(1, std::memory_order_relaxed);
      }
      if (all) pair(r);
      return all;
    });
    return n;
  }

  /// f(l, hash of l's keys) for the left rows [a, b), hashed a block at a time.
  template <typename F>
  void for_each_row(std::size_t a, std::size_t b, const F& f) const {
    constexpr std::size_t block = 4096;
    std::vector<std::uint32_t> lh(std::min(block, b - a));
    for (std::size_t a0 = a; a0 < b; a0 += block) {
      const std::size_t b0 = std::min(b, a0 + block);
      hash_rows(lk_, a0, b0, default_hash_seed, lh.data());
      for (std::size_t l = a0; l < b0; ++l) f(l, lh[l - a0]);
    }
  }

  /// f(r) for each right row r whose keys equal left row l's (hash h), in row order, until
  /// f returns false. A null key matches nothing.
  template <typename F>
  void for_each_match(std::size_t l, std::uint32_t h, const F& f) const {
    if (any_null(lk_, l)) return;
    for (std::int64_t r = head_[detail::spread_hash(h) & mask_]; r >= 0;
         r = next_[static_cast<std::size_t>(r)]) {
      const auto ru = static_cast<std::size_t>(r);
      if (rh_[ru] != h || !detail::keys_equal(lk_, l, rk_, ru, false)) continue;
      if (!f(ru)) return;
    }
  }

  TableView lk_, rk_;
  JoinType type_;
  std::size_t nl_, nr_;
  std::vector<std::uint32_t> rh_;
  std::vector<std::int64_t> head_, next_;
  std::size_t mask_{0};
  std::size_t threads_{1};
  std::vector<std::uint8_t> matched_;
};

/// The output rows of a join in windows of at most `chunk_rows`: window(maps) for each, in
/// order (the left rows' outputs, then a full join's unmatched right rows), at least once. The
/// count pass's offsets (8 bytes per left row) come from `br` when given.
void join_windows(const TableView& left, std::span<const std::size_t> left_keys,
                  const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
                  std::size_t threads, BufferResource* br, std::size_t chunk_rows,
                  const std::function<void(JoinMaps&&)>& window) {
  SPILLWAY_EXPECTS(chunk_rows > 0, "join: chunks of 0 rows");
  // (Not a structured binding: the probe's lambdas capture them, which clang 14 refuses.)
  const std::pair<TableView, TableView> key_views =
      detail::join_key_views(left, left_keys, right, right_keys);
  Probe probe(key_views.first, key_views.second, type, threads);
  bool any = false;
  if (std::optional<JoinMaps> maps = probe.in_one_pass(chunk_rows)) {  // the common case
    if (!maps->left.empty()) {
      window(std::move(*maps));
      any = true;
    }
  } else {
    // More output than a chunk: each left row's output rows counted first, then written a
    // window of positions at a time.
    const std::size_t nl = probe.left_rows();
    std::unique_ptr<Buffer> offsets_buf;
    std::vector<std::uint64_t> offsets_vec;
    if (br != nullptr) {
      offsets_buf = br->allocate(MemoryType::HOST, (nl + 1) * sizeof(std::uint64_t));
    } else {
      offsets_vec.resize(nl + 1);
    }
    auto* offsets =
        br != nullptr ? reinterpret_cast<std::uint64_t*>(offsets_buf->data()) : offsets_vec.data();
    probe.count(offsets);
    const std::uint64_t pairs = offsets[nl];
    for (std::uint64_t p = 0, q = 0; p < pairs; p = q) {
      q = pairs - p > chunk_rows ? p + chunk_rows : pairs;
      // The left rows with output in [p, q): from the last row starting at or before p to
      // the first row starting at or after q.
      const auto a =
          static_cast<std::size_t>(std::upper_bound(offsets, offsets + nl + 1, p) - offsets - 1);
      const auto b =
          static_cast<std::size_t>(std::lower_bound(offsets + a, offsets + nl + 1, q) - offsets);
      JoinMaps maps;
      probe.write(offsets, a, std::min(b, nl), p, q, maps);
      window(std::move(maps));
      any = true;
    }
  }
  if (type == JoinType::full) {
    const std::vector<std::int64_t> rows = probe.unmatched();
    for (std::size_t at = 0; at < rows.size(); at += chunk_rows) {
      const std::size_t n = std::min(chunk_rows, rows.size() - at);
      JoinMaps maps;
      maps.left.assign(n, -1);
      maps.right.assign(rows.begin() + static_cast<std::ptrdiff_t>(at),
                        rows.begin() + static_cast<std::ptrdiff_t>(at + n));
      window(std::move(maps));
      any = true;
    }
  }
  if (!any) window(JoinMaps{});
}

/// The joined table of one window's maps.
Table joined(const TableView& left, const TableView& right, JoinType type, const JoinMaps& maps,
             BufferResource& br) {
  Table l = gather(left, maps.left, br);
  if (!outputs_pairs(type)) return l;
  return detail::joined_table(std::move(l), gather(right, maps.right, br));
}

}  // namespace

JoinMaps join_maps(const TableView& left, std::span<const std::size_t> left_keys,
                   const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
                   std::size_t threads) {
  JoinMaps all;
  join_windows(left, left_keys, right, right_keys, type, threads, nullptr,
               std::numeric_limits<std::size_t>::max(), [&](JoinMaps&& maps) {
                 if (all.left.empty()) {
                   all = std::move(maps);
                   return;
                 }
                 all.left.insert(all.left.end(), maps.left.begin(), maps.left.end());
                 all.right.insert(all.right.end(), maps.right.begin(), maps.right.end());
               });
  return all;
}

void hash_join(const TableView& left, std::span<const std::size_t> left_keys,
               const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
               BufferResource& br, std::size_t chunk_rows, const std::function<void(Table&&)>& out,
               std::size_t threads) {
  join_windows(left, left_keys, right, right_keys, type, threads, &br, chunk_rows,
               [&](JoinMaps&& maps) { out(joined(left, right, type, maps, br)); });
}

Table hash_join(const TableView& left, std::span<const std::size_t> left_keys,
                const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
                BufferResource& br, std::size_t threads) {
  return joined(left, right, type, join_maps(left, left_keys, right, right_keys, type, threads),
                br);
}

}  // namespace spillway
