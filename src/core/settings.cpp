// The settings registry: every SPILLWAY_* setting, declared once (core/detail/settings.hpp).
#include "core/detail/settings.hpp"

#include <spillway/core/cuda.hpp>
#include <spillway/core/topology.hpp>
#include <spillway/core/units.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <thread>

namespace spillway::detail {

namespace {

/// min(16, the CPUs this process may use), only those near the GPU on a multi-node machine.
std::size_t count_io_threads() {
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

/// count_io_threads, counted once (every OptionValues starts from the defaults).
std::size_t default_io_threads() {
  static const std::size_t n = count_io_threads();
  return n;
}

/// A whole number (a count or a time: no unit, no fraction).
std::size_t whole_number(const std::string& text, const char* var) {
  std::size_t n = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, n);
  SPILLWAY_EXPECTS(ec == std::errc() && ptr == end,
                   std::string(var) + " must be a whole number, got '" + text + "'");
  return n;
}

bool zero_or_one(const std::string& text, const char* var) {
  SPILLWAY_EXPECTS(text == "0" || text == "1",
                   std::string(var) + " must be 0 or 1, got '" + text + "'");
  return text == "1";
}

std::string show_string(const std::string& s) {
  return s;
}
std::string show_limit(const Limit& l) {
  return l.to_string();
}
std::string show_bytes(const std::size_t& n) {
  return format_bytes(static_cast<double>(n));
}
std::string show_count(const std::size_t& n) {
  return std::to_string(n);
}
std::string show_bool(const bool& b) {
  return b ? "1" : "0";
}
std::string show_ms(const std::chrono::milliseconds& t) {
  return std::to_string(t.count());
}
std::string show_us(const std::chrono::microseconds& t) {
  return std::to_string(t.count());
}
std::string show_double(const double& x) {
  return std::to_string(x);
}

Limit parse_limit(const std::string& t, const char* var) {
  return Limit::parse(t, var);
}
std::size_t parse_size(const std::string& t, const char* var) {
  return parse_bytes(t, var);
}
std::chrono::milliseconds parse_ms(const std::string& t, const char* var) {
  const std::size_t n = whole_number(t, var);
  SPILLWAY_EXPECTS(n <= 86'400'000, std::string(var) +
                                        " must be a whole number of milliseconds "
                                        "within 0..86400000, got '" +
                                        t + "'");
  return std::chrono::milliseconds(n);
}
template <typename E>
E parse_choice(const std::string& t, const char* var, E (*parse)(const std::string&)) {
  try {
    return parse(t);
  } catch (const logic_error& err) {
    SPILLWAY_FAIL(std::string(var) + ": " + err.what());
  }
}

const char* positive(const std::size_t& n) {
  return n > 0 ? nullptr : "greater than zero";
}

}  // namespace

// The registry: every setting, declared once.
namespace field {
const Field<std::string> spill_dir{
    "SPILLWAY_SPILL_DIR",
    &OptionValues::spill_dir,
    "$TMPDIR, else /tmp",
    "Where spill files go; a private subdirectory is made inside, removed at exit.",
    [](const std::string& t, const char* var) {
      SPILLWAY_EXPECTS(!t.empty(), std::string(var) + ": the spill directory must not be empty");
      return t;
    },
    show_string,
    nullptr,
    [] {
      const char* tmp = std::getenv("TMPDIR");
      return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp");
    }};
Field<Limit> tier_limit(const char* var, Limit OptionValues::*member, const char* doc) {
  return {var, member, "unlimited", doc, parse_limit, show_limit};
}
const Field<Limit> device_limit = tier_limit(
    "SPILLWAY_DEVICE_LIMIT", &OptionValues::device_limit,
    "The DEVICE tier's limit: bytes (`4GiB`), a fraction of capacity (`80%`) or `unlimited`.");
const Field<Limit> pinned_limit = tier_limit("SPILLWAY_PINNED_LIMIT", &OptionValues::pinned_limit,
                                             "The PINNED_HOST tier's limit.");
const Field<Limit> host_limit =
    tier_limit("SPILLWAY_HOST_LIMIT", &OptionValues::host_limit, "The HOST tier's limit.");
const Field<Limit> disk_limit =
    tier_limit("SPILLWAY_DISK_LIMIT", &OptionValues::disk_limit, "The DISK tier's limit.");
const Field<DeviceAllocator> device_allocator{
    "SPILLWAY_DEVICE_ALLOCATOR",
    &OptionValues::device_allocator,
    "async",
    "The device allocator: `cuda` (cudaMalloc), `async` (cudaMallocAsync on the device's pool) "
    "or `pool` (a dedicated pool, reserved up front), as RapidsMPF's `-m`.",
    [](const std::string& t, const char* var) {
      return parse_choice(t, var, parse_device_allocator);
    },
    [](const DeviceAllocator& a) { return std::string(to_string(a)); }};
const Field<Limit> device_pool_size{
    "SPILLWAY_DEVICE_POOL_SIZE",
    &OptionValues::device_pool_size,
    "unlimited",
    "What the `pool` allocator reserves up front; unlimited: the device limit when one is set, "
    "else 50% of the device.",
    parse_limit,
    show_limit};
const Field<bool> pinned_pool{
    "SPILLWAY_PINNED_POOL",
    &OptionValues::pinned_pool,
    "1",
    "1: a pinned-host pool serves PINNED_HOST; 0: no PINNED_HOST tier (RapidsMPF's `-L`).",
    zero_or_one,
    show_bool};
const Field<Limit> pinned_reserve{
    "SPILLWAY_PINNED_RESERVE",
    &OptionValues::pinned_reserve,
    "0",
    "Pinned memory the pool maps up front (at most the PINNED_HOST limit); 0: it grows as it is "
    "used, pinning fresh pages at a few GB/s on the allocating thread.",
    parse_limit,
    show_limit};
const Field<Limit> host_cache{
    "SPILLWAY_HOST_CACHE",
    &OptionValues::host_cache,
    "10%",
    "Freed host blocks kept for reuse; cached plus used bytes stay within the HOST limit.",
    parse_limit,
    show_limit};
const Field<std::size_t> io_threads{
    "SPILLWAY_IO_THREADS",
    &OptionValues::io_threads,
    "min(16, CPUs near the GPU)",
    "Threads of the spill I/O pool and of file reads: by default the CPUs this process may use, "
    "only those of the GPU's NUMA node on a machine of several, at most 16.",
    [](const std::string& t, const char* var) { return whole_number(t, var); },
    show_count,
    [](const std::size_t& n) -> const char* {
      return n >= 1 && n <= 1024 ? nullptr : "a whole number of threads within 1..1024";
    },
    [] { return std::to_string(default_io_threads()); }};
const Field<std::size_t> io_task_size{"SPILLWAY_IO_TASK_SIZE",
                                      &OptionValues::io_task_size,
                                      "4MiB",
                                      "Bytes per parallel file-read task.",
                                      parse_size,
                                      show_bytes,
                                      positive};
const Field<bool> io_direct{"SPILLWAY_IO_DIRECT",
                            &OptionValues::io_direct,
                            "0",
                            "1: file reads use O_DIRECT where the file system allows.",
                            zero_or_one,
                            show_bool};
const Field<bool> io_numa{
    "SPILLWAY_IO_NUMA",
    &OptionValues::io_numa,
    "1",
    "1: on a machine of several NUMA nodes, I/O threads run on the GPU's node and pinned bounce "
    "buffers come from its memory; 0 leaves both to the operating system.",
    zero_or_one,
    show_bool};
const Field<IoGds> io_gds{
    "SPILLWAY_IO_GDS",
    &OptionValues::io_gds,
    "auto",
    "GPUDirect Storage (cuFile) for file reads into and writes from device memory: `off`; "
    "`auto` when libcufile loads and the nvidia-fs driver is there; `on` whenever libcufile "
    "loads, also in its compatibility mode.",
    [](const std::string& t, const char* var) { return parse_choice(t, var, parse_io_gds); },
    [](const IoGds& g) { return std::string(to_string(g)); }};
const Field<std::size_t> spill_task_size{
    "SPILLWAY_SPILL_TASK_SIZE",
    &OptionValues::spill_task_size,
    "8MiB",
    "Bytes per parallel spill read or write, each with its own checksum.",
    parse_size,
    show_bytes,
    positive};
const Field<std::size_t> spill_file_size{"SPILLWAY_SPILL_FILE_SIZE",
                                         &OptionValues::spill_file_size,
                                         "1GiB",
                                         "A spill file takes new blocks until it is this big.",
                                         parse_size,
                                         show_bytes,
                                         positive};
const Field<std::size_t> staging_size{
    "SPILLWAY_STAGING_SIZE",
    &OptionValues::staging_size,
    "0",
    "Staging for one DEVICE<->DISK copy, paid for from PINNED_HOST (else HOST); 0: two halves "
    "of io_threads x spill_task_size. Smaller when the limits leave less.",
    parse_size,
    show_bytes};
const Field<std::chrono::milliseconds> spill_period{
    "SPILLWAY_SPILL_PERIOD_MS",
    &OptionValues::spill_period,
    "0",
    "Period of the background spill thread; 0: off.",
    parse_ms,
    show_ms};
const Field<std::chrono::milliseconds> memory_wait{
    "SPILLWAY_MEMORY_WAIT_MS",
    &OptionValues::memory_wait,
    "1000",
    "How long a reservation that finds its tiers full of memory that cannot spill (transfers in "
    "flight, buffers in use) waits for some to be freed before it fails; every release starts "
    "the wait again; 0 fails at once.",
    parse_ms,
    show_ms};
const Field<std::chrono::microseconds> progress_spin{
    "SPILLWAY_PROGRESS_SPIN_US",
    &OptionValues::progress_spin,
    "2000",
    "How long a progress thread with nothing to do polls before it backs off into sleeps of up "
    "to 1 ms.",
    [](const std::string& t, const char* var) {
      const std::size_t n = whole_number(t, var);
      SPILLWAY_EXPECTS(n <= 86'400'000'000, std::string(var) +
                                                " must be a whole number of microseconds within "
                                                "0..86400000000, got '" +
                                                t + "'");
      return std::chrono::microseconds(n);
    },
    show_us};
const Field<double> spill_injection{
    "SPILLWAY_SPILL_INJECT",
    &OptionValues::spill_injection,
    "0",
    "Probability that an allocation first spills its tier even without pressure (a "
    "SpillInjectionAdaptor): a test knob that forces spilling at random points.",
    [](const std::string& t, const char* var) {
      char* end = nullptr;
      const double p = std::strtod(t.c_str(), &end);
      SPILLWAY_EXPECTS(end != t.c_str() && *end == '\0',
                       std::string(var) + " must be a probability within 0..1, got '" + t + "'");
      return p;
    },
    show_double,
    [](const double& p) -> const char* {
      return p >= 0 && p <= 1 ? nullptr : "a probability within 0..1";
    }};
const Field<std::chrono::milliseconds> comm_timeout{
    "SPILLWAY_COMM_TIMEOUT",
    &OptionValues::comm_timeout,
    "300",
    "Seconds a rank waits on a peer before it fails with a comm_error (a dead or stuck peer).",
    [](const std::string& t, const char* var) {
      char* end = nullptr;
      const double seconds = std::strtod(t.c_str(), &end);
      // At least a millisecond: a shorter timeout would round to 0 ms and fail every wait.
      SPILLWAY_EXPECTS(
          end != t.c_str() && *end == '\0' && seconds >= 0.001 && seconds < 1e9,
          std::string(var) + " must be a number of seconds within 0.001..1e9, got '" + t + "'");
      return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
    },
    [](const std::chrono::milliseconds& t) { return std::to_string(t.count() / 1000.0); },
    [](const std::chrono::milliseconds& t) -> const char* {
      return t.count() > 0 ? nullptr : "a positive time (at least 1 ms)";
    }};
const Field<std::size_t> mpi_ipc_window{
    "SPILLWAY_MPI_IPC_WINDOW",
    &OptionValues::mpi_ipc_window,
    "1GiB",
    "Device memory each rank of the `mpi` communicator sets aside for peers on its node to copy "
    "device buffers into over CUDA IPC, at most a quarter of a device limit (it counts against "
    "it); 0: no CUDA IPC (device buffers are staged through pinned host memory).",
    parse_size,
    show_bytes};
const Field<std::size_t> mpi_ipc_slot{
    "SPILLWAY_MPI_IPC_SLOT",
    &OptionValues::mpi_ipc_slot,
    "256MiB",
    "The slot size of that window, the piece in which device buffers move through it.",
    parse_size,
    show_bytes,
    [](const std::size_t& n) -> const char* {
      return n > 0 && n <= (std::size_t{1} << 30) ? nullptr : "within 1 B..1 GiB";
    }};
const Field<std::size_t> shuffle_direct_piece{
    "SPILLWAY_SHUFFLE_DIRECT_PIECE",
    &OptionValues::shuffle_direct_piece,
    "4MiB",
    "The shuffle's insert_finished sends direct chunks (a message per column, no concatenation "
    "at the owner) when their column pieces average at least this many bytes, else packed "
    "chunks (a message per partition); 0: always direct.",
    parse_size,
    show_bytes};
const Field<std::string> transfer_backend{
    "SPILLWAY_TRANSFER_BACKEND",
    &OptionValues::transfer_backend,
    "auto",
    "The transfer engine backend of the `transfer` communicator: `libfabric`, `loopback` (ranks "
    "of one process only) or `auto` (libfabric where built, else loopback).",
    [](const std::string& t, const char* var) {
      SPILLWAY_EXPECTS(t == "auto" || t == "libfabric" || t == "loopback",
                       std::string(var) + " must be auto, libfabric or loopback, got '" + t + "'");
      return t;
    },
    show_string};
const Field<std::string> transfer_provider{
    "SPILLWAY_TRANSFER_PROVIDER",
    &OptionValues::transfer_provider,
    "tcp",
    "The libfabric provider of the `transfer` communicator: `tcp`, `shm` (processes of one "
    "node), `verbs`, `efa` or `sockets`.",
    [](const std::string& t, const char* var) {
      SPILLWAY_EXPECTS(!t.empty(), std::string(var) + ": the provider must not be empty");
      return t;
    },
    show_string};
const Field<std::string> transfer_address{
    "SPILLWAY_TRANSFER_ADDRESS",
    &OptionValues::transfer_address,
    "127.0.0.1",
    "The address the `transfer` communicator's engines bind to (their control channel and "
    "libfabric's tcp endpoint): set it to this host's address when ranks run on several hosts "
    "or network namespaces.",
    [](const std::string& t, const char* var) {
      SPILLWAY_EXPECTS(!t.empty(), std::string(var) + ": the address must not be empty");
      return t;
    },
    show_string};
const Field<std::size_t> transfer_ipc_window{
    "SPILLWAY_TRANSFER_IPC_WINDOW",
    &OptionValues::transfer_ipc_window,
    "4GiB",
    "Device memory each rank of the `transfer` communicator sets aside for peers on its node to "
    "write device buffers into over CUDA IPC (the engine's cuda_ipc backend), at most a quarter "
    "of a device limit (it counts against it); a receive that finds too little of it free, or "
    "0, is staged through pinned host memory (far slower: room for all receives in flight "
    "matters).",
    parse_size,
    show_bytes};
const Field<LogLevel> log_level{
    "SPILLWAY_LOG_LEVEL",
    &OptionValues::log_level,
    "warn",
    "`none`, `error`, `warn`, `info`, `debug` or `trace`.",
    [](const std::string& t, const char* var) { return parse_choice(t, var, parse_log_level); },
    [](const LogLevel& l) { return std::string(to_string(l)); }};

}  // namespace field

const std::vector<Setting>& registry() {
  static const std::vector<Setting> all{
      erase(field::spill_dir),        erase(field::device_limit),
      erase(field::pinned_limit),     erase(field::host_limit),
      erase(field::disk_limit),       erase(field::device_allocator),
      erase(field::device_pool_size), erase(field::pinned_pool),
      erase(field::pinned_reserve),   erase(field::host_cache),
      erase(field::io_threads),       erase(field::io_task_size),
      erase(field::io_direct),        erase(field::io_numa),
      erase(field::io_gds),           erase(field::spill_task_size),
      erase(field::spill_file_size),  erase(field::staging_size),
      erase(field::spill_period),     erase(field::memory_wait),
      erase(field::progress_spin),    erase(field::spill_injection),
      erase(field::comm_timeout),     erase(field::mpi_ipc_window),
      erase(field::mpi_ipc_slot),     erase(field::shuffle_direct_piece),
      erase(field::transfer_backend), erase(field::transfer_provider),
      erase(field::transfer_address), erase(field::transfer_ipc_window),
      erase(field::log_level)};
  return all;
}

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

OptionValues from_environment() {
  OptionValues v;
  for (const Setting& s : registry()) {
    if (auto e = env(s.var)) s.load(v, *e);
  }
  return v;
}

}  // namespace spillway::detail

namespace spillway {

OptionValues::OptionValues() {
  for (const detail::Setting& s : detail::registry()) s.reset(*this);
}

}  // namespace spillway
