#include "bench_shuffle_options.hpp"

#include <spillway/comm/bootstrap.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/units.hpp>

#include "cli.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>

namespace spillway::bench {

namespace {

[[noreturn]] void usage(const std::string& error) {
  cli::print_usage(
      "spillway-bench-shuffle", error,
      "usage: spillway-bench-shuffle [options]\n"
      "  -C local|mpi|single  communicator (default local; mpi: run under mpirun or srun)\n"
      "  --ranks N       ranks of -C local (default 2)\n"
      "  -c N            int32 columns (default 1)\n"
      "  -n N            rows per rank (default 1048576)\n"
      "  -p N            input partitions (tables) per rank (default 1)\n"
      "  -o N            output partitions per rank (default 1)\n"
      "  -r N            timed runs (default 1)\n"
      "  -w N            warm-up runs (default 0)\n"
      "  -m cuda|async|pool  device allocator (default: SPILLWAY_DEVICE_ALLOCATOR, async)\n"
      "  -l MiB          device memory limit (hard: peak device memory stays below it); the CPU\n"
      "                  path has no device tier and says so (use --host-limit there)\n"
      "  -L              no pinned host memory tier\n"
      "  -g              pre-partitioned input: split at even row bounds, no hashing\n"
      "  -s              discard each output partition once checked (streaming)\n"
      "  -b              no overbooking (spillway never overbooks: accepted, changes nothing)\n"
      "  -x              print the memory profile\n"
      "  --host-limit MiB   host memory limit\n"
      "  --pinned-reserve MiB  pinned host memory mapped up front (default\n"
      "                  SPILLWAY_PINNED_RESERVE, else 0: it grows as data lands)\n"
      "  --spill-dir DIR    where spill files go (default SPILLWAY_SPILL_DIR or /tmp)\n"
      "  --disk-limit MiB   disk tier limit\n"
      "  --cpu           the CPU path (host memory) even where a GPU exists\n"
      "  --overlap       with -g: pack and send the other ranks' partitions first, one by one,\n"
      "                  overlapping their transfer with packing the rest (more memory)\n"
      "  --no-direct     with -p 1: insert the packed chunks, then insert_finished(), rather\n"
      "                  than direct chunks (Shuffler::insert_finished with the data)\n"
      "  --pack-first    hashed, with -p 1: pack every partition before any is sent, rather\n"
      "                  than hand the table to the Shuffler to partition column by column\n"
      "  --timeline      print when each step of the last run ended, per rank\n"
      "  --no-baseline   skip the MPI_Alltoallv of the same bytes after each run (-C mpi, CPU,\n"
      "                  no host limit)\n"
      "  --json FILE     all figures, statistics and the profile as JSON (rank 0 writes)\n"
      "  -h              this help\n");
}

}  // namespace

Options parse(int argc, char** argv) {
  Options o;
  auto value = [&](int& i) { return cli::value(argc, argv, i, usage); };
  auto number = [&](int& i, long long min, long long max = 1LL << 50) {
    return cli::number(argc, argv, i, min, max, usage);
  };
  // MiB values: at most what a byte count holds (2^44 MiB would wrap to 0 bytes).
  constexpr long long max_mib = (1LL << 44) - 1;
  bool ranks_given = false;
  const std::map<std::string, bool Options::*> switches{{"-L", &Options::no_pinned},
                                                        {"-g", &Options::pre_partitioned},
                                                        {"-s", &Options::discard},
                                                        {"-b", &Options::no_overbooking},
                                                        {"-x", &Options::profile},
                                                        {"--cpu", &Options::cpu},
                                                        {"--overlap", &Options::overlap},
                                                        {"--timeline", &Options::timeline},
                                                        {"--no-direct", &Options::no_direct},
                                                        {"--pack-first", &Options::pack_first},
                                                        {"--no-baseline", &Options::no_baseline}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (const auto sw = switches.find(a); sw != switches.end()) {
      o.*(sw->second) = true;
    } else if (a == "-h" || a == "--help") {
      usage("");
    } else if (a == "-C") {
      o.comm = cli::rank_kind(argc, argv, i, usage);
    } else if (a == "--ranks") {
      o.ranks = static_cast<int>(number(i, 1, 4096));
      ranks_given = true;
    } else if (a == "-c") {
      o.columns = static_cast<std::size_t>(number(i, 1));
    } else if (a == "-n") {
      o.rows = static_cast<std::size_t>(number(i, 0));
    } else if (a == "-p") {
      o.in_parts = static_cast<std::size_t>(number(i, 1));
    } else if (a == "-o") {
      o.out_parts = static_cast<std::size_t>(number(i, 1));
    } else if (a == "-r") {
      o.runs = static_cast<int>(number(i, 1, 100000));
    } else if (a == "-w") {
      o.warmups = static_cast<int>(number(i, 0, 100000));
    } else if (a == "-m") {
      try {
        o.allocator = parse_device_allocator(value(i));
      } catch (const std::exception& e) {
        usage(std::string("-m: ") + e.what());
      }
    } else if (a == "-l") {
      o.device_limit_mib = number(i, 0, max_mib);
    } else if (a == "--host-limit") {
      o.host_limit_mib = number(i, 0, max_mib);
    } else if (a == "--pinned-reserve") {
      o.pinned_reserve_mib = number(i, 0, max_mib);
    } else if (a == "--spill-dir") {
      o.spill_dir = value(i);
    } else if (a == "--disk-limit") {
      o.disk_limit_mib = number(i, 0, max_mib);
    } else if (a == "--json") {
      o.json = value(i);
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  if (o.comm == "single") {
    if (ranks_given && o.ranks != 1) usage("-C single is one rank: --ranks must be 1 or left out");
    o.ranks = 1;
  }
  if (!o.json.empty() && !std::ofstream(o.json, std::ios::app)) {
    usage("--json: cannot write '" + o.json + "'");  // now, not after every run
  }
  if (o.in_parts > o.rows && o.rows > 0) usage("-p is larger than -n: input tables without rows");
  if (o.overlap && !o.pre_partitioned) usage("--overlap needs -g");
  if (o.pack_first && o.pre_partitioned) usage("--pack-first is for hashed input (without -g)");
  return o;
}

BufferResourceConfig rank_config(const Options& o) {
  auto c = BufferResourceConfig::from_options();
  c.use_gpu = !o.cpu;
  if (o.allocator) c.device_allocator = *o.allocator;
  auto limit_mib = [&](MemoryType t, long long mib) {  // -1: not given
    if (mib >= 0) c.limits[index(t)] = Limit::bytes(std::size_t(mib) << 20);
  };
  limit_mib(MemoryType::DEVICE, o.device_limit_mib);
  limit_mib(MemoryType::HOST, o.host_limit_mib);
  limit_mib(MemoryType::DISK, o.disk_limit_mib);
  if (o.no_pinned) c.pinned_pool = false;
  if (o.pinned_reserve_mib >= 0)
    c.pinned_reserve = Limit::bytes(std::size_t(o.pinned_reserve_mib) << 20);
  if (!o.spill_dir.empty()) c.spill_dir = o.spill_dir;
  // (Ranks that share a GPU split it: run_ranks, shared_gpu_config.)
  return c;
}

}  // namespace spillway::bench
