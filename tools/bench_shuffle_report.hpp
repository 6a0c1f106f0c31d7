#pragma once
// What spillway-bench-shuffle prints: its setup, each run's line, the summary (means, medians,
// peaks, the MPI_Alltoallv peer and the ratio), and the --json file.

#include <spillway/comm/communicator.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include "bench_shuffle_options.hpp"
#include "bench_shuffle_result.hpp"

#include <array>
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

namespace spillway::bench {

inline std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

inline std::string rate(double bytes, double seconds) {
  return format_bytes(seconds > 0 ? bytes / seconds : 0) + "/s";
}

/// The figures of one benchmark: what it was run with and what it measured.
struct Report {
  const Options& o;
  const Communicator& comm;
  const BufferResource& br;
  bool gpu;
  bool direct;                          // direct chunks (else packed)
  double input_bytes;                   // per rank
  const std::vector<double>& baseline;  // MPI_Alltoallv's seconds per timed run
  const std::array<double, 6>& pcie;    // GB/s, see tools::pcie_ceilings_of_ranks

  void setup() const;
  void pcie_ceilings() const;
  void run(const std::vector<RunResult>& all, bool warmup, const std::string& problem) const;
  void summary(const std::vector<std::vector<RunResult>>& runs) const;
  /// Under a device limit: the PCIe floor (the bytes that must cross, at the link's rate), the
  /// fraction of it the median reaches, and what the statistics' copies moved.
  void pcie_floor(const std::vector<std::vector<RunResult>>& runs, double median) const;
  /// Writes o.json. @throws spillway::io_error when it cannot
  void json(const std::vector<std::vector<RunResult>>& runs,
            const std::vector<std::vector<std::uint8_t>>& stats,
            const std::vector<std::vector<std::uint8_t>>& per_run, int failed) const;
};

}  // namespace spillway::bench
