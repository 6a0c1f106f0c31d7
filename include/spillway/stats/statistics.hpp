#pragma once
/// @file statistics.hpp
/// Named statistics (bytes, durations, counts) with a text report in RapidsMPF's format and JSON.

#include <spillway/stats/memory_profiler.hpp>

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace spillway {

/// Thread-safe collection of named entries. Each entry accumulates a count of events, a byte
/// total and a time total; the report prints "name: 5.62 GiB | 171.80 ms | 32.74 GiB/s".
/// Entry names follow RapidsMPF's where they apply: `alloc-device`, `alloc-pinned_host`,
/// `copy-device-to-pinned_host`, `copy-pinned_host-to-device`, `spill-device-to-host`, ...
class Statistics {
 public:
  struct Stat {
    std::size_t count{0};
    double bytes{0};
    double seconds{0};
  };

  /// @param enabled when false every add is a no-op (the report says so).
  explicit Statistics(bool enabled = true) : enabled_{enabled} {}
  Statistics(const Statistics&) = delete;
  Statistics& operator=(const Statistics&) = delete;
  Statistics(Statistics&&) = delete;
  Statistics& operator=(Statistics&&) = delete;
  ~Statistics() = default;

  [[nodiscard]] bool enabled() const noexcept { return enabled_; }
  /// Records `events` events (one by default) that together moved `bytes` in `seconds`
  /// (either may be 0): a hot loop can sum locally and record once.
  void add(std::string_view name, double bytes, double seconds, std::size_t events = 1);
  void add_bytes(std::string_view name, double bytes) { add(name, bytes, 0); }
  void add_duration(std::string_view name, double seconds) { add(name, 0, seconds); }
  void add_count(std::string_view name) { add(name, 0, 0); }
  /// The entry, or nullopt when nothing was recorded under `name`.
  [[nodiscard]] std::optional<Stat> get(std::string_view name) const;
  using Snapshot = std::map<std::string, Stat, std::less<>>;
  [[nodiscard]] Snapshot snapshot() const;
  /// The entries of `after` that changed since `before` (two snapshots), as their difference.
  [[nodiscard]] static Snapshot since(const Snapshot& before, const Snapshot& after);
  /// {"name": {"count":..,"bytes":..,"seconds":..}, ...}
  [[nodiscard]] static std::string to_json(const Snapshot& entries);
  /// Drops every entry and the memory profile's finished scopes.
  void clear();

  /// The text report, one line per entry sorted by name, then the memory profile of each tier
  /// that saw allocations (unless `memory_profile` is false).
  [[nodiscard]] std::string report(std::string_view header = "Statistics:",
                                   bool memory_profile = true) const;
  /// {"stats": {"name": {"count":..,"bytes":..,"seconds":..}}, "memory_profile": [...]}
  [[nodiscard]] std::string to_json() const;

  MemoryProfiler& memory_profiler() noexcept { return profiler_; }
  [[nodiscard]] const MemoryProfiler& memory_profiler() const noexcept { return profiler_; }

 private:
  bool enabled_;
  mutable std::mutex mutex_;
  std::map<std::string, Stat, std::less<>> stats_;
  MemoryProfiler profiler_;
};

/// Escapes a string for JSON output.
std::string json_escape(std::string_view s);

}  // namespace spillway
