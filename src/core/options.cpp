#include <spillway/core/options.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/topology.hpp>
#include <spillway/core/units.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace spillway {

DeviceAllocator parse_device_allocator(const std::string& text) {
  if (text == "cuda") return DeviceAllocator::cuda;
  if (text == "async") return DeviceAllocator::async;
  if (text == "pool") return DeviceAllocator::pool;
  SPILLWAY_FAIL("unknown device allocator '" + text + "' (expected cuda, async or pool)");
}

const char* to_string(DeviceAllocator a) noexcept {
  switch (a) {
    case DeviceAllocator::cuda:
      return "cuda";
    case DeviceAllocator::pool:
      return "pool";
    case DeviceAllocator::async:
      break;
  }
  return "async";
}

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

/// min(16, the CPUs this process may use), only those near the GPU on a multi-node machine.
std::size_t default_io_threads() {
  const std::vector<int> allowed = topology::allowed_cpus();
  std::size_t cpus = allowed.size();
  const auto nodes = topology::numa_nodes();
  if (nodes.size() >= 2) {  // only then is CUDA asked where the GPU is
    try {
      if (cuda::is_available()) {
        const auto at = topology::gpu_placement(cuda::current_device());
        const std::size_t near = topology::near_cpus(at, nodes, allowed).size();
        if (near > 0) cpus = near;
      }
    } catch (const std::exception&) {
      // no placement: all allowed CPUs
    }
  }
  if (cpus == 0) cpus = std::thread::hardware_concurrency();
  return std::clamp<std::size_t>(cpus, 1, 16);
}

OptionValues defaults() {
  OptionValues v;
  const char* tmp = std::getenv("TMPDIR");
  v.spill_dir = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
  v.io_threads = default_io_threads();
  v.io_task_size = 4 * MiB;
  v.spill_task_size = 8 * MiB;
  v.spill_file_size = GiB;
  v.staging_size = 0;  // auto
  return v;
}

/// A whole number within lo..hi (a count or milliseconds: no unit, no fraction).
std::size_t whole_number(const std::string& text, const char* var, const char* what, std::size_t lo,
                         std::size_t hi) {
  std::size_t n = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, n);
  SPILLWAY_EXPECTS(ec == std::errc() && ptr == end && n >= lo && n <= hi,
                   std::string(var) + " must be a whole number of " + what + " within " +
                       std::to_string(lo) + ".." + std::to_string(hi) + ", got '" + text + "'");
  return n;
}

std::size_t positive_bytes(const std::string& text, const char* var) {
  const std::size_t n = parse_bytes(text, var);
  SPILLWAY_EXPECTS(n > 0, std::string(var) + " must be greater than zero");
  return n;
}

