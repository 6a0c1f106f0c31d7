#pragma once
// The rows spillway-bench-join joins, made on demand on each rank, and what the join must give
// for them. The build (right) keys of all ranks are 0 .. B-1, each once; a probe (left) key is
// drawn from [0, B / match): uniformly, by a Zipf law (key 0 the most frequent), or, with
// --skew, 0 for that fraction of rows. A probe row matches exactly one build row when its key
// is below B, none otherwise; a build row's payloads are functions of its key. So each rank
// knows what its probe rows must come out as without a join, and the order-independent
// checksum over all ranks of the join's output must equal that.

#include <spillway/core/cuda.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/ops/table_source.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/join.hpp>
#include <spillway/table/table.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace spillway::bench {

/// What the rows look like.
struct JoinShape {
  std::size_t build{1000000};  // rows per rank
  std::size_t probe{4000000};  // rows per rank
  double match{1};             // fraction of probe rows with a match
  double zipf{0};              // > 0: probe keys by a Zipf law of this exponent
  double skew{0};              // this fraction of probe keys is 0
  int payloads{2};             // int64 payload columns a side
  JoinType type{JoinType::inner};
};

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Payload c of the build row with key k: a function of the key.
inline std::int64_t build_payload(std::int64_t k, int c) {
  return static_cast<std::int64_t>(mix(static_cast<std::uint64_t>(k) ^ (0x5bd1e995ULL * (c + 1))) >>
                                   1);
}

/// f(begin, end) over [0, n) in `threads` ranges at once.
template <typename F>
void parallel_rows(std::size_t n, std::size_t threads, const F& f) {
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { f(n * t / threads, n * (t + 1) / threads); });
  }
  for (auto& th : pool) th.join();
}

/// A table of INT64 columns from host vectors, in tier `to` (copies to the device on the buffer
/// resource's stream); column i all null where `null[i]`.
inline Table make_table(const std::vector<std::vector<std::int64_t>>& cols,
                        const std::vector<std::string>& names, MemoryType to, BufferResource& br,
                        const std::vector<bool>& null = {}) {
  std::vector<Column> out;
  for (std::size_t i = 0; i < cols.size(); ++i) {
    const auto& v = cols[i];
    auto b = br.allocate(to, v.size() * 8, br.stream());
    if (!v.empty() && to == MemoryType::HOST) {
      std::memcpy(b->data(), v.data(), v.size() * 8);
    } else if (!v.empty()) {
      cuda::memcpy_async(b->data(), v.data(), v.size() * 8, br.stream());
    }
    std::unique_ptr<Buffer> mask;
    if (i < null.size() && null[i]) {  // (host only: for the oracle's tables)
      mask = br.allocate(MemoryType::HOST, mask_bytes(v.size()));
      if (mask->size() > 0) std::memset(mask->data(), 0, mask->size());
    }
    out.emplace_back(TypeId::INT64, v.size(), std::move(b), nullptr, std::move(mask));
  }
  return Table(std::move(out), names);
}

/// This rank's rows of both sides, any range of them made on demand (the same values whatever
/// the ranges), and what the join must give for them.
class JoinRows {
 public:
  JoinRows(const JoinShape& s, int rank, int nranks)
      : s_{s},
        rank_{static_cast<std::uint64_t>(rank)},
        total_build_{static_cast<std::uint64_t>(s.build) * static_cast<std::uint64_t>(nranks)},
        key_range_{std::max<std::uint64_t>(
            1, static_cast<std::uint64_t>(std::ceil(double(total_build_) / s.match)))},
        threads_{std::max<std::size_t>(
            1, std::thread::hardware_concurrency() / static_cast<unsigned>(nranks))} {}

  /// Build rows [begin, end): keys rank * build + i, payloads functions of the key.
  Table build(std::size_t begin, std::size_t end, MemoryType to, BufferResource& br) const {
    return make_table(build_columns(begin, end), names(true), to, br);
  }

