// spillway-bench-sort: the distributed sort (ops::sort: samples, splitters, a range shuffle, a
// local sort per rank) of N rows per rank of an int64 key and an int64 payload (the row's
// global number), the keys uniform over int64 or Zipf-distributed over 2^20 values (-z: many
// equal keys). Each run is validated: every rank's output is sorted, each rank's last key is at
// most the next rank's first, the rows, the keys' sum and the payloads' sum are the input's.
// The input is made and placed in the rank's memory before the clock. DuckDB's ORDER BY of the
// same shape is bench/sort_duckdb_sql.py's.
#include <spillway/comm/collectives.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/generator.hpp>

#include <chrono>
#include <cstring>
#include <iostream>
#include <limits>
#include <mutex>
#include <sstream>
#include <vector>

#include "cli.hpp"
#include "rank_main.hpp"

using namespace spillway;
using Clock = std::chrono::steady_clock;

namespace {

struct Options : tools::OperatorFlags {
  std::size_t rows{10000000};  // per rank
  double zipf{0};
  std::size_t pieces{8};
};

[[noreturn]] void usage(const std::string& error) {
  cli::print_usage("spillway-bench-sort", error,
                   "usage: spillway-bench-sort [options]\n"
                   "  -C local|mpi|single   communicator (default local; mpi: run under mpirun)\n"
                   "  --ranks N             ranks of -C local (default 2)\n"
                   "  -n N                  rows per rank (default 10000000)\n"
                   "  -z S                  Zipf keys of exponent S (0 to 10) over 2^20 values "
                   "(default: uniform)\n"
                   "  --pieces N            pieces the input is given in per rank (default 8)\n"
                   "  --host-limit MIB      HOST limit per rank (default: the settings')\n"
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
    if (a == "--piece" || a == "--pageable" || a == "--gpu" || a == "--device-limit") {
      usage("'" + a + "': the sort runs on host tables");
    }
    if (o.take(argc, argv, i, usage)) continue;
    if (a == "-h" || a == "--help") {
      usage("");
    } else if (a == "-n") {
      o.rows = static_cast<std::size_t>(number(i, 1, 1LL << 32));
    } else if (a == "-z") {
      o.zipf = cli::real(argc, argv, i, 0.01, 10, "an exponent above 0, at most 10", usage);
    } else if (a == "--pieces") {
      o.pieces = static_cast<std::size_t>(number(i, 1, 1 << 20));
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  o.finish(usage);
  return o;
}

/// This rank's rows: keys (uniform, or Zipf), payload = global row number.
Table make_input(const Options& o, Rank rank, BufferResource& br) {
  RandomTableOptions g;
  g.rows = o.rows;
  g.types = {TypeId::INT64};
  g.zipf = o.zipf;
  g.seed = 1000 + static_cast<std::uint64_t>(rank);
  std::vector<Column> cols = std::move(random_table(g, br)).release();
  auto ids = br.allocate(MemoryType::HOST, o.rows * 8);
  auto* id = reinterpret_cast<std::int64_t*>(ids->data());
  for (std::size_t i = 0; i < o.rows; ++i) {
    id[i] = static_cast<std::int64_t>(static_cast<std::uint64_t>(rank) * o.rows + i);
  }
  cols.emplace_back(TypeId::INT64, o.rows, std::move(ids));
  return Table(std::move(cols), {"k", "v"});
}

/// Rows [b, e) of `t` (INT64 columns) as a new HOST table.
Table slice(const Table& t, std::size_t b, std::size_t e, BufferResource& br) {
  std::vector<Column> cols;
  for (std::size_t c = 0; c < t.num_columns(); ++c) {
    auto buf = br.allocate(MemoryType::HOST, std::max<std::size_t>(e - b, 1) * 8);
    std::memcpy(buf->data(), static_cast<const std::byte*>(t.column(c).view().data) + b * 8,
                (e - b) * 8);
    cols.emplace_back(TypeId::INT64, e - b, std::move(buf));
  }
  return Table(std::move(cols), t.names());
}

int run_rank(const Options& o, Communicator& comm, BufferResource& br, std::mutex& print) {
  const auto n = static_cast<std::size_t>(comm.nranks());
  const std::uint64_t total = static_cast<std::uint64_t>(o.rows) * n;
  const auto say = [&](const std::string& line) {
    if (comm.rank() != 0) return;
    std::lock_guard lock(print);
    std::cout << line << std::endl;
  };
  const Table input = make_input(o, comm.rank(), br);
  std::uint64_t key_sum = 0;
  for (std::size_t i = 0; i < o.rows; ++i) {
    key_sum += static_cast<std::uint64_t>(input.column(0).view().value<std::int64_t>(i));
  }
  const std::uint64_t want_keys = allreduce(comm, 902, std::span(&key_sum, 1), ReduceOp::sum)[0];
  const std::uint64_t want_ids =
      (total % 2 == 0) ? total / 2 * (total - 1) : total * ((total - 1) / 2);
  {
    std::ostringstream h;
    h << "spillway-bench-sort: -C " << o.comm << " | nranks " << n << " | CPU | " << total
      << " rows (int64 key "
      << (o.zipf > 0 ? "Zipf " + std::to_string(o.zipf) + " over 2^20" : "uniform")
      << ", int64 payload; " << format_bytes(double(total) * 16) << " in all) in " << o.pieces
      << " pieces per rank\nMemory: " << br.usage();
    say(h.str());
  }
  const std::vector<SortKey> keys{{0}};
  std::vector<double> times;
  bool valid = true;
  for (int run = 0; run < o.warmups + o.runs; ++run) {
    for (MemoryType t : all_memory_types) br.reset_peak(t);
    std::vector<Table> pieces;
    for (std::size_t p = 0; p < o.pieces; ++p) {
      pieces.push_back(slice(input, o.rows * p / o.pieces, o.rows * (p + 1) / o.pieces, br));
    }
    std::size_t next = 0;
    const ops::TableSource source = [&]() -> std::optional<Table> {
      if (next == pieces.size()) return std::nullopt;
      return std::move(pieces[next++]);
    };
    std::optional<Table> out;
    comm.barrier();
    const auto t0 = Clock::now();
    ops::sort(comm, br, source, keys, {}, [&](Table&& t) { out = std::move(t); });
    const double mine = std::chrono::duration<double>(Clock::now() - t0).count();
    // Validation (untimed): sorted here, ordered across ranks, nothing lost.
    const TableView v = out->view();
    bool sorted = true;
    std::uint64_t sums[3] = {v.num_rows(), 0, 0};
    for (std::size_t i = 0; i < v.num_rows(); ++i) {
      const auto k = v.columns[0].value<std::int64_t>(i);
      sorted = sorted && (i == 0 || v.columns[0].value<std::int64_t>(i - 1) <= k);
      sums[1] += static_cast<std::uint64_t>(k);
      sums[2] += static_cast<std::uint64_t>(v.columns[1].value<std::int64_t>(i));
    }
    std::vector<std::int64_t> ends(2 * n, 0);
    ends[2 * comm.rank()] = v.num_rows() ? v.columns[0].value<std::int64_t>(0)
                                         : std::numeric_limits<std::int64_t>::max();
    ends[2 * comm.rank() + 1] = v.num_rows() ? v.columns[0].value<std::int64_t>(v.num_rows() - 1)
                                             : std::numeric_limits<std::int64_t>::min();
    const auto all_ends = allreduce(comm, 903, std::span(ends), ReduceOp::sum);
    bool ordered = true;
    std::int64_t last = std::numeric_limits<std::int64_t>::min();
    for (std::size_t r = 0; r < n; ++r) {
      if (all_ends[2 * r + 1] == std::numeric_limits<std::int64_t>::min()) continue;  // empty
      ordered = ordered && last <= all_ends[2 * r];
      last = all_ends[2 * r + 1];
    }
    const std::uint64_t rows_here = sums[0];
    const auto all = allreduce(comm, 901, std::span(sums, 3), ReduceOp::sum);
    const std::uint64_t unsorted =
        allreduce(comm, 904, std::vector<std::uint64_t>{sorted ? 0U : 1U}, ReduceOp::sum)[0];
    const std::uint64_t most = allreduce(comm, 905, std::span(&rows_here, 1), ReduceOp::max)[0];
    const double slowest = allreduce(comm, 900, std::span(&mine, 1), ReduceOp::max)[0];
    const bool ok =
        unsorted == 0 && ordered && all[0] == total && all[1] == want_keys && all[2] == want_ids;
    valid = valid && ok;
    out.reset();
    const bool warm = run < o.warmups;
    if (!warm) times.push_back(slowest);
    std::ostringstream line;
    line << "elapsed: " << slowest << " sec | " << double(total) / slowest / 1e6
         << " M rows/s | largest rank " << double(most) / double(total) * double(n)
         << " of its share" << (warm ? " (warmup run)" : "") << " | "
         << (ok ? "validated" : "INVALID");
    say(line.str());
  }
  const double med = cli::median(times);
  std::ostringstream m;
  m << "medians: " << med << " sec | " << double(total) / med / 1e6
    << " M rows/s | peak of rank 0:" << tools::peaks_beside_limits(br);
  say(m.str());
  return valid ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  return tools::rank_main("spillway-bench-sort", o.comm, o.ranks, false, o.config(),
                          [&](Communicator& comm, BufferResource& br, std::mutex& print) {
                            return run_rank(o, comm, br, print);
                          });
}
