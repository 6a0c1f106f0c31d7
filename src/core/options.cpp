// The options object: the current settings (from the registry's defaults and the
// environment, core/detail/settings.hpp), their setters, and the registry's descriptions.
#include <spillway/core/options.hpp>
#include <spillway/core/setting_by_name.hpp>

#include <spillway/core/error.hpp>

#include "core/detail/enum_names.hpp"
#include "core/detail/settings.hpp"

#include <atomic>
#include <mutex>
#include <optional>
#include <type_traits>
#include <vector>

namespace spillway {

namespace {
constexpr detail::EnumNames<DeviceAllocator, 3> allocator_names{{{"cuda", DeviceAllocator::cuda},
                                                                 {"async", DeviceAllocator::async},
                                                                 {"pool", DeviceAllocator::pool}}};
constexpr detail::EnumNames<IoGds, 3> gds_names{
    {{"off", IoGds::off}, {"auto", IoGds::automatic}, {"on", IoGds::on}}};
}  // namespace

DeviceAllocator parse_device_allocator(const std::string& text) {
  return detail::parse_enum(text, allocator_names, "device allocator");
}

const char* to_string(DeviceAllocator a) noexcept {
  return detail::enum_name(a, allocator_names);
}

IoGds parse_io_gds(const std::string& text) {
  return detail::parse_enum(text, gds_names, "GPUDirect Storage mode");
}

const char* to_string(IoGds g) noexcept {
  return detail::enum_name(g, gds_names);
}

namespace {

using detail::Field;
using detail::from_environment;
using detail::registry;
using detail::Setting;
namespace field = detail::field;

struct State {
  std::mutex mutex;
  std::optional<OptionValues> values;
  // The log level, readable without the lock or a copy of the settings (logging checks it on
  // every message); -1 until the settings are first read.
  std::atomic<int> log_level{-1};
};

State& state() {
  static State s;
  return s;
}

template <typename F>
void update(F&& f) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.values) s.values = from_environment();
  f(*s.values);
  s.log_level.store(static_cast<int>(s.values->log_level), std::memory_order_relaxed);
}

/// Sets one field, checked as the registry says (a value out of range names the variable).
template <typename T>
void set_field(const Field<T>& f, T value) {
  check(f, value, std::string());
  if constexpr (std::is_same_v<T, std::string>) {
    f.parse(value, f.var);  // (the checks a string's parser makes)
  }
  update([&](OptionValues& v) { v.*f.member = std::move(value); });
}

}  // namespace

namespace options {

OptionValues get() {
  auto& st = state();
  std::lock_guard lock(st.mutex);
  if (!st.values) {
    st.values = from_environment();
    st.log_level.store(static_cast<int>(st.values->log_level), std::memory_order_relaxed);
  }
  return *st.values;
}

LogLevel log_level() {
  const int level = state().log_level.load(std::memory_order_relaxed);
  return level >= 0 ? static_cast<LogLevel>(level) : get().log_level;
}

void set(const OptionValues& values) {
  update([&](OptionValues& v) { v = values; });
}

void reload_from_environment() {
  OptionValues fresh = from_environment();
  update([&](OptionValues& v) { v = std::move(fresh); });
}

void set_spill_dir(std::string dir) {
  set_field(field::spill_dir, std::move(dir));
}
void set_device_limit(Limit l) {
  set_field(field::device_limit, l);
}
void set_pinned_limit(Limit l) {
  set_field(field::pinned_limit, l);
}
void set_host_limit(Limit l) {
  set_field(field::host_limit, l);
}
void set_disk_limit(Limit l) {
  set_field(field::disk_limit, l);
}
void set_device_allocator(DeviceAllocator a) {
  set_field(field::device_allocator, a);
}
void set_device_pool_size(Limit l) {
  set_field(field::device_pool_size, l);
}
void set_pinned_pool(bool enabled) {
  set_field(field::pinned_pool, enabled);
}
void set_pinned_reserve(Limit l) {
  set_field(field::pinned_reserve, l);
}
void set_host_cache(Limit l) {
  set_field(field::host_cache, l);
}
void set_io_threads(std::size_t n) {
  set_field(field::io_threads, n);
}
void set_io_task_size(std::size_t bytes) {
  set_field(field::io_task_size, bytes);
}
void set_io_direct(bool enabled) {
  set_field(field::io_direct, enabled);
}
void set_io_numa(bool enabled) {
  set_field(field::io_numa, enabled);
}
void set_io_gds(IoGds mode) {
  set_field(field::io_gds, mode);
}
void set_spill_task_size(std::size_t bytes) {
  set_field(field::spill_task_size, bytes);
}
void set_spill_file_size(std::size_t bytes) {
  set_field(field::spill_file_size, bytes);
}
void set_staging_size(std::size_t bytes) {
  set_field(field::staging_size, bytes);
}
void set_spill_period(std::chrono::milliseconds period) {
  set_field(field::spill_period, period);
}
void set_memory_wait(std::chrono::milliseconds wait) {
  set_field(field::memory_wait, wait);
}
void set_progress_spin(std::chrono::microseconds spin) {
  set_field(field::progress_spin, spin);
}
void set_spill_injection(double probability) {
  set_field(field::spill_injection, probability);
}
void set_comm_timeout(std::chrono::milliseconds timeout) {
  set_field(field::comm_timeout, timeout);
}
void set_mpi_ipc_window(std::size_t bytes) {
  set_field(field::mpi_ipc_window, bytes);
}
void set_mpi_ipc_slot(std::size_t bytes) {
  set_field(field::mpi_ipc_slot, bytes);
}
void set_shuffle_direct_piece(std::size_t bytes) {
  set_field(field::shuffle_direct_piece, bytes);
}
void set_log_level(LogLevel level) {
  set_field(field::log_level, level);
}

std::vector<SettingInfo> describe() {
  const OptionValues now = get();
  std::vector<SettingInfo> out;
  for (const Setting& s : registry()) out.push_back({s.var, s.default_text, s.doc, s.show(now)});
  return out;
}

namespace {
const Setting& setting_named(const std::string& var) {
  for (const Setting& s : registry()) {
    if (var == s.var) return s;
  }
  SPILLWAY_FAIL("no setting " + var + " (spillway-settings lists them)");
}
}  // namespace

void set_by_name(const std::string& var, const std::string& text) {
  const Setting& s = setting_named(var);
  update([&](OptionValues& v) {
    OptionValues changed = v;
    s.load(changed, text);  // parses and checks: a bad value leaves every setting as it was
    v = std::move(changed);
  });
}

std::string get_by_name(const std::string& var) {
  return setting_named(var).show(get());
}

std::string markdown_table() {
  std::string t = "| Variable | Default | Meaning |\n|---|---|---|\n";
  for (const Setting& s : registry()) {
    t += "| `" + std::string(s.var) + "` | `" + s.default_text + "` | " + s.doc + " |\n";
  }
  return t;
}

}  // namespace options
}  // namespace spillway
