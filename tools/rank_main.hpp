#pragma once
// What the operator benchmarks (spillway-bench-join, spillway-bench-groupby) share around
// their ranks: the memory config from the settings and the limit flags, the main that runs a
// rank function on each rank, and the peak of each tier beside its limit.

#include <spillway/comm/launch.hpp>
#include <spillway/comm/mpi.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include <exception>
#include <iostream>
#include <mutex>
#include <string>

namespace spillway::tools {

/// The settings' config with the tools' limit flags (MiB; negative: not given) applied.
inline BufferResourceConfig config_with_limits(bool gpu, long long host_limit_mib,
                                               long long device_limit_mib) {
  auto cfg = BufferResourceConfig::from_options();
  cfg.use_gpu = gpu;
  if (host_limit_mib > 0) {
    cfg.limits[index(MemoryType::HOST)] =
        Limit::bytes(static_cast<std::size_t>(host_limit_mib) * MiB);
  }
  if (device_limit_mib > 0) {
    cfg.limits[index(MemoryType::DEVICE)] =
        Limit::bytes(static_cast<std::size_t>(device_limit_mib) * MiB);
  }
  return cfg;
}

/// Runs `rank(comm, br, print)` on each rank of `comm_kind` ("local", "mpi", ...), each with a
/// BufferResource of `cfg` (on its GPU with `gpu`); `print` serialises the ranks' output. An
/// error is one line naming `program`. Returns the exit code: 2 for MPI in a build without it.
template <typename RankFn>
int rank_main(const char* program, const std::string& comm_kind, int ranks, bool gpu,
              const BufferResourceConfig& cfg, RankFn&& rank) {
  try {
    if (comm_kind == "mpi" && !mpi::is_compiled()) {
      std::cerr << program << ": built without MPI\n";
      return 2;
    }
    std::mutex print;
    LaunchOptions launch;
    launch.place_on_gpu = gpu;
    launch.program = program;
    return run_ranks(
        parse_rank_kind(comm_kind), ranks, cfg,
        [&](Communicator& comm, BufferResource& br) { return rank(comm, br, print); }, launch);
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << "\n";
    return 1;
  }
}

/// " DEVICE <peak>/<limit> PINNED_HOST ..." for every live tier.
inline std::string peaks_beside_limits(const BufferResource& br) {
  std::string out;
  for (MemoryType t : all_memory_types) {
    if (!br.is_live(t)) continue;
    out += " " + std::string(to_string(t)) + " " + format_bytes(double(br.peak(t))) + "/" +
           (br.limit(t) == unlimited_bytes ? std::string("unlimited")
                                           : format_bytes(double(br.limit(t))));
  }
  return out;
}

}  // namespace spillway::tools