  /// The columns of build rows [begin, end), on the host.
  [[nodiscard]] std::vector<std::vector<std::int64_t>> build_columns(std::size_t begin,
                                                                     std::size_t end) const {
    const auto np = static_cast<std::size_t>(s_.payloads);
    std::vector<std::vector<std::int64_t>> c(1 + np, std::vector<std::int64_t>(end - begin));
    parallel_rows(end - begin, threads_, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) {
        c[0][i] = static_cast<std::int64_t>(rank_ * s_.build + begin + i);
        for (std::size_t p = 0; p < np; ++p) {
          c[1 + p][i] = build_payload(c[0][i], static_cast<int>(p));
        }
      }
    });
    return c;
  }

  /// Probe rows [begin, end).
  Table probe(std::size_t begin, std::size_t end, MemoryType to, BufferResource& br) const {
    return make_table(probe_columns(begin, end), names(false), to, br);
  }

  /// The checksum of this rank's probe rows as the join gives them, made want_rows at a time:
  /// matched rows with their build row's columns after them (inner, left) or alone (semi),
  /// unmatched ones alone (anti) or with nulls after them (left).
  TableChecksum want(BufferResource& br) const {
    TableChecksum sum;
    const auto np = static_cast<std::size_t>(s_.payloads);
    const bool pairs = s_.type == JoinType::inner || s_.type == JoinType::left;
    for (std::size_t at = 0; at < s_.probe; at += want_rows) {
      const std::size_t end = std::min(s_.probe, at + want_rows);
      auto cols = probe_columns(at, end);
      for (const bool matched : {true, false}) {
        const bool kept = matched ? s_.type != JoinType::left_anti
                                  : s_.type == JoinType::left || s_.type == JoinType::left_anti;
        if (!kept) continue;
        std::vector<std::vector<std::int64_t>> out(cols.size() + (pairs ? 1 + np : 0));
        for (std::size_t r = 0; r < cols[0].size(); ++r) {
          const bool hit = static_cast<std::uint64_t>(cols[0][r]) < total_build_;
          if (hit != matched) continue;
          for (std::size_t c = 0; c < cols.size(); ++c) out[c].push_back(cols[c][r]);
          if (!pairs) continue;
          const std::int64_t k = cols[0][r];
          out[cols.size()].push_back(k);
          for (std::size_t p = 0; p < np; ++p) {
            out[cols.size() + 1 + p].push_back(build_payload(k, static_cast<int>(p)));
          }
        }
        std::vector<bool> null(out.size(), false);
        for (std::size_t c = cols.size(); c < out.size(); ++c) null[c] = !matched;
        std::vector<std::string> n = names("k", "p");
        if (pairs) {
          for (const auto& b : names("k_right", "b")) n.push_back(b);
        }
        sum += checksum(make_table(out, n, MemoryType::HOST, br, null).view());
      }
    }
    return sum;
  }

  /// The columns of probe rows [begin, end), on the host.
  [[nodiscard]] std::vector<std::vector<std::int64_t>> probe_columns(std::size_t begin,
                                                                     std::size_t end) const {
    const auto np = static_cast<std::size_t>(s_.payloads);
    std::vector<std::vector<std::int64_t>> c(1 + np, std::vector<std::int64_t>(end - begin));
    parallel_rows(end - begin, threads_, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) {
        const std::uint64_t h = mix((rank_ << 40) ^ (begin + i));
        c[0][i] = probe_key(h);
        for (std::size_t p = 0; p < np; ++p) {
          c[1 + p][i] = p == 0 ? static_cast<std::int64_t>(begin + i)
                               : static_cast<std::int64_t>(mix(h + p) >> 1);
        }
      }
    });
    return c;
  }

  /// The columns' names of the build side (k, b1, b2, ...) or the probe side (k, p1, ...).
  [[nodiscard]] std::vector<std::string> names(bool build_side) const {
    return names("k", build_side ? "b" : "p");
  }

  /// Bytes of a row of either side.
  [[nodiscard]] std::size_t row_bytes() const noexcept {
    return 8 * (1 + static_cast<std::size_t>(s_.payloads));
  }

 private:
  static constexpr std::size_t want_rows = std::size_t{1} << 20;

  /// The key, then `payloads` columns named prefix1, prefix2, ...
  [[nodiscard]] std::vector<std::string> names(const char* key, const char* prefix) const {
    std::vector<std::string> n{key};
    for (int p = 0; p < s_.payloads; ++p) n.push_back(prefix + std::to_string(p + 1));
    return n;
  }

  /// Probe row i's key from its hash h.
  [[nodiscard]] std::int64_t probe_key(std::uint64_t h) const {
    const double u = double(h >> 11) * 0x1.0p-53;  // uniform in [0, 1)
    if (s_.skew > 0 && u < s_.skew) return 0;
    const std::uint64_t n = key_range_;
    if (s_.zipf <= 0) return static_cast<std::int64_t>(mix(h) % n);
    // Zipf by inversion of the continuous power law over [1, n + 1): key 0 the most frequent.
    const double v = double(mix(h) >> 11) * 0x1.0p-53;
    const double s = s_.zipf;
    const double x = s == 1 ? std::pow(double(n) + 1, v)
                            : std::pow((std::pow(double(n) + 1, 1 - s) - 1) * v + 1, 1 / (1 - s));
    return static_cast<std::int64_t>(std::min<double>(double(n - 1), std::max(0.0, x - 1)));
  }

  JoinShape s_;
  std::uint64_t rank_;
  std::uint64_t total_build_;
  std::uint64_t key_range_;
  std::size_t threads_;
};

}  // namespace spillway::bench
