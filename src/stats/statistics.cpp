#include <spillway/stats/statistics.hpp>

#include <spillway/core/units.hpp>

#include <algorithm>
#include <array>
#include <cstdio>

namespace spillway {

std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

void Statistics::add(std::string_view name, double bytes, double seconds, std::size_t events) {
  if (!enabled_ || events == 0) return;
  std::lock_guard lock(mutex_);
  auto it = stats_.find(name);
  if (it == stats_.end()) it = stats_.emplace(std::string(name), Stat{}).first;
  it->second.count += events;
  it->second.bytes += bytes;
  it->second.seconds += seconds;
}

std::optional<Statistics::Stat> Statistics::get(std::string_view name) const {
  std::lock_guard lock(mutex_);
  auto it = stats_.find(name);
  if (it == stats_.end()) return std::nullopt;
  return it->second;
}

Statistics::Snapshot Statistics::snapshot() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Statistics::clear() {
  {
    std::lock_guard lock(mutex_);
    stats_.clear();
  }
  profiler_.clear();
}

namespace {
constexpr std::array<const char*, MemoryProfiler::num_tiers> tier_names{"device", "pinned_host",
                                                                        "host", "disk"};
}  // namespace

std::string Statistics::report(std::string_view header, bool memory_profile) const {
  std::string out(header);
  out += "\n";
  if (!enabled_) return out + " - statistics are disabled\n";
  for (const auto& [name, s] : snapshot()) {
    out += " - " + name + ": ";
    if (s.bytes > 0 && s.seconds > 0) {
      out += format_bytes(s.bytes) + " | " + format_duration(s.seconds) + " | " +
             format_bytes(s.bytes / s.seconds) + "/s";
    } else if (s.bytes > 0) {
      out += format_bytes(s.bytes);
    } else if (s.seconds > 0 && s.count > 1) {  // a time: also per call
      out += format_duration(s.seconds) + " (" + std::to_string(s.count) + " calls, " +
             format_duration(s.seconds / static_cast<double>(s.count)) + " each)\n";
      continue;
    } else if (s.seconds > 0) {
      out += format_duration(s.seconds);
    } else {  // a count alone (or bytes and time that were all zero): not a value
      out += std::to_string(s.count) + (s.count == 1 ? " call\n" : " calls\n");
      continue;
    }
    out += " (" + std::to_string(s.count) + (s.count == 1 ? " call)" : " calls)") + "\n";
  }
  for (std::size_t t = 0; memory_profile && t < MemoryProfiler::num_tiers; ++t) {
    const auto records = profiler_.records(t);
    const bool used = std::any_of(records.begin(), records.end(),
                                  [](const auto& r) { return r.second.accum > 0; });
    if (used) out += profiler_.report(t, tier_names[t]);
  }
  return out;
}

Statistics::Snapshot Statistics::since(const Snapshot& before, const Snapshot& after) {
  Snapshot out;
  for (const auto& [name, now] : after) {
    const auto it = before.find(name);
    const Stat was = it == before.end() ? Stat{} : it->second;
    if (now.count == was.count) continue;
    out.emplace(name,
                Stat{now.count - was.count, now.bytes - was.bytes, now.seconds - was.seconds});
  }
  return out;
}

std::string Statistics::to_json(const Snapshot& entries) {
  std::string out = "{";
  bool first = true;
  char num[64];
  for (const auto& [name, s] : entries) {
    out += first ? "" : ",";
    first = false;
    out += "\"" + json_escape(name) + "\":{\"count\":" + std::to_string(s.count);
    std::snprintf(num, sizeof(num), ",\"bytes\":%.0f", s.bytes);
    out += num;
    std::snprintf(num, sizeof(num), ",\"seconds\":%.9g}", s.seconds);
    out += num;
  }
  return out + "}";
}

std::string Statistics::to_json() const {
  std::string out = "{\"stats\":" + to_json(snapshot());
  out += ",\"memory_profile\":{";
  for (std::size_t t = 0; t < MemoryProfiler::num_tiers; ++t) {
    if (t > 0) out += ',';
    out += '"';
    out += tier_names[t];
    out += "\":";
    out += profiler_.to_json(t);
  }
  return out + "}}";
}

}  // namespace spillway
