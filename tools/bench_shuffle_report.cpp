#include "bench_shuffle_report.hpp"

#include <spillway/core/error.hpp>

#include "cli.hpp"
#include "pcie.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <iostream>

namespace spillway::bench {

void Report::setup() const {
  std::cout << "spillway-bench-shuffle: -C " << o.comm << " | nranks " << comm.nranks() << " | "
            << (gpu ? "GPU" : "CPU") << " path | -c " << o.columns << " -n " << o.rows << " -p "
            << o.in_parts << " -o " << o.out_parts << (o.pre_partitioned ? " -g" : "")
            << (o.discard ? " -s" : "") << (o.overlap ? " --overlap" : "")
            << (direct ? " | direct chunks" : " | packed chunks") << "\n"
            << "Local size: " << format_bytes(input_bytes)
            << " | Total size: " << format_bytes(input_bytes * comm.nranks()) << "\n"
            << "Memory: " << br.usage() << "\n"
            << "Device headroom for incoming chunks: "
            << format_bytes(double(br.headroom(MemoryType::DEVICE))) << "\n"
            << "Allocators: " << br.describe() << "\n";
  if (o.no_overbooking) {
    std::cout << "-b: spillway's limits are hard and reservations never overbook\n";
  }
  if (!gpu && o.device_limit_mib >= 0) {
    std::cout << "-l: the CPU path has no device tier, so -l limits nothing here "
                 "(--host-limit limits host memory)\n";
  }
  if (!gpu && o.allocator) {
    std::cout << "-m: the CPU path has no device tier, so the device allocator is not used\n";
  }
}

void Report::pcie_ceilings() const {
  std::cout << "PCIe ceiling (pinned <-> device, 1 GiB, medians of 5, this run): rank 0's GPU "
            << "alone H2D " << fixed(pcie[0], 1) << " | D2H " << fixed(pcie[1], 1) << " GB/s; all "
            << comm.nranks() << " ranks' GPUs at once (rank 0's) H2D " << fixed(pcie[2], 1)
            << " | D2H " << fixed(pcie[3], 1) << " GB/s; both ways at once on all GPUs H2D "
            << fixed(pcie[4], 1) << " | D2H " << fixed(pcie[5], 1) << " GB/s\n";
}

void Report::run(const std::vector<RunResult>& all, bool warmup, const std::string& problem) const {
  double slowest = 0;
  for (const auto& r : all) slowest = std::max(slowest, r.seconds);
  const double mine = all[0].seconds;
  std::cout << "elapsed: " << fixed(mine, 4)
            << " sec | local throughput: " << rate(input_bytes, mine)
            << " | global throughput: " << rate(input_bytes * double(all.size()), slowest)
            << (warmup ? " (warmup run)" : "") << " | excluded " << fixed(all[0].excluded, 3)
            << " s | " << (problem.empty() ? "validated" : "INVALID: " + problem) << "\n";
}

void Report::summary(const std::vector<std::vector<RunResult>>& runs) const {
  std::vector<double> mine, slowest;
  std::uint64_t peak = 0;
  std::uint64_t peak_host = 0;
  for (const auto& all : runs) {
    double s = 0;
    for (const auto& r : all) {
      s = std::max(s, r.seconds);
      peak = std::max(peak, r.peak_device);
      peak_host = std::max(peak_host, r.peak_host);
    }
    mine.push_back(all[0].seconds);
    slowest.push_back(s);
  }
  auto harmonic_mean = [](const std::vector<double>& v) {
    double inv = 0;
    for (double s : v) inv += 1 / s;
    return double(v.size()) / inv;
  };
  const double n = double(comm.nranks());
  std::cout << "means: " << fixed(harmonic_mean(mine), 4)
            << " sec | local throughput: " << rate(input_bytes, harmonic_mean(mine))
            << " | global throughput: " << rate(input_bytes * n, harmonic_mean(slowest))
            << " | in_parts: " << o.in_parts << " | out_parts: " << o.out_parts
            << " | nranks: " << comm.nranks();
  if (gpu) {
    std::cout << " | device memory peak: " << format_bytes(double(peak)) << " ("
              << fixed(double(peak) / input_bytes, 2) << " x input; limit "
              << (br.limit(MemoryType::DEVICE) == unlimited_bytes
                      ? std::string("none")
                      : format_bytes(double(br.limit(MemoryType::DEVICE))))
              << ")";
  }
  rusage self{};
  getrusage(RUSAGE_SELF, &self);  // ru_maxrss: KiB (local ranks share the process)
  std::cout << " | host memory peak: " << format_bytes(double(peak_host))
            << " | process max RSS: " << format_bytes(double(self.ru_maxrss) * 1024.0) << "\n";
  std::cout << "medians: elapsed " << fixed(cli::median(mine), 4)
            << " sec | local throughput: " << rate(input_bytes, cli::median(mine))
            << " | global throughput: " << rate(input_bytes * n, cli::median(slowest)) << "\n";
  if (gpu && br.limit(MemoryType::DEVICE) != unlimited_bytes) pcie_floor(runs, cli::median(mine));
  if (!baseline.empty()) {
    const double base = cli::median(baseline);
    std::cout << "MPI_Alltoallv of the same bytes (own block included), after each run: median "
              << fixed(base, 4) << " sec | global throughput: " << rate(input_bytes * n, base)
              << "\nratio shuffle / MPI_Alltoallv (global throughput, medians): "
              << fixed(base / cli::median(slowest), 3) << "\n";
  }
}

void Report::pcie_floor(const std::vector<std::vector<RunResult>>& runs, double median) const {
  // Every rank's share over its limit, down and back up once, the two directions at once: the
  // busiest link carries the sum of its ranks' shares each way at its both-ways rate.
  const std::size_t n = runs.front().size();
  const double over =
      std::max(0.0, input_bytes - static_cast<double>(br.limit(MemoryType::DEVICE)));
  std::vector<double> bytes(n, over);
  std::vector<double> links(n);
  for (std::size_t r = 0; r < n; ++r) links[r] = runs.front()[r].link;
  const double floor = tools::pcie_floor_seconds(bytes, links, pcie[4]);
  std::vector<double> down, up;
  for (const auto& all : runs) {
    double d = 0, u = 0;
    for (const auto& r : all) {
      d += r.down_bytes;
      u += r.up_bytes;
    }
    down.push_back(d / double(n));
    up.push_back(u / double(n));
  }
  std::cout << "PCIe floor: " << fixed(floor, 4) << " sec (what exceeds each rank's device limit, "
            << format_bytes(over) << ", down and back up once, the ranks of a GPU on its one link"
            << " at " << fixed(pcie[4], 1) << " GB/s, its H2D rate with copies both ways at once)"
            << " | the median reaches " << fixed(median > 0 ? floor / median : 0, 3)
            << " of it | copies a rank, median run: " << format_bytes(cli::median(down))
            << " down, " << format_bytes(cli::median(up)) << " up (the statistics' copies; "
            << "kernels that read or write pinned memory are not counted)\n";
}

void Report::json(const std::vector<std::vector<RunResult>>& runs,
                  const std::vector<std::vector<std::uint8_t>>& stats,
                  const std::vector<std::vector<std::uint8_t>>& per_run, int failed) const {
  std::ofstream f(o.json);
  if (!f) throw io_error("cannot write --json file '" + o.json + "'");
  auto gbps = [&](std::size_t i) { return gpu ? std::to_string(pcie[i]) : "null"; };
  auto limit = [&](MemoryType t) {
    return br.is_live(t) && br.limit(t) != unlimited_bytes ? std::to_string(br.limit(t))
                                                           : std::string("null");
  };
  f << "{\"comm\":\"" << o.comm << "\",\"nranks\":" << comm.nranks()
    << ",\"gpu\":" << (gpu ? "true" : "false") << ",\"columns\":" << o.columns
    << ",\"rows_per_rank\":" << o.rows << ",\"in_parts\":" << o.in_parts
    << ",\"out_parts\":" << o.out_parts << ",\"pre_partitioned\":" << o.pre_partitioned
    << ",\"discard\":" << o.discard << ",\"direct\":" << direct
    << ",\"input_bytes_per_rank\":" << input_bytes
    << ",\"device_limit\":" << limit(MemoryType::DEVICE)
    << ",\"host_limit\":" << limit(MemoryType::HOST) << ",\"failed_runs\":" << failed
    << ",\"pcie_h2d_gbps\":" << gbps(0) << ",\"pcie_d2h_gbps\":" << gbps(1)
    << ",\"pcie_h2d_all_gbps\":" << gbps(2) << ",\"pcie_d2h_all_gbps\":" << gbps(3)
    << ",\"pcie_h2d_duplex_gbps\":" << gbps(4) << ",\"pcie_d2h_duplex_gbps\":" << gbps(5)
    << ",\"alltoallv_seconds\":[";
  for (std::size_t i = 0; i < baseline.size(); ++i) f << (i ? "," : "") << baseline[i];
  f << "],\"runs\":[";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    f << (i ? "," : "") << "[";
    for (std::size_t r = 0; r < runs[i].size(); ++r) {
      const RunResult& x = runs[i][r];
      f << (r ? "," : "") << "{\"seconds\":" << x.seconds << ",\"excluded\":" << x.excluded
        << ",\"peak_device\":" << x.peak_device << ",\"peak_host\":" << x.peak_host << "}";
    }
    f << "]";
  }
  // [rank]: the last run's statistics and memory profile; [rank][run]: each timed run's.
  for (const auto& [key, all] : {std::pair{"statistics", &stats}, {"run_statistics", &per_run}}) {
    f << "],\"" << key << "\":[";
    for (std::size_t r = 0; r < all->size(); ++r) {
      f << (r ? "," : "") << std::string((*all)[r].begin(), (*all)[r].end());
    }
  }
  f << "]}\n";
}

}  // namespace spillway::bench
