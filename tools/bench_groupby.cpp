// spillway-bench-groupby: the distributed group-by (ops::groupby: partial aggregates, a
// shuffle of them by key, the final aggregation) of N rows per rank of an int64 key and an
// int64 value into K groups, with count, sum, min and max of the value, timed per run and
// validated. Global row g has value g and key (g * P) % K for a P prime to K, so every group
// has its rows spread over all ranks, the key order is scattered, and the results obey
// closed forms: the group count is min(K, rows), the counts add up to the rows, the sums to
// rows (rows - 1) / 2, the minima (each the smallest g of its residue) to K (K - 1) / 2 and
// the maxima to a sum over the K residues. Each run checks all five, over all ranks. With
// --gpu the input is in device memory (copied there before each run, untimed) and every step
// runs on the GPU. Under a limit (or with --piece) the input is staged in host memory before
// the clock (tools/staged_input.hpp) and handed over in pieces, each copied into the rank's
// memory when the group-by asks for it (timed); on the GPU the PCIe floor of that is printed
// beside the figure. DuckDB's GROUP BY of the same shape is bench/groupby_duckdb_sql.py's.
#include <spillway/comm/collectives.hpp>
#include <spillway/comm/launch.hpp>
#include <spillway/comm/mpi.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/ops/groupby.hpp>
#include <spillway/table/table.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <mutex>
#include <numeric>
#include <optional>
#include <sstream>
#include <vector>

#include "cli.hpp"
#include "pcie.hpp"
#include "rank_main.hpp"
#include "staged_input.hpp"

using namespace spillway;
using Clock = std::chrono::steady_clock;

