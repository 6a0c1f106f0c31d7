#pragma once
/// @file options.hpp
/// The one options object of spillway. Every setting has a SPILLWAY_* environment variable
/// (read once, at first use), a setter, and a documented default. Thread-safe.

#include <spillway/core/limit.hpp>
#include <spillway/core/logging.hpp>

#include <chrono>
#include <cstddef>
#include <string>

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

/// GPUDirect Storage use (see OptionValues::io_gds).
enum class IoGds { off, automatic, on };

/// All settings. Use `options::get()` for a snapshot and the setters to change one.
struct OptionValues {
  /// SPILLWAY_SPILL_DIR; default: $TMPDIR, else /tmp. A private subdirectory is made inside.
  std::string spill_dir;
  /// SPILLWAY_DEVICE_LIMIT, SPILLWAY_PINNED_LIMIT, SPILLWAY_HOST_LIMIT, SPILLWAY_DISK_LIMIT:
  /// bytes ("4GiB"), a fraction of capacity ("80%") or "unlimited" (the default for all).
  Limit device_limit, pinned_limit, host_limit, disk_limit;
  /// SPILLWAY_DEVICE_ALLOCATOR: cuda | async | pool; default async.
  DeviceAllocator device_allocator{DeviceAllocator::async};
  /// SPILLWAY_DEVICE_POOL_SIZE: memory reserved up front by the `pool` allocator; default: the
  /// device limit when one is set, else 50% of the device.
  Limit device_pool_size{Limit::unlimited()};
  /// SPILLWAY_PINNED_POOL: use a pinned-host pool for PINNED_HOST (1) or disable that tier (0,
  /// like RapidsMPF's -L). Default 1.
  bool pinned_pool{true};
  /// SPILLWAY_PINNED_RESERVE: pinned host memory the pool maps up front (bytes or a fraction
  /// of host memory, at most the PINNED_HOST limit); default 0: it grows as it is used. Growing
  /// pins fresh pages on the allocating thread, a few GB/s (bench/NOTES.md), so a first
  /// landing of several GiB on the host waits for it.
  Limit pinned_reserve{Limit::bytes(0)};
  /// SPILLWAY_HOST_CACHE: freed host blocks kept for reuse (bytes or a fraction of host
  /// memory); cached plus used bytes never exceed the HOST limit. Default 10%.
  Limit host_cache{Limit::fraction(0.1)};
  /// SPILLWAY_IO_THREADS: threads of the spill I/O pool and of file reads; default
  /// min(16, the CPUs this process may use), counting only those of the GPU's NUMA node on a
  /// machine of several nodes.
  std::size_t io_threads{0};
  /// SPILLWAY_IO_TASK_SIZE: bytes per parallel file-read task; default 4 MiB.
  std::size_t io_task_size{0};
  /// SPILLWAY_IO_DIRECT: 1 reads files with O_DIRECT (where the file system allows); default 0.
  bool io_direct{false};
  /// SPILLWAY_IO_NUMA: 1 (the default): on a machine of several NUMA nodes, I/O threads run on
  /// the CPUs of the GPU's node and pinned bounce buffers come from its memory; 0 leaves both
  /// to the operating system. Nothing changes on a one-node machine.
  bool io_numa{true};
  /// SPILLWAY_IO_GDS: GPUDirect Storage (cuFile) for file reads into and writes from device
  /// memory: `off`; `auto` (the default) uses it when libcufile loads and the nvidia-fs driver
  /// is there (true GDS); `on` whenever libcufile loads, also in its compatibility mode.
  IoGds io_gds{IoGds::automatic};
  /// SPILLWAY_SPILL_TASK_SIZE: bytes per parallel spill read/write task, each with its own
  /// checksum; default 8 MiB.
  std::size_t spill_task_size{0};
  /// SPILLWAY_SPILL_FILE_SIZE: a spill file takes new blocks until it is this big; default 1 GiB.
  std::size_t spill_file_size{0};
  /// SPILLWAY_STAGING_SIZE: pinned bounce memory for DEVICE<->DISK copies; default 0 = auto:
  /// two halves of io_threads x spill_task_size, so that every I/O thread has a piece.
  std::size_t staging_size{0};
  /// SPILLWAY_SPILL_PERIOD_MS: period of the background spill thread (0 = off, the default).
  std::chrono::milliseconds spill_period{0};
  /// SPILLWAY_MEMORY_WAIT_MS: how long a reservation that finds its tiers full of memory that
  /// cannot spill (transfers in flight, buffers in use) waits for some of it to be freed before
  /// it fails; every release starts the wait again. Default 1000; 0 fails at once.
  std::chrono::milliseconds memory_wait{1000};
  /// SPILLWAY_PROGRESS_SPIN_US: how long a progress thread with nothing to do polls before it
  /// backs off into sleeps of up to 1 ms (ProgressThread::Backoff). Default 2000.
  std::chrono::microseconds progress_spin{2000};
  /// SPILLWAY_SPILL_INJECT: probability (0..1) that a reservation first spills its tier even
  /// without pressure — a test knob that forces spilling at random points. Default 0.
  double spill_injection{0};
  /// SPILLWAY_COMM_TIMEOUT: seconds a rank waits on a peer before it fails with a comm_error
  /// (a dead or stuck peer); default 300.
  std::chrono::milliseconds comm_timeout{300000};
  /// SPILLWAY_MPI_IPC_WINDOW: device memory each rank of the `mpi` communicator sets aside (in
  /// slots) for peers on its node to copy device buffers into over CUDA IPC; 0 turns
  /// CUDA IPC off (device buffers are then staged through pinned host memory). Default 1 GiB.
  std::size_t mpi_ipc_window{std::size_t{1} << 30};
  /// SPILLWAY_MPI_IPC_SLOT: the slot size of that window, the piece in which device buffers
  /// move through it; default 256 MiB (16 MiB pieces reached 0.90x NCCL on 4 GiB messages,
  /// 64 MiB 1.00x; in the 20 GiB shuffle, 4 slots of 256 MiB beat 8 of 64 MiB by ~10%:
  /// bench/NOTES.md).
  std::size_t mpi_ipc_slot{std::size_t{256} << 20};
  /// SPILLWAY_LOG_LEVEL: none | error | warn | info | debug | trace; default warn.
  LogLevel log_level{LogLevel::warn};
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
void set_log_level(LogLevel level);

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
