#pragma once
// spillway-bench-shuffle's flags (RapidsMPF's bench_shuffle's, plus spillway's own), their
// parsing (a bad flag is a usage message and exit code 2, before any run) and the memory
// configuration of a rank they give.

#include <spillway/memory/buffer_resource.hpp>

#include <optional>
#include <string>

namespace spillway::bench {

struct Options {
  std::string comm{"local"};
  int ranks{2};
  std::size_t columns{1};
  std::size_t rows{std::size_t{1} << 20};  // per rank
  std::size_t in_parts{1};
  std::size_t out_parts{1};
  int runs{1};
  int warmups{0};
  std::optional<DeviceAllocator> allocator;  // none: SPILLWAY_DEVICE_ALLOCATOR's choice
  long long device_limit_mib{-1};
  bool no_pinned{false};
  bool pre_partitioned{false};
  bool discard{false};
  bool no_overbooking{false};
  bool profile{false};
  long long host_limit_mib{-1};
  long long pinned_reserve_mib{-1};
  std::string spill_dir;
  long long disk_limit_mib{-1};
  bool cpu{false};
  bool overlap{false};
  bool no_direct{false};
  bool pack_first{false};
  bool timeline{false};
  bool no_baseline{false};
  std::string json;
};

/// The options of the command line. Exits with the usage (code 2) for a bad flag.
Options parse(int argc, char** argv);

/// The BufferResource configuration of one rank: the options' limits and allocator over the
/// SPILLWAY_* settings; ranks that share a GPU split its pool.
BufferResourceConfig rank_config(const Options& o);

}  // namespace spillway::bench