namespace {

struct Options : tools::OperatorFlags {
  std::size_t rows{4000000};  // per rank
  std::size_t groups{1000000};
  std::uint32_t partitions{0};
};

[[noreturn]] void usage(const std::string& error) {
  cli::print_usage(
      "spillway-bench-groupby", error,
      "usage: spillway-bench-groupby [options]\n"
      "  -C local|mpi|single   communicator (default local; mpi: run under mpirun)\n"
      "  --ranks N             ranks of -C local (default 2)\n"
      "  -n N                  rows per rank (default 4000000)\n"
      "  -k N                  distinct keys in all (default 1000000)\n"
      "  --partitions N        partitions of the shuffle (default: 8 per rank, 1 with --gpu; "
      "under\n"
      "                        a limit enough for a partition's groups to take a sixteenth of it)\n"
      "  --gpu                 input in device memory, every step on the GPU\n"
      "  --host-limit MIB      HOST limit per rank (default: the settings')\n"
      "  --device-limit MIB    DEVICE limit per rank, with --gpu (default: the settings')\n"
      "  --piece MIB           stage the input in host memory before the clock and give it to\n"
      "                        the group-by in pieces of this size, each copied into the\n"
      "                        rank's memory (with --gpu to the device) as it is asked for,\n"
      "                        timed (default under a limit: an eighth of it, 64 KiB to 64\n"
      "                        MiB; else the whole input, copied before the clock starts)\n"
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
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (o.take(argc, argv, i, usage)) continue;
    if (a == "-h" || a == "--help") {
      usage("");
    } else if (a == "-n") {
      o.rows = static_cast<std::size_t>(number(i, 1, 1LL << 31));
    } else if (a == "-k") {
      o.groups = static_cast<std::size_t>(number(i, 1, 1LL << 31));
    } else if (a == "--partitions") {
      o.partitions = static_cast<std::uint32_t>(number(i, 1, 1 << 20));
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  o.finish(usage);
  return o;
}

/// A multiplier prime to k (the key of row g is g * P % k).
std::uint64_t stride_for(std::uint64_t k) {
  std::uint64_t p = 2654435761ULL % k;
  while (std::gcd(p, k) != 1) ++p;
  return p;
}

/// This rank's rows [begin, end) (keys, values), on the host.
tools::StagedInput::Columns input_columns(const Options& o, Rank rank, std::size_t begin,
                                          std::size_t end) {
  const std::uint64_t p = stride_for(o.groups);
  tools::StagedInput::Columns c(2, std::vector<std::int64_t>(end - begin));
  for (std::size_t i = begin; i < end; ++i) {
    const std::uint64_t g = static_cast<std::uint64_t>(rank) * o.rows + i;
    c[0][i - begin] = static_cast<std::int64_t>(g % o.groups * p % o.groups);  // (both < 2^31)
    c[1][i - begin] = static_cast<std::int64_t>(g);
  }
  return c;
}

/// This rank's rows as a HOST table.
Table make_input(const Options& o, Rank rank, BufferResource& br) {
  std::vector<Column> cols;
  for (auto& v : input_columns(o, rank, 0, o.rows)) {
    auto b = br.allocate(MemoryType::HOST, v.size() * 8);
    if (!v.empty()) std::memcpy(b->data(), v.data(), v.size() * 8);
    cols.emplace_back(TypeId::INT64, v.size(), std::move(b));
  }
  return Table(std::move(cols), {"k", "v"});
}

/// Rows [begin, end) of `t` (HOST, INT64 columns) copied into tier `to`.
Table slice_to(const Table& t, std::size_t begin, std::size_t end, MemoryType to,
               BufferResource& br) {
  std::vector<Column> cols;
  for (std::size_t c = 0; c < t.num_columns(); ++c) {
    auto b = br.allocate(to, (end - begin) * 8, br.stream());
    const auto* from = static_cast<const std::byte*>(t.column(c).view().data) + begin * 8;
    if (to == MemoryType::HOST) {
      std::memcpy(b->data(), from, b->size());
    } else {
      cuda::memcpy_async(b->data(), from, b->size(), br.stream());
    }
    cols.emplace_back(TypeId::INT64, end - begin, std::move(b));
  }
  return Table(std::move(cols), t.names());
}

/// What the five totals must be: groups, Σcount, Σsum, Σmin, Σmax (mod 2^64).
std::vector<std::uint64_t> expected(const Options& o, int nranks) {
  const std::uint64_t n = static_cast<std::uint64_t>(o.rows) * static_cast<std::uint64_t>(nranks);
  const std::uint64_t k = o.groups;
  const std::uint64_t residues = std::min(n, k);  // residue r's rows are r, r + k, ... < n
  std::uint64_t mins = 0, maxes = 0;
  for (std::uint64_t r = 0; r < residues; ++r) {
    mins += r;
    maxes += r + k * ((n - 1 - r) / k);
  }
  const std::uint64_t sum = (n % 2 == 0) ? (n / 2) * (n - 1) : n * ((n - 1) / 2);
  return {residues, n, sum, mins, maxes};
}

int run_rank(const Options& o, Communicator& comm, BufferResource& br, std::mutex& print) {
  if (o.gpu && !br.is_live(MemoryType::DEVICE)) {
    throw std::runtime_error("--gpu: no GPU here, or spillway was built without CUDA");
  }
  const int n = comm.nranks();
  // The whole input in the rank's host memory, or staged outside it in pieces.
  std::optional<Table> input;
  std::unique_ptr<tools::StagedInput> staged;
  if (o.piece == 0) {
    input = make_input(o, comm.rank(), br);
  } else {
    staged = std::make_unique<tools::StagedInput>(!o.pageable);
    tools::stage(*staged, o.rows, o.piece / 16,
                 [&](std::size_t b, std::size_t e) { return input_columns(o, comm.rank(), b, e); });
  }
  double pcie_gbps = 0;  // H2D with copies both ways at once, for the floor of a staged run
  if (o.gpu && staged) {
    pcie_gbps = tools::pcie_ceilings_of_ranks(comm.rank() == 0, [&] { comm.barrier(); })[4];
  }
  const std::vector<std::uint64_t> want = expected(o, n);
  const std::uint64_t total = static_cast<std::uint64_t>(o.rows) * n;
  const double input_bytes = double(total) * 16;
  // (Smaller partitions keep a CPU aggregation's table in cache; the GPU's want few. Under a
  // limit, a partition's groups, 40 bytes each, take at most a sixteenth of it: they are
  // merged with a batch of partials and aggregated again beside them.)
  std::uint32_t partitions =
      o.partitions != 0 ? o.partitions : static_cast<std::uint32_t>(n * (o.gpu ? 1 : 8));
  if (const std::size_t limit = br.limit(o.gpu ? MemoryType::DEVICE : MemoryType::HOST);
      o.partitions == 0 && limit != unlimited_bytes) {
    const std::size_t per_rank = std::max<std::size_t>(
        1, (o.groups * 40 + limit / 16 - 1) / (limit / 16) / static_cast<std::size_t>(n) + 1);
    partitions = std::max(partitions, static_cast<std::uint32_t>(per_rank * n));
  }
  const std::vector<std::size_t> keys{0};
  const std::vector<Aggregation> aggs{
      {1, AggOp::count}, {1, AggOp::sum}, {1, AggOp::min}, {1, AggOp::max}};
  const auto say = [&](const std::string& line) {
    if (comm.rank() != 0) return;
    std::lock_guard lock(print);
    std::cout << line << std::endl;
  };
  {
    std::ostringstream h;
    h << "spillway-bench-groupby: -C " << o.comm << " | nranks " << n << " | "
      << (o.gpu ? "GPU" : "CPU") << " | " << total << " rows (int64 key, int64 value; "
      << format_bytes(input_bytes) << " in all) into " << o.groups
      << " groups: count, sum, min, max"
      << (staged ? std::string("\ninput staged in ") +
                       (staged->pinned() ? "page-locked" : "pageable") +
                       " host memory, given in pieces copied " +
                       (o.gpu ? "to the device" : "into the rank's memory") +
                       " as the group-by asks for them (timed)"
                 : std::string())
      << "\nplan: partial aggregates per "
      << (o.piece > 0 ? "piece of " + format_bytes(static_cast<double>(o.piece)) : "rank")
      << ", a shuffle of them into " << partitions
      << " partitions, the final aggregation of each\nMemory: " << br.usage();
    say(h.str());
  }
  ops::GroupByOptions go;
  go.partitions = partitions;
  std::vector<double> times;
  bool valid = true;
  for (int run = 0; run < o.warmups + o.runs; ++run) {
    for (MemoryType t : all_memory_types) br.reset_peak(t);
    const MemoryType to = o.gpu ? MemoryType::DEVICE : MemoryType::HOST;
    std::optional<Table> whole;  // without pieces: copied before the clock starts
    if (input) whole = slice_to(*input, 0, o.rows, to, br);
    br.stream().synchronize();
    const ops::TableSource source =
        staged ? staged->source(to, br, {"k", "v"})
               : [&]() -> std::optional<Table> { return std::exchange(whole, std::nullopt); };
    // The totals of this rank's groups, taken on the host: after the clock stops, or, under a
    // limit (the groups of all partitions may not fit it), as each partition's come, that time
    // taken out.
    std::vector<std::uint64_t> got(5, 0);
    double summing = 0;
    const auto add_up = [&](const Table& t) {
      const auto c0 = Clock::now();
      const Table h = copy_table(t, MemoryType::HOST, br, br.stream());
      br.stream().synchronize();
      const TableView v = h.view();
      got[0] += v.num_rows();
      for (std::size_t g = 0; g < v.num_rows(); ++g) {
        for (std::size_t c = 1; c < 5; ++c) {
          got[c] += static_cast<std::uint64_t>(v.columns[c].value<std::int64_t>(g));
        }
      }
      summing += std::chrono::duration<double>(Clock::now() - c0).count();
    };
    std::vector<Table> outs;
    comm.barrier();
    const auto t0 = Clock::now();
    ops::groupby(comm, br, source, keys, aggs, go, [&](std::uint32_t, Table&& t) {
      if (staged) {
        add_up(t);
      } else {
        outs.push_back(std::move(t));
      }
    });
    br.stream().synchronize();
    const double mine = std::chrono::duration<double>(Clock::now() - t0).count() - summing;
    for (const Table& t : outs) add_up(t);
    outs.clear();
    const double slowest = allreduce(comm, 900, std::span(&mine, 1), ReduceOp::max)[0];
    const auto all = allreduce(comm, 901, std::span(got), ReduceOp::sum);
    const bool ok = all == want;
    valid = valid && ok;
    const bool warm = run < o.warmups;
    if (!warm) times.push_back(slowest);
    std::ostringstream line;
    line << "elapsed: " << slowest << " sec | " << double(total) / slowest / 1e6 << " M rows/s | "
         << input_bytes / slowest / 1e9 << " GB/s of input | " << all[0] << " groups"
         << (warm ? " (warmup run)" : "") << " | "
         << (ok ? "validated" : "INVALID: want " + std::to_string(want[0]) + " groups");
    say(line.str());
  }
  std::ostringstream m;
  const double med = cli::median(times);
  m << "medians: " << med << " sec | " << double(total) / med / 1e6 << " M rows/s | "
    << input_bytes / med / 1e9 << " GB/s of input | peak of rank 0:";
  m << tools::peaks_beside_limits(br);
  say(m.str());
  if (pcie_gbps > 0) {
    say(tools::pcie_floor_line(comm, br, double(o.rows) * 16, pcie_gbps, med));
  }
  return valid ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  return tools::rank_main("spillway-bench-groupby", o.comm, o.ranks, o.gpu, o.config(),
                          [&](Communicator& comm, BufferResource& br, std::mutex& print) {
                            return run_rank(o, comm, br, print);
                          });
}
