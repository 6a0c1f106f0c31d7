#pragma once
/// @file options.hpp
/// The one options object of spillway. Every setting has a SPILLWAY_* environment variable
/// (read once, at first use), a setter, and a documented default, all declared once in the
/// settings registry. Thread-safe.

#include <spillway/core/limit.hpp>
#include <spillway/core/logging.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace spillway {

/// The device allocators, as RapidsMPF's `-m`.
enum class DeviceAllocator {
  cuda,   ///< cudaMalloc / cudaFree
  async,  ///< cudaMallocAsync on the device's default memory pool
  pool,   ///< a dedicated cudaMemPool, its memory reserved up front
};
/// Parses "cuda|async|pool". @throws spillway::logic_error naming the valid choices.
DeviceAllocator parse_device_allocator(const std::string& text);
const char* to_string(DeviceAllocator a) noexcept;

/// GPUDirect Storage use (SPILLWAY_IO_GDS).
enum class IoGds { off, automatic, on };
/// Parses "off|auto|on". @throws spillway::logic_error naming the valid choices.
IoGds parse_io_gds(const std::string& text);
const char* to_string(IoGds g) noexcept;

/// All settings, each declared once in the settings registry (src/core/settings.cpp): its
/// SPILLWAY_* variable, parser, default and documentation. docs/SETTINGS.md's table is
/// generated from it (`spillway-settings --markdown`); `options::describe()` gives it at run
/// time. A default-constructed OptionValues holds every default. Use `options::get()` for a
/// snapshot of the current settings and the setters to change one.
struct OptionValues {
  OptionValues();

  std::string spill_dir;  ///< SPILLWAY_SPILL_DIR
  Limit device_limit, pinned_limit, host_limit,
      disk_limit;                             ///< SPILLWAY_{DEVICE,PINNED,HOST,DISK}_LIMIT
  DeviceAllocator device_allocator{};         ///< SPILLWAY_DEVICE_ALLOCATOR
  Limit device_pool_size;                     ///< SPILLWAY_DEVICE_POOL_SIZE
  bool pinned_pool{};                         ///< SPILLWAY_PINNED_POOL
  Limit pinned_reserve;                       ///< SPILLWAY_PINNED_RESERVE
  Limit host_cache;                           ///< SPILLWAY_HOST_CACHE
  std::size_t io_threads{};                   ///< SPILLWAY_IO_THREADS
  std::size_t io_task_size{};                 ///< SPILLWAY_IO_TASK_SIZE
  bool io_direct{};                           ///< SPILLWAY_IO_DIRECT
  bool io_numa{};                             ///< SPILLWAY_IO_NUMA
  IoGds io_gds{};                             ///< SPILLWAY_IO_GDS
  std::size_t spill_task_size{};              ///< SPILLWAY_SPILL_TASK_SIZE
  std::size_t spill_file_size{};              ///< SPILLWAY_SPILL_FILE_SIZE
  std::size_t staging_size{};                 ///< SPILLWAY_STAGING_SIZE
  std::chrono::milliseconds spill_period{};   ///< SPILLWAY_SPILL_PERIOD_MS
  std::chrono::milliseconds memory_wait{};    ///< SPILLWAY_MEMORY_WAIT_MS
  std::chrono::microseconds progress_spin{};  ///< SPILLWAY_PROGRESS_SPIN_US
  double spill_injection{};                   ///< SPILLWAY_SPILL_INJECT
  std::chrono::milliseconds comm_timeout{};   ///< SPILLWAY_COMM_TIMEOUT
  std::size_t mpi_ipc_window{};               ///< SPILLWAY_MPI_IPC_WINDOW
  std::size_t mpi_ipc_slot{};                 ///< SPILLWAY_MPI_IPC_SLOT
  std::size_t shuffle_direct_piece{};         ///< SPILLWAY_SHUFFLE_DIRECT_PIECE
  std::string transfer_backend;               ///< SPILLWAY_TRANSFER_BACKEND
  std::string transfer_provider;              ///< SPILLWAY_TRANSFER_PROVIDER
  std::string transfer_address;               ///< SPILLWAY_TRANSFER_ADDRESS
  std::size_t transfer_ipc_window{};          ///< SPILLWAY_TRANSFER_IPC_WINDOW
  LogLevel log_level{};                       ///< SPILLWAY_LOG_LEVEL

  friend bool operator==(const OptionValues&, const OptionValues&) = default;
};

/// One setting as the registry declares it.
struct SettingInfo {
  std::string variable;       ///< SPILLWAY_...
  std::string default_value;  ///< as documented ("4MiB", "unlimited", "$TMPDIR, else /tmp")
  std::string description;
  std::string current;  ///< its value in options::get(), as text
};

namespace options {
/// A snapshot of the current settings (environment applied on first call).
OptionValues get();
/// The current log level, without copying the settings (environment applied on first call).
LogLevel log_level();
/// Replaces all settings (used by OptionsGuard).
void set(const OptionValues& values);

void set_spill_dir(std::string dir);
void set_device_limit(Limit l);
void set_pinned_limit(Limit l);
void set_host_limit(Limit l);
void set_disk_limit(Limit l);
void set_device_allocator(DeviceAllocator a);
void set_device_pool_size(Limit l);
void set_pinned_pool(bool enabled);
void set_pinned_reserve(Limit l);
void set_host_cache(Limit l);
void set_io_threads(std::size_t n);
void set_io_task_size(std::size_t bytes);
void set_io_direct(bool enabled);
void set_io_numa(bool enabled);
void set_io_gds(IoGds mode);
void set_spill_task_size(std::size_t bytes);
void set_spill_file_size(std::size_t bytes);
void set_staging_size(std::size_t bytes);
void set_spill_period(std::chrono::milliseconds period);
void set_spill_injection(double probability);
void set_comm_timeout(std::chrono::milliseconds timeout);
void set_mpi_ipc_window(std::size_t bytes);
void set_mpi_ipc_slot(std::size_t bytes);
void set_shuffle_direct_piece(std::size_t bytes);
void set_memory_wait(std::chrono::milliseconds wait);
void set_progress_spin(std::chrono::microseconds spin);
void set_log_level(LogLevel level);

/// Every setting, in the registry's order, with its current value.
std::vector<SettingInfo> describe();
/// The settings as a Markdown table (variable, default, meaning): the README's.
std::string markdown_table();

/// Reads the SPILLWAY_* variables again into the settings (tests use this after setenv).
/// @throws spillway::logic_error naming the variable whose value is invalid.
void reload_from_environment();
}  // namespace options

/// Restores every setting on destruction; tests use it so that a setter does not leak.
class OptionsGuard {
 public:
  OptionsGuard() : saved_{options::get()} {}
  ~OptionsGuard() { options::set(saved_); }
  OptionsGuard(const OptionsGuard&) = delete;
  OptionsGuard& operator=(const OptionsGuard&) = delete;
  OptionsGuard(OptionsGuard&&) = delete;
  OptionsGuard& operator=(OptionsGuard&&) = delete;

 private:
  OptionValues saved_;
};

}  // namespace spillway
