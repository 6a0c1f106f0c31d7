#pragma once
/// @file memory_profiler.hpp
/// A scoped memory profiler: it records, per named scope, the memory allocated while the scope
/// is open, from every thread, as RapidsMPF's bench output does.

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace spillway {

/// Per-scope figures. For one memory tier:
/// - ncalls: how many times the scope was opened;
/// - peak:   the largest rise of memory in use above its level when the scope opened (per call);
/// - g-peak: the largest memory in use (by the whole resource) while the scope was open;
/// - accum:  all bytes allocated while the scope was open, summed over calls;
/// - max:    the largest single allocation made while the scope was open.
struct MemoryRecord {
  std::size_t ncalls{0};
  std::int64_t peak{0};
  std::int64_t global_peak{0};
  std::int64_t accum{0};
  std::int64_t max_alloc{0};
};

/// Thread-safe. Allocation events come from the BufferResource (`on_allocate`/`on_deallocate`)
/// with the index of the memory tier (0..3); every open scope sees every event, whichever thread
/// made it.
class MemoryProfiler {
 public:
  static constexpr std::size_t num_tiers = 4;

  /// An open profiling scope; the figures are merged into the report when it closes.
  class Scope {
   public:
    Scope(MemoryProfiler& profiler, std::string key);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope(Scope&&) = delete;
    Scope& operator=(Scope&&) = delete;

   private:
    friend class MemoryProfiler;
    MemoryProfiler& profiler_;
    std::string key_;
    std::array<std::int64_t, num_tiers> current_{};
    std::array<MemoryRecord, num_tiers> record_{};
  };

  void on_allocate(std::size_t tier, std::size_t bytes) noexcept;
  void on_deallocate(std::size_t tier, std::size_t bytes) noexcept;

  /// Forgets the figures of closed scopes (open ones still report when they close).
  void clear();

  /// Figures per scope key ("file:line(name)") for one tier.
  [[nodiscard]] std::map<std::string, MemoryRecord> records(std::size_t tier) const;
  /// The table: "ncalls peak g-peak accum max file:line(name)", sorted by peak (largest first).
  [[nodiscard]] std::string report(std::size_t tier, std::string_view tier_name) const;
  /// A JSON array of {"scope":..,"ncalls":..,"peak":..,...} for one tier.
  [[nodiscard]] std::string to_json(std::size_t tier) const;

 private:
  void open(Scope* scope);
  void close(Scope* scope);

  mutable std::mutex mutex_;
  std::array<std::int64_t, num_tiers> in_use_{};
  std::vector<Scope*> open_;
  std::array<std::map<std::string, MemoryRecord>, num_tiers> done_;
};

/// Makes a scope key "file:line(name)" from a path (only its base name is kept).
std::string memory_scope_key(const char* file, int line, std::string_view name);

}  // namespace spillway

#define SPILLWAY_CONCAT_IMPL(a, b) a##b
#define SPILLWAY_CONCAT(a, b) SPILLWAY_CONCAT_IMPL(a, b)
/// Profiles the memory allocated until the end of the enclosing block:
/// SPILLWAY_MEMORY_PROFILE(statistics.memory_profiler(), "partition_and_pack");
#define SPILLWAY_MEMORY_PROFILE(profiler, name)                                         \
  ::spillway::MemoryProfiler::Scope SPILLWAY_CONCAT(spillway_memory_scope_, __LINE__) { \
    (profiler), ::spillway::memory_scope_key(__FILE__, __LINE__, (name))                \
  }
