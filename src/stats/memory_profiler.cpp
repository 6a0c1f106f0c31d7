#include <spillway/stats/memory_profiler.hpp>

#include <spillway/core/units.hpp>
#include <spillway/stats/statistics.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace spillway {

std::string memory_scope_key(const char* file, int line, std::string_view name) {
  const char* base = std::strrchr(file, '/');
  return std::string(base != nullptr ? base + 1 : file) + ":" + std::to_string(line) + "(" +
         std::string(name) + ")";
}

MemoryProfiler::Scope::Scope(MemoryProfiler& profiler, std::string key)
    : profiler_{profiler}, key_{std::move(key)} {
  profiler_.open(this);
}

MemoryProfiler::Scope::~Scope() {
  profiler_.close(this);
}

void MemoryProfiler::open(Scope* scope) {
  std::lock_guard lock(mutex_);
  for (std::size_t t = 0; t < num_tiers; ++t) scope->record_[t].global_peak = in_use_[t];
  open_.push_back(scope);
}

void MemoryProfiler::close(Scope* scope) {
  std::lock_guard lock(mutex_);
  open_.erase(std::remove(open_.begin(), open_.end(), scope), open_.end());
  for (std::size_t t = 0; t < num_tiers; ++t) {
    auto& agg = done_[t][scope->key_];
    const auto& r = scope->record_[t];
    agg.ncalls += 1;
    agg.peak = std::max(agg.peak, r.peak);
    agg.global_peak = std::max(agg.global_peak, r.global_peak);
    agg.accum += r.accum;
    agg.max_alloc = std::max(agg.max_alloc, r.max_alloc);
  }
}

void MemoryProfiler::on_allocate(std::size_t tier, std::size_t bytes) noexcept {
  const auto b = static_cast<std::int64_t>(bytes);
  std::lock_guard lock(mutex_);
  in_use_[tier] += b;
  for (Scope* s : open_) {
    auto& r = s->record_[tier];
    s->current_[tier] += b;
    r.peak = std::max(r.peak, s->current_[tier]);
    r.global_peak = std::max(r.global_peak, in_use_[tier]);
    r.accum += b;
    r.max_alloc = std::max(r.max_alloc, b);
  }
}

void MemoryProfiler::on_deallocate(std::size_t tier, std::size_t bytes) noexcept {
  const auto b = static_cast<std::int64_t>(bytes);
  std::lock_guard lock(mutex_);
  in_use_[tier] -= b;
  for (Scope* s : open_) s->current_[tier] -= b;
}

std::map<std::string, MemoryRecord> MemoryProfiler::records(std::size_t tier) const {
  std::lock_guard lock(mutex_);
  return done_[tier];
}

namespace {
std::vector<std::pair<std::string, MemoryRecord>> sorted(
    const std::map<std::string, MemoryRecord>& recs) {
  std::vector<std::pair<std::string, MemoryRecord>> rows(recs.begin(), recs.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second.peak > b.second.peak; });
  return rows;
}
}  // namespace

void MemoryProfiler::clear() {
  std::lock_guard lock(mutex_);
  for (auto& d : done_) d.clear();
}

std::string MemoryProfiler::report(std::size_t tier, std::string_view tier_name) const {
  const auto rows = sorted(records(tier));
  std::string out = "Memory profiling (" + std::string(tier_name) + "):\n";
  char line[512];
  std::snprintf(line, sizeof(line), "%8s %12s %12s %12s %12s  %s\n", "ncalls", "peak", "g-peak",
                "accum", "max", "file:line(name)");
  out += line;
  for (const auto& [key, r] : rows) {
    std::snprintf(line, sizeof(line), "%8zu %12s %12s %12s %12s  %s\n", r.ncalls,
                  format_bytes(static_cast<double>(r.peak)).c_str(),
                  format_bytes(static_cast<double>(r.global_peak)).c_str(),
                  format_bytes(static_cast<double>(r.accum)).c_str(),
                  format_bytes(static_cast<double>(r.max_alloc)).c_str(), key.c_str());
    out += line;
  }
  return out;
}

std::string MemoryProfiler::to_json(std::size_t tier) const {
  std::string out = "[";
  bool first = true;
  for (const auto& [key, r] : sorted(records(tier))) {
    out += first ? "" : ",";
    first = false;
    out += "{\"scope\":\"" + json_escape(key) + "\",\"ncalls\":" + std::to_string(r.ncalls) +
           ",\"peak\":" + std::to_string(r.peak) + ",\"g_peak\":" + std::to_string(r.global_peak) +
           ",\"accum\":" + std::to_string(r.accum) + ",\"max\":" + std::to_string(r.max_alloc) +
           "}";
  }
  return out + "]";
}

}  // namespace spillway
