// spillway-bench-join: the distributed hash join (ops::hash_join) of a probe side (left) and
// a build side (right) on int64 keys with int64 payloads, timed per run and validated against
// what each probe row must become (tools/join_rows.hpp): match rate, uniform, Zipf or one hot
// key, join type and payload columns are flags. With --gpu the tables are in device memory
// (copied there before each run, untimed) and the join runs on the GPU. Under a limit (or with
// --piece) the input is staged in host memory before the clock (tools/staged_input.hpp) and
// handed over in pieces, each copied into the rank's memory when the join asks for it (timed);
// on the GPU the PCIe floor of that is printed beside the figure. DuckDB on the same shape of
// data is bench/join_duckdb_sql.py's.
#include <spillway/comm/collectives.hpp>
#include <spillway/comm/launch.hpp>
#include <spillway/comm/mpi.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/ops/hash_join.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/gpu.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <vector>

#include "cli.hpp"
#include "join_rows.hpp"
#include "pcie.hpp"
#include "rank_main.hpp"
#include "staged_input.hpp"

using namespace spillway;
using Clock = std::chrono::steady_clock;

namespace {

struct Options : tools::OperatorFlags {
  bench::JoinShape shape;
  std::uint32_t partitions{0};
  long long broadcast_mib{-1};  // -1: the library's default
  long long chunk_mib{0};       // 0: the library's default
};

[[noreturn]] void usage(const std::string& error) {
  cli::print_usage(
      "spillway-bench-join", error,
      "usage: spillway-bench-join [options]\n"
      "  -C local|mpi|single   communicator (default local; mpi: run under mpirun)\n"
      "  --ranks N             ranks of -C local (default 2)\n"
      "  -b N                  build (right) rows per rank (default 1000000)\n"
      "  -p N                  probe (left) rows per rank (default 4000000)\n"
      "  --match F             this fraction of probe rows has a match (default 1)\n"
      "  --zipf S              probe keys by a Zipf law of exponent S (default 0: uniform)\n"
      "  --skew F              this fraction of probe rows has key 0 (default 0)\n"
      "  --payloads N          int64 payload columns a side, 1 to 16 (default 2)\n"
      "  --type T              inner, left, left_semi or left_anti (default inner)\n"
      "  --partitions N        partitions of the shuffle (default: the plan's, one per 2 MiB\n"
      "                        of build side, 512 MiB with --gpu, at most a sixteenth of the\n"
      "                        limit, at least one per rank)\n"
      "  --broadcast MIB       broadcast a build side of at most this size (default 16; 0: never)\n"
      "  --chunk MIB           output chunks of about this size (default: the plan's)\n"
      "  --gpu                 tables in device memory, the join on the GPU\n"
      "  --host-limit MIB      HOST limit per rank (default: the settings')\n"
      "  --device-limit MIB    DEVICE limit per rank, with --gpu (default: the settings')\n"
      "  --piece MIB           stage each side in host memory before the clock and give it to\n"
      "                        the join in pieces of this size, each copied into the rank's\n"
      "                        memory (with --gpu to the device) when the join asks for it,\n"
      "                        timed (default under a limit: an eighth of it, 64 KiB to 64\n"
      "                        MiB; else whole tables made before the runs)\n"
      "  --pageable            stage in pageable host memory (default: page-locked)\n"
      "  -r N                  timed runs (default 3)\n"
      "  -w N                  warm-up runs (default 1)\n"
      "  -h                    this help\n");
}

Options parse(int argc, char** argv) {
  Options o;
  auto number = [&](int& i, long long min, long long max) {
    return cli::number(argc, argv, i, min, max, usage);
  };
  auto real = [&](int& i, double min, double max, const char* what) {
    return cli::real(argc, argv, i, min, max, what, usage);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (o.take(argc, argv, i, usage)) continue;
    if (a == "-h" || a == "--help") {
      usage("");
    } else if (a == "-b") {
      o.shape.build = static_cast<std::size_t>(number(i, 1, 1LL << 34));
    } else if (a == "-p") {
      o.shape.probe = static_cast<std::size_t>(number(i, 0, 1LL << 34));
    } else if (a == "--match") {
      o.shape.match = real(i, 1e-6, 1, "a fraction above 0, at most 1");
    } else if (a == "--zipf") {
      o.shape.zipf = real(i, 0, 10, "an exponent from 0 to 10");
    } else if (a == "--skew") {
      o.shape.skew = real(i, 0, 1, "a fraction from 0 to 1");
    } else if (a == "--payloads") {
      o.shape.payloads = static_cast<int>(number(i, 1, 16));
    } else if (a == "--type") {
      const std::string v = cli::value(argc, argv, i, usage);
      bool found = false;
      for (JoinType t :
           {JoinType::inner, JoinType::left, JoinType::left_semi, JoinType::left_anti}) {
        if (v == to_string(t)) {
          o.shape.type = t;
          found = true;
        }
      }
      if (!found) usage("--type takes inner, left, left_semi or left_anti, got '" + v + "'");
    } else if (a == "--partitions") {
      o.partitions = static_cast<std::uint32_t>(number(i, 1, 1 << 20));
    } else if (a == "--broadcast") {
      o.broadcast_mib = number(i, 0, 1LL << 30);
    } else if (a == "--chunk") {
      o.chunk_mib = number(i, 1, 1LL << 30);
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  if (o.shape.zipf > 0 && o.shape.skew > 0) usage("--zipf and --skew are two key distributions");
  o.finish(usage);
  return o;
}

int run_rank(const Options& o, Communicator& comm, BufferResource& br, std::mutex& print) {
  if (o.gpu && !br.is_live(MemoryType::DEVICE)) {
    throw std::runtime_error("--gpu: no GPU here, or spillway was built without CUDA");
  }
  const int n = comm.nranks();
  const bench::JoinRows rows(o.shape, comm.rank(), n);
  TableChecksum want;
  {  // (the oracle's memory is not the join's: a resource of its own, without limits)
    BufferResourceConfig c;
    c.use_gpu = false;
    BufferResource oracle(c);
    want = rows.want(oracle);
  }
  // Whole tables are made once, in host memory (then copied to the device before each run
  // with --gpu); pieces are staged in host memory outside the rank's budget.
  std::optional<Table> probe_table, build_table;
  std::unique_ptr<tools::StagedInput> probe_in, build_in;
  if (o.piece == 0) {
    probe_table = rows.probe(0, o.shape.probe, MemoryType::HOST, br);
    build_table = rows.build(0, o.shape.build, MemoryType::HOST, br);
  } else {
    const std::size_t piece_rows = o.piece / rows.row_bytes();
    probe_in = std::make_unique<tools::StagedInput>(!o.pageable);
    build_in = std::make_unique<tools::StagedInput>(!o.pageable);
    tools::stage(*probe_in, o.shape.probe, piece_rows,
                 [&](std::size_t b, std::size_t e) { return rows.probe_columns(b, e); });
    tools::stage(*build_in, o.shape.build, piece_rows,
                 [&](std::size_t b, std::size_t e) { return rows.build_columns(b, e); });
  }
  // The PCIe H2D rate with copies both ways at once, for the floor of a run staged on the host.
  double pcie_gbps = 0;
  if (o.gpu && probe_in) {
    pcie_gbps = tools::pcie_ceilings_of_ranks(comm.rank() == 0, [&] { comm.barrier(); })[4];
  }
  const std::uint64_t total_build = static_cast<std::uint64_t>(o.shape.build) * n;
  const std::uint64_t total_probe = static_cast<std::uint64_t>(o.shape.probe) * n;
  const double input_bytes = double(total_build + total_probe) * double(rows.row_bytes());
  const std::vector<std::size_t> keys{0};
  const auto say = [&](const std::string& line) {
    if (comm.rank() != 0) return;
    std::lock_guard lock(print);
    std::cout << line << std::endl;
  };
  {
    std::ostringstream h;
    h << "spillway-bench-join: -C " << o.comm << " | nranks " << n << " | "
      << (o.gpu ? "GPU" : "CPU") << " | " << to_string(o.shape.type) << " join | build "
      << total_build << " rows, probe " << total_probe << " rows (int64 key, " << o.shape.payloads
      << " int64 payloads a side; " << format_bytes(input_bytes) << " in all) | match "
      << o.shape.match << " | keys "
      << (o.shape.zipf > 0   ? "Zipf " + std::to_string(o.shape.zipf)
          : o.shape.skew > 0 ? "uniform, key 0 for " + std::to_string(o.shape.skew)
                             : std::string("uniform"))
      << (o.piece > 0 ? std::string(" | input staged in ") +
                            (probe_in->pinned() ? "page-locked" : "pageable") +
                            " host memory, given in pieces of " +
                            format_bytes(static_cast<double>(o.piece)) + ", each copied " +
                            (o.gpu ? "to the device" : "into the rank's memory") +
                            " as the join asks for it (timed)"
                      : std::string())
      << "\nMemory: " << br.usage();
    say(h.str());
  }
  ops::HashJoinOptions jo;
  jo.type = o.shape.type;
  jo.partitions = o.partitions;
  if (o.broadcast_mib >= 0) jo.broadcast_bytes = static_cast<std::size_t>(o.broadcast_mib) * MiB;
  jo.output_chunk_bytes = static_cast<std::size_t>(o.chunk_mib) * MiB;
  jo.right_bytes = total_build * rows.row_bytes();  // (what a plan of pieces cannot measure)
  std::vector<double> times;
  bool valid = true;
  for (int run = 0; run < o.warmups + o.runs; ++run) {
    comm.barrier();
    for (MemoryType t : all_memory_types) br.reset_peak(t);
    TableChecksum got;
    double check_seconds = 0;
    std::size_t chunks = 0;
    const auto check = [&](std::uint32_t, Table&& t) {
      const auto c0 = Clock::now();
      got += o.gpu ? gpu::checksum(t.view(), br, br.stream()) : checksum(t.view());
      ++chunks;
      check_seconds += std::chrono::duration<double>(Clock::now() - c0).count();
    };
    ops::JoinPlan plan;
    std::optional<Clock::time_point> t0;
    if (probe_in) {  // staged pieces copied in as the join asks for them, timed
      const MemoryType to = o.gpu ? MemoryType::DEVICE : MemoryType::HOST;
      comm.barrier();
      t0 = Clock::now();
      plan = ops::hash_join(comm, br, probe_in->source(to, br, rows.names(false)), keys,
                            build_in->source(to, br, rows.names(true)), keys, jo, check);
    } else if (o.gpu) {  // the join consumes device copies, made before the clock starts
      Table probe = copy_table(*probe_table, MemoryType::DEVICE, br, br.stream());
      Table build = copy_table(*build_table, MemoryType::DEVICE, br, br.stream());
      br.stream().synchronize();
      comm.barrier();
      t0 = Clock::now();
      plan = ops::hash_join(comm, br, std::move(probe), keys, std::move(build), keys, jo, check);
    } else {
      t0 = Clock::now();
      plan =
          ops::hash_join(comm, br, probe_table->view(), keys, build_table->view(), keys, jo, check);
    }
    const double mine = std::chrono::duration<double>(Clock::now() - *t0).count() - check_seconds;
    const double slowest = allreduce(comm, 900, std::span(&mine, 1), ReduceOp::max)[0];
    const std::vector<std::uint64_t> sums{got.rows, got.sum, want.rows, want.sum};
    const auto all = allreduce(comm, 901, std::span(sums), ReduceOp::sum);
    const bool ok = all[0] == all[2] && all[1] == all[3];
    valid = valid && ok;
    const bool warm = run < o.warmups;
    if (!warm) times.push_back(slowest);
    if (run == 0) say("plan: " + to_string(plan));
    std::ostringstream line;
    line << "elapsed: " << slowest << " sec | " << double(total_build + total_probe) / slowest / 1e6
         << " M input rows/s | " << input_bytes / slowest / 1e9 << " GB/s of input | output "
         << all[0] << " rows in " << chunks << " chunks on rank 0" << (warm ? " (warmup run)" : "")
         << " | " << (ok ? "validated" : "INVALID: want " + std::to_string(all[2]) + " rows");
    say(line.str());
  }
  std::ostringstream m;
  const double med = cli::median(times);
  m << "medians: " << med << " sec | " << double(total_build + total_probe) / med / 1e6
    << " M input rows/s | " << input_bytes / med / 1e9 << " GB/s of input | peak of rank 0:";
  m << tools::peaks_beside_limits(br);
  say(m.str());
  if (pcie_gbps > 0) {
    say(tools::pcie_floor_line(comm, br,
                               double(o.shape.probe + o.shape.build) * double(rows.row_bytes()),
                               pcie_gbps, med));
  }
  if (comm.rank() == 0 && br.statistics().get("spill-host-to-disk")) {
    say(" - spilled HOST -> DISK: " +
        format_bytes(br.statistics().get("spill-host-to-disk")->bytes) + " (rank 0, all runs)");
  }
  return valid ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  return tools::rank_main("spillway-bench-join", o.comm, o.ranks, o.gpu, o.config(),
                          [&](Communicator& comm, BufferResource& br, std::mutex& print) {
                            return run_rank(o, comm, br, print);
                          });
}
