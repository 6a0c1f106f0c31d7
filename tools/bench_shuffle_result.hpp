#pragma once
// What one run of one rank of spillway-bench-shuffle measured, and its encoding for the
// collectives that bring the figures to every rank and the checksums to rank 0.

#include <spillway/core/error.hpp>
#include <spillway/stats/statistics.hpp>
#include <spillway/table/checksum.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

namespace spillway::bench {

template <typename T>
void put(std::vector<std::uint8_t>& out, const T& v) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}
template <typename T>
T get(const std::vector<std::uint8_t>& in, std::size_t& at) {
  SPILLWAY_EXPECTS(at + sizeof(T) <= in.size(), "bench-shuffle: a short figures message");
  T v;
  std::memcpy(&v, in.data() + at, sizeof(T));
  at += sizeof(T);
  return v;
}

/// What one run of one rank measured.
struct RunResult {
  double seconds{0};   // elapsed minus the excluded time
  double excluded{0};  // making the input, checksums
  std::uint64_t peak_device{0};
  std::uint64_t peak_host{0};
  double down_bytes{0};            // the statistics' copies out of device memory during the run
  double up_bytes{0};              // and into it
  double link{0};                  // tools::pcie_link_id of the rank's GPU
  std::vector<TableChecksum> in;   // per partition: what this rank inserted
  std::vector<TableChecksum> out;  // per partition: what this rank extracted

  /// Adds what a run's statistics say crossed the bus, in their copies between device memory
  /// and any other tier ("copy-device-to-pinned_host", "copy-disk-to-device", ...).
  void count_bus_bytes(const Statistics::Snapshot& run) {
    for (const auto& [name, stat] : run) {
      if (name == "copy-device-to-device") continue;
      if (name.starts_with("copy-device-to-")) down_bytes += stat.bytes;
      if (name.starts_with("copy-") && name.ends_with("-to-device")) up_bytes += stat.bytes;
    }
  }

  /// The figures (times and peaks), which every rank gets.
  [[nodiscard]] std::vector<std::uint8_t> encode_figures() const {
    std::vector<std::uint8_t> b;
    put(b, seconds);
    put(b, excluded);
    put(b, peak_device);
    put(b, peak_host);
    put(b, down_bytes);
    put(b, up_bytes);
    put(b, link);
    return b;
  }
  static RunResult decode_figures(const std::vector<std::uint8_t>& b) {
    RunResult r;
    std::size_t at = 0;
    r.seconds = get<double>(b, at);
    r.excluded = get<double>(b, at);
    r.peak_device = get<std::uint64_t>(b, at);
    r.peak_host = get<std::uint64_t>(b, at);
    r.down_bytes = get<double>(b, at);
    r.up_bytes = get<double>(b, at);
    r.link = get<double>(b, at);
    return r;
  }
  /// The per-partition checksums, which only rank 0 sums (every rank's would be n^2 each).
  [[nodiscard]] std::vector<std::uint8_t> encode_sums() const {
    std::vector<std::uint8_t> b;
    for (const auto* v : {&in, &out}) {
      for (const auto& c : *v) {
        put(b, c.rows);
        put(b, c.sum);
      }
    }
    return b;
  }
  /// Adds checksums encoded by encode_sums() into `in` and `out` (of `partitions` each).
  static void add_sums(const std::vector<std::uint8_t>& b, std::vector<TableChecksum>& in,
                       std::vector<TableChecksum>& out) {
    std::size_t at = 0;
    for (auto* v : {&in, &out}) {
      for (auto& c : *v) {
        TableChecksum x;
        x.rows = get<std::uint64_t>(b, at);
        x.sum = get<std::uint64_t>(b, at);
        c += x;
      }
    }
  }
};

}  // namespace spillway::bench
