#pragma once
// The settings registry (internal): every SPILLWAY_* setting declared once as a Field (its
// variable, member of OptionValues, default, documentation, parser, printer and range), and
// the registry that holds them all without their types. options.cpp reads and sets through it.

#include <spillway/core/error.hpp>
#include <spillway/core/options.hpp>

#include <functional>
#include <string>
#include <vector>

namespace spillway::detail {

/// One setting of OptionValues: its variable, member, default (as text, parsed like any
/// value), documentation, parser, printer and, where a value can be out of range, why it is.
template <typename T>
struct Field {
  const char* var;
  T OptionValues::*member;
  const char* default_text;
  const char* doc;
  T (*parse)(const std::string& text, const char* var);
  std::string (*show)(const T& value);
  const char* (*invalid)(const T& value) = nullptr;  // the range, or nullptr when fine
  std::string (*machine_default)() = nullptr;        // a default that depends on the machine
};

/// A Field without its type, as the registry holds it.
struct Setting {
  const char* var;
  const char* default_text;
  const char* doc;
  std::function<void(OptionValues&, const std::string&)> load;  // parse, check and store
  std::function<std::string(const OptionValues&)> show;
  std::function<void(OptionValues&)> reset;  // to the default
};

template <typename T>
void check(const Field<T>& f, const T& value, const std::string& got) {
  if (f.invalid == nullptr) return;
  if (const char* why = f.invalid(value)) {
    SPILLWAY_FAIL(std::string(f.var) + " must be " + why +
                  (got.empty() ? "" : ", got '" + got + "'"));
  }
}

template <typename T>
Setting erase(const Field<T>& f) {
  auto load = [f](OptionValues& v, const std::string& text) {
    T value = f.parse(text, f.var);
    check(f, value, text);
    v.*f.member = std::move(value);
  };
  return Setting{f.var,
                 f.default_text,
                 f.doc,
                 load,
                 [f](const OptionValues& v) { return f.show(v.*f.member); },
                 [f, load](OptionValues& v) {
                   load(v, f.machine_default != nullptr ? f.machine_default() : f.default_text);
                 }};
}

/// Every setting, in the order of the README's table.
const std::vector<Setting>& registry();
/// The settings' defaults with the SPILLWAY_* variables that are set applied.
/// @throws spillway::logic_error naming a variable whose value is invalid
OptionValues from_environment();

namespace field {
extern const Field<std::string> spill_dir;
extern const Field<Limit> device_limit;
extern const Field<Limit> pinned_limit;
extern const Field<Limit> host_limit;
extern const Field<Limit> disk_limit;
extern const Field<DeviceAllocator> device_allocator;
extern const Field<Limit> device_pool_size;
extern const Field<bool> pinned_pool;
extern const Field<Limit> pinned_reserve;
extern const Field<Limit> host_cache;
extern const Field<std::size_t> io_threads;
extern const Field<std::size_t> io_task_size;
extern const Field<bool> io_direct;
extern const Field<bool> io_numa;
extern const Field<IoGds> io_gds;
extern const Field<std::size_t> spill_task_size;
extern const Field<std::size_t> spill_file_size;
extern const Field<std::size_t> staging_size;
extern const Field<std::chrono::milliseconds> spill_period;
extern const Field<std::chrono::milliseconds> memory_wait;
extern const Field<std::chrono::microseconds> progress_spin;
extern const Field<double> spill_injection;
extern const Field<std::chrono::milliseconds> comm_timeout;
extern const Field<std::size_t> mpi_ipc_window;
extern const Field<std::size_t> mpi_ipc_slot;
extern const Field<std::size_t> shuffle_direct_piece;
extern const Field<LogLevel> log_level;
}  // namespace field

}  // namespace spillway::detail
