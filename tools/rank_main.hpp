#pragma once
// What the operator benchmarks (spillway-bench-join, spillway-bench-groupby) share around
// their ranks: the flags of where they run, their limits, staging and runs; the memory config
// from them; the main that runs a rank function on each rank; each tier's peak beside its
// limit.

#include <spillway/comm/launch.hpp>
#include <spillway/comm/mpi.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include "cli.hpp"
#include "staged_input.hpp"

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

/// The flags every operator benchmark takes (its usage text lists them).
struct OperatorFlags {
  std::string comm{"local"};
  int ranks{2};
  bool gpu{false};
  long long host_limit_mib{-1};
  long long device_limit_mib{-1};
  long long piece_mib{-1};  // --piece; -1: not given
  std::size_t piece{0};     // bytes of a staged piece (piece_bytes); 0: the input whole
  bool pageable{false};
  int runs{3};
  int warmups{1};

  /// Takes argv[i] (and its value, moving i on) when it is one of these flags.
  template <typename Usage>
  bool take(int argc, char** argv, int& i, Usage usage) {
    const std::string a = argv[i];
    auto number = [&](long long min, long long max) {
      return cli::number(argc, argv, i, min, max, usage);
    };
    if (a == "-C") {
      comm = cli::rank_kind(argc, argv, i, usage);
    } else if (a == "--ranks") {
      ranks = static_cast<int>(number(1, 1024));
    } else if (a == "--gpu") {
      gpu = true;
    } else if (a == "--host-limit") {
      host_limit_mib = number(1, 1LL << 30);
    } else if (a == "--device-limit") {
      device_limit_mib = number(1, 1LL << 30);
    } else if (a == "--piece") {
      piece_mib = number(1, 1LL << 30);
    } else if (a == "--pageable") {
      pageable = true;
    } else if (a == "-r") {
      runs = static_cast<int>(number(1, 1000));
    } else if (a == "-w") {
      warmups = static_cast<int>(number(0, 1000));
    } else {
      return false;
    }
    return true;
  }

  /// Checks the flags together and works out `piece`.
  template <typename Usage>
  void finish(Usage usage) {
    if (device_limit_mib > 0 && !gpu) usage("--device-limit needs --gpu");
    piece = piece_bytes(piece_mib, host_limit_mib, device_limit_mib);
    if (pageable && piece == 0) usage("--pageable stages pieces: give --piece or a limit");
  }

  /// The settings' memory config with these limits.
  [[nodiscard]] BufferResourceConfig config() const {
    return config_with_limits(gpu, host_limit_mib, device_limit_mib);
  }
};

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