OptionValues from_environment() {
  OptionValues v = defaults();
  if (auto e = env("SPILLWAY_SPILL_DIR")) v.spill_dir = *e;
  if (auto e = env("SPILLWAY_DEVICE_LIMIT"))
    v.device_limit = Limit::parse(*e, "SPILLWAY_DEVICE_LIMIT");
  if (auto e = env("SPILLWAY_PINNED_LIMIT"))
    v.pinned_limit = Limit::parse(*e, "SPILLWAY_PINNED_LIMIT");
  if (auto e = env("SPILLWAY_HOST_LIMIT")) v.host_limit = Limit::parse(*e, "SPILLWAY_HOST_LIMIT");
  if (auto e = env("SPILLWAY_DISK_LIMIT")) v.disk_limit = Limit::parse(*e, "SPILLWAY_DISK_LIMIT");
  if (auto e = env("SPILLWAY_DEVICE_ALLOCATOR")) {
    try {
      v.device_allocator = parse_device_allocator(*e);
    } catch (const logic_error& err) {
      SPILLWAY_FAIL(std::string("SPILLWAY_DEVICE_ALLOCATOR: ") + err.what());
    }
  }
  if (auto e = env("SPILLWAY_DEVICE_POOL_SIZE")) {
    v.device_pool_size = Limit::parse(*e, "SPILLWAY_DEVICE_POOL_SIZE");
  }
  if (auto e = env("SPILLWAY_PINNED_POOL")) {
    SPILLWAY_EXPECTS(*e == "0" || *e == "1",
                     "SPILLWAY_PINNED_POOL must be 0 or 1, got '" + *e + "'");
    v.pinned_pool = (*e == "1");
  }
  if (auto e = env("SPILLWAY_PINNED_RESERVE")) {
    v.pinned_reserve = Limit::parse(*e, "SPILLWAY_PINNED_RESERVE");
  }
  if (auto e = env("SPILLWAY_HOST_CACHE")) v.host_cache = Limit::parse(*e, "SPILLWAY_HOST_CACHE");
  if (auto e = env("SPILLWAY_IO_THREADS")) {
    v.io_threads = whole_number(*e, "SPILLWAY_IO_THREADS", "threads", 1, 1024);
  }
  if (auto e = env("SPILLWAY_IO_TASK_SIZE")) {
    v.io_task_size = positive_bytes(*e, "SPILLWAY_IO_TASK_SIZE");
  }
  if (auto e = env("SPILLWAY_IO_DIRECT")) {
    SPILLWAY_EXPECTS(*e == "0" || *e == "1", "SPILLWAY_IO_DIRECT must be 0 or 1, got '" + *e + "'");
    v.io_direct = (*e == "1");
  }
  if (auto e = env("SPILLWAY_IO_NUMA")) {
    SPILLWAY_EXPECTS(*e == "0" || *e == "1", "SPILLWAY_IO_NUMA must be 0 or 1, got '" + *e + "'");
    v.io_numa = (*e == "1");
  }
  if (auto e = env("SPILLWAY_IO_GDS")) {
    SPILLWAY_EXPECTS(*e == "off" || *e == "auto" || *e == "on",
                     "SPILLWAY_IO_GDS must be off, auto or on, got '" + *e + "'");
    v.io_gds = *e == "off" ? IoGds::off : *e == "on" ? IoGds::on : IoGds::automatic;
  }
  if (auto e = env("SPILLWAY_SPILL_TASK_SIZE")) {
    v.spill_task_size = positive_bytes(*e, "SPILLWAY_SPILL_TASK_SIZE");
  }
  if (auto e = env("SPILLWAY_SPILL_FILE_SIZE")) {
    v.spill_file_size = positive_bytes(*e, "SPILLWAY_SPILL_FILE_SIZE");
  }
  if (auto e = env("SPILLWAY_STAGING_SIZE")) {
    v.staging_size = parse_bytes(*e, "SPILLWAY_STAGING_SIZE");
  }
  if (auto e = env("SPILLWAY_SPILL_PERIOD_MS")) {
    v.spill_period = std::chrono::milliseconds(
        whole_number(*e, "SPILLWAY_SPILL_PERIOD_MS", "milliseconds", 0, 86'400'000));
  }
  if (auto e = env("SPILLWAY_MEMORY_WAIT_MS")) {
    v.memory_wait = std::chrono::milliseconds(
        whole_number(*e, "SPILLWAY_MEMORY_WAIT_MS", "milliseconds", 0, 86'400'000));
  }
  if (auto e = env("SPILLWAY_PROGRESS_SPIN_US")) {
    v.progress_spin = std::chrono::microseconds(
        whole_number(*e, "SPILLWAY_PROGRESS_SPIN_US", "microseconds", 0, 86'400'000'000));
  }
  if (auto e = env("SPILLWAY_SPILL_INJECT")) {
    char* end = nullptr;
    v.spill_injection = std::strtod(e->c_str(), &end);
    SPILLWAY_EXPECTS(
        end != e->c_str() && *end == '\0' && v.spill_injection >= 0 && v.spill_injection <= 1,
        "SPILLWAY_SPILL_INJECT must be a probability within 0..1, got '" + *e + "'");
  }
  if (auto e = env("SPILLWAY_COMM_TIMEOUT")) {
    char* end = nullptr;
    const double seconds = std::strtod(e->c_str(), &end);
    // At least a millisecond: a shorter timeout would round to 0 ms and fail every wait.
    SPILLWAY_EXPECTS(
        end != e->c_str() && *end == '\0' && seconds >= 0.001 && seconds < 1e9,
        "SPILLWAY_COMM_TIMEOUT must be a number of seconds within 0.001..1e9, got '" + *e + "'");
    v.comm_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
  }
  if (auto e = env("SPILLWAY_MPI_IPC_WINDOW")) {
    v.mpi_ipc_window = parse_bytes(*e, "SPILLWAY_MPI_IPC_WINDOW");
  }
  if (auto e = env("SPILLWAY_MPI_IPC_SLOT")) {
    v.mpi_ipc_slot = positive_bytes(*e, "SPILLWAY_MPI_IPC_SLOT");
    SPILLWAY_EXPECTS(v.mpi_ipc_slot <= (std::size_t{1} << 30),
                     "SPILLWAY_MPI_IPC_SLOT must be at most 1 GiB, got '" + *e + "'");
  }
  if (auto e = env("SPILLWAY_LOG_LEVEL")) {
    try {
      v.log_level = parse_log_level(*e);
    } catch (const logic_error& err) {
      SPILLWAY_FAIL(std::string("SPILLWAY_LOG_LEVEL: ") + err.what());
    }
  }
  return v;
}

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

}  // namespace

namespace options {

OptionValues get() {
  OptionValues out;
  update([&](OptionValues& v) { out = v; });
  return out;
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
  SPILLWAY_EXPECTS(!dir.empty(), "the spill directory must not be empty");
  update([&](OptionValues& v) { v.spill_dir = std::move(dir); });
}
void set_device_limit(Limit l) {
  update([&](OptionValues& v) { v.device_limit = l; });
}
void set_pinned_limit(Limit l) {
  update([&](OptionValues& v) { v.pinned_limit = l; });
}
void set_host_limit(Limit l) {
  update([&](OptionValues& v) { v.host_limit = l; });
}
void set_disk_limit(Limit l) {
  update([&](OptionValues& v) { v.disk_limit = l; });
}
void set_device_allocator(DeviceAllocator a) {
  update([&](OptionValues& v) { v.device_allocator = a; });
}
void set_device_pool_size(Limit l) {
  update([&](OptionValues& v) { v.device_pool_size = l; });
}
void set_pinned_pool(bool enabled) {
  update([&](OptionValues& v) { v.pinned_pool = enabled; });
}
void set_pinned_reserve(Limit l) {
  update([&](OptionValues& v) { v.pinned_reserve = l; });
}
void set_host_cache(Limit l) {
  update([&](OptionValues& v) { v.host_cache = l; });
}
void set_io_threads(std::size_t n) {
  SPILLWAY_EXPECTS(n >= 1 && n <= 1024, "io threads must be within 1..1024");
  update([&](OptionValues& v) { v.io_threads = n; });
}
void set_io_task_size(std::size_t bytes) {
  SPILLWAY_EXPECTS(bytes > 0, "the io task size must be positive");
  update([&](OptionValues& v) { v.io_task_size = bytes; });
}
void set_io_direct(bool enabled) {
  update([&](OptionValues& v) { v.io_direct = enabled; });
}
void set_io_numa(bool enabled) {
  update([&](OptionValues& v) { v.io_numa = enabled; });
}
void set_io_gds(IoGds mode) {
  update([&](OptionValues& v) { v.io_gds = mode; });
}
void set_spill_task_size(std::size_t bytes) {
  SPILLWAY_EXPECTS(bytes > 0, "the spill task size must be greater than zero");
  update([&](OptionValues& v) { v.spill_task_size = bytes; });
}
void set_spill_file_size(std::size_t bytes) {
  SPILLWAY_EXPECTS(bytes > 0, "the spill file size must be greater than zero");
  update([&](OptionValues& v) { v.spill_file_size = bytes; });
}
void set_staging_size(std::size_t bytes) {
  update([&](OptionValues& v) { v.staging_size = bytes; });
}
void set_spill_period(std::chrono::milliseconds period) {
  SPILLWAY_EXPECTS(period.count() >= 0, "the spill period must not be negative");
  update([&](OptionValues& v) { v.spill_period = period; });
}
void set_comm_timeout(std::chrono::milliseconds timeout) {
  SPILLWAY_EXPECTS(timeout.count() > 0, "the communication timeout must be positive");
  update([&](OptionValues& v) { v.comm_timeout = timeout; });
}
void set_mpi_ipc_window(std::size_t bytes) {
  update([&](OptionValues& v) { v.mpi_ipc_window = bytes; });
}
void set_mpi_ipc_slot(std::size_t bytes) {
  SPILLWAY_EXPECTS(bytes > 0 && bytes <= (std::size_t{1} << 30),
                   "the CUDA IPC slot size must be within 1 B..1 GiB");
  update([&](OptionValues& v) { v.mpi_ipc_slot = bytes; });
}

void set_spill_injection(double probability) {
  SPILLWAY_EXPECTS(probability >= 0 && probability <= 1,
                   "the spill injection probability must be within 0..1");
  update([&](OptionValues& v) { v.spill_injection = probability; });
}
void set_log_level(LogLevel level) {
  update([&](OptionValues& v) { v.log_level = level; });
}

}  // namespace options
}  // namespace spillway
