// spillway-bench-pipeline: a join followed by a group-by, run as one streaming network
// (streaming::Network with ops' join and group-by actors: the group-by takes the join's chunks
// as they come) against the same two operators run one after the other (ops::hash_join's
// chunks kept spillable, then ops::groupby of them), on the same input, each validated.
// Global row g of the left side (N rows per rank) has key g % K and value g; the right side
// has each key 0..K-1 once (spread over the ranks) with its group key % G. Every left row
// joins once, so the groups' counts add up to N x ranks and their sums to the sum of all g.
// The inputs are made and placed in the rank's memory (device memory with --gpu) before the
// clock, in pieces; the figure is the slowest rank's time, the median of the runs.
#include <spillway/comm/collectives.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/ops/actors.hpp>
#include <spillway/streaming/actors.hpp>
#include <spillway/table/spillable_tables.hpp>

#include <chrono>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <sstream>
#include <vector>

#include "cli.hpp"
#include "rank_main.hpp"

using namespace spillway;
using Clock = std::chrono::steady_clock;

namespace {

struct Options : tools::OperatorFlags {
  std::size_t rows{4000000};  // left rows per rank
  std::size_t keys{1000000};
  std::size_t groups{1000};
  std::size_t pieces{16};
  bool timeline{false};
};

[[noreturn]] void usage(const std::string& error) {
  cli::print_usage(
      "spillway-bench-pipeline", error,
      "usage: spillway-bench-pipeline [options]\n"
      "  -C local|mpi|single   communicator (default local; mpi: run under mpirun)\n"
      "  --ranks N             ranks of -C local (default 2)\n"
      "  -n N                  left rows per rank (default 4000000)\n"
      "  -k N                  join keys: right rows in all (default 1000000)\n"
      "  -g N                  groups of the group-by (default 1000)\n"
      "  --pieces N            pieces of each side per rank (default 16)\n"
      "  --gpu                 input in device memory, every step on the GPU\n"
      "  --host-limit MIB      HOST limit per rank (default: the settings')\n"
      "  --device-limit MIB    DEVICE limit per rank, with --gpu (default: the settings')\n"
      "  --timeline            the network's actors' timeline of the last run\n"
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
    if (a == "--piece" || a == "--pageable") usage("'" + a + "' is not an option of this one");
    if (o.take(argc, argv, i, usage)) continue;
    if (a == "-h" || a == "--help") {
      usage("");
    } else if (a == "-n") {
      o.rows = static_cast<std::size_t>(number(i, 1, 1LL << 31));
    } else if (a == "-k") {
      o.keys = static_cast<std::size_t>(number(i, 1, 1LL << 31));
    } else if (a == "-g") {
      o.groups = static_cast<std::size_t>(number(i, 1, 1LL << 31));
    } else if (a == "--pieces") {
      o.pieces = static_cast<std::size_t>(number(i, 1, 1 << 20));
    } else if (a == "--timeline") {
      o.timeline = true;
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  o.finish(usage);
  return o;
}

/// A table of INT64 columns from host vectors, in tier `to`.
Table table_of(const std::vector<std::vector<std::int64_t>>& cols,
               const std::vector<std::string>& names, MemoryType to, BufferResource& br) {
  std::vector<Column> out;
  for (const auto& v : cols) {
    auto b = br.allocate(to, std::max<std::size_t>(v.size(), 1) * 8, br.stream());
    if (to == MemoryType::HOST) {
      if (!v.empty()) std::memcpy(b->data(), v.data(), v.size() * 8);
    } else {
      cuda::memcpy_async(b->data(), v.data(), v.size() * 8, br.stream());
    }
    out.emplace_back(TypeId::INT64, v.size(), std::move(b));
  }
  br.stream().synchronize();
  return Table(std::move(out), names);
}

/// This rank's left rows [begin, end): (key, value), and right rows of keys [begin, end):
/// (key, group).
Table left_piece(const Options& o, Rank r, std::size_t b, std::size_t e, MemoryType to,
                 BufferResource& br) {
  std::vector<std::vector<std::int64_t>> c(2, std::vector<std::int64_t>(e - b));
  for (std::size_t i = b; i < e; ++i) {
    const std::uint64_t g = static_cast<std::uint64_t>(r) * o.rows + i;
    c[0][i - b] = static_cast<std::int64_t>(g % o.keys);
    c[1][i - b] = static_cast<std::int64_t>(g);
  }
  return table_of(c, {"k", "v"}, to, br);
}

Table right_piece(const Options& o, std::size_t b, std::size_t e, MemoryType to,
                  BufferResource& br) {
  std::vector<std::vector<std::int64_t>> c(2, std::vector<std::int64_t>(e - b));
  for (std::size_t k = b; k < e; ++k) {
    c[0][k - b] = static_cast<std::int64_t>(k);
    c[1][k - b] = static_cast<std::int64_t>(k % o.groups);
  }
  return table_of(c, {"rk", "grp"}, to, br);
}

/// Pieces handed out one at a time (moved out: each is consumed once).
ops::TableSource source_of(std::deque<Table>& pieces) {
  return [&pieces]() -> std::optional<Table> {
    if (pieces.empty()) return std::nullopt;
    Table t = std::move(pieces.front());
    pieces.pop_front();
    return t;
  };
}

int run_rank(const Options& o, Communicator& comm, BufferResource& br, std::mutex& print) {
  if (o.gpu && !br.is_live(MemoryType::DEVICE)) {
    throw std::runtime_error("--gpu: no GPU here, or spillway was built without CUDA");
  }
  const MemoryType tier = o.gpu ? MemoryType::DEVICE : MemoryType::HOST;
  const auto n = static_cast<std::size_t>(comm.nranks());
  const auto r = static_cast<std::size_t>(comm.rank());
  const std::uint64_t total = static_cast<std::uint64_t>(o.rows) * n;
  const std::uint64_t want_sum =
      (total % 2 == 0) ? total / 2 * (total - 1) : total * ((total - 1) / 2);
  const std::uint64_t want_groups =
      std::min<std::uint64_t>(o.groups, std::min<std::uint64_t>(o.keys, total));
  const auto say = [&](const std::string& line) {
    if (comm.rank() != 0) return;
    std::lock_guard lock(print);
    std::cout << line << std::endl;
  };
  const auto inputs = [&] {
    std::pair<std::deque<Table>, std::deque<Table>> lr;
    const std::size_t kb = o.keys * r / n;
    const std::size_t ke = o.keys * (r + 1) / n;
    for (std::size_t p = 0; p < o.pieces; ++p) {
      lr.first.push_back(
          left_piece(o, comm.rank(), o.rows * p / o.pieces, o.rows * (p + 1) / o.pieces, tier, br));
      lr.second.push_back(right_piece(o, kb + (ke - kb) * p / o.pieces,
                                      kb + (ke - kb) * (p + 1) / o.pieces, tier, br));
    }
    return lr;
  };
  ops::HashJoinOptions jo;
  jo.op = 0;
  ops::GroupByOptions go;
  go.op = 10;
  const std::vector<std::size_t> lk{0};
  const std::vector<std::size_t> rk{0};
  const std::vector<std::size_t> gk{3};  // (k, v, rk, grp)
  const std::vector<Aggregation> aggs{{1, AggOp::count}, {1, AggOp::sum}};
  {
    std::ostringstream h;
    h << "spillway-bench-pipeline: -C " << o.comm << " | nranks " << n << " | "
      << (o.gpu ? "GPU" : "CPU") << " | " << total << " left rows, " << o.keys
      << " right rows (int64 key and value each; " << format_bytes(double(total + o.keys) * 16)
      << " in all) in " << o.pieces << " pieces per rank | join on the key, then GROUP BY key % "
      << o.groups << ": count, sum\nMemory: " << br.usage();
    say(h.str());
  }
  // Each rank's groups' count, Σcount, Σsum, taken as they come (cheap beside the operators).
  std::vector<std::uint64_t> got(3, 0);
  const auto add_up = [&](const Table& t) {
    const Table h =
        tier == MemoryType::HOST ? Table{} : copy_table(t, MemoryType::HOST, br, br.stream());
    br.stream().synchronize();
    const TableView v = tier == MemoryType::HOST ? t.view() : h.view();
    got[0] += v.num_rows();
    for (std::size_t g = 0; g < v.num_rows(); ++g) {
      got[1] += static_cast<std::uint64_t>(v.columns[1].value<std::int64_t>(g));
      got[2] += static_cast<std::uint64_t>(v.columns[2].value<std::int64_t>(g));
    }
  };
  std::vector<double> times[2];
  bool valid = true;
  const char* names[2] = {"one after the other", "as one network"};
  for (int run = 0; run < o.warmups + o.runs; ++run) {
    for (int way = 0; way < 2; ++way) {
      auto [left, right] = inputs();
      std::fill(got.begin(), got.end(), 0);
      std::optional<streaming::NetworkReport> report;
      comm.barrier();
      const auto t0 = Clock::now();
      if (way == 0) {
        SpillableTables joined(br);
        ops::hash_join(comm, br, source_of(left), lk, source_of(right), rk, jo,
                       [&](std::uint32_t, Table&& t) { joined.push(std::move(t)); });
        ops::groupby(
            comm, br, [&]() { return joined.pop(tier); }, gk, aggs, go,
            [&](std::uint32_t, Table&& t) { add_up(t); });
      } else {
        streaming::Network net(br, &comm);
        auto& lc = net.channel("left");
        auto& rc = net.channel("right");
        auto& jc = net.channel("joined");
        auto& gc = net.channel("groups");
        net.add("left source", {}, {&lc}, streaming::source(source_of(left)));
        net.add("right source", {}, {&rc}, streaming::source(source_of(right)));
        net.add("join", {&lc, &rc}, {&jc}, ops::hash_join_actor(lk, rk, jo, tier));
        net.add("groupby", {&jc}, {&gc}, ops::groupby_actor(gk, aggs, go, tier));
        net.add("sink", {&gc}, {},
                streaming::sink([&](streaming::Message&& m) { add_up(m.table); }, tier));
        report = net.run();
      }
      br.stream().synchronize();
      const double mine = std::chrono::duration<double>(Clock::now() - t0).count();
      const double slowest = allreduce(comm, 900, std::span(&mine, 1), ReduceOp::max)[0];
      const auto all = allreduce(comm, 901, std::span(got), ReduceOp::sum);
      const bool ok = all[0] == want_groups && all[1] == total && all[2] == want_sum;
      valid = valid && ok;
      const bool warm = run < o.warmups;
      if (!warm) times[way].push_back(slowest);
      std::ostringstream line;
      line << names[way] << ": " << slowest << " sec | " << double(total) / slowest / 1e6
           << " M left rows/s | " << all[0] << " groups" << (warm ? " (warmup run)" : "") << " | "
           << (ok ? "validated" : "INVALID");
      say(line.str());
      if (report && o.timeline && run + 1 == o.warmups + o.runs) say(report->timeline());
    }
  }
  const double seq = cli::median(times[0]);
  const double net = cli::median(times[1]);
  std::ostringstream m;
  m << "medians: one after the other " << seq << " sec | as one network " << net
    << " sec | the network takes " << net / seq
    << " of the time | peak of rank 0:" << tools::peaks_beside_limits(br);
  say(m.str());
  return valid ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  return tools::rank_main("spillway-bench-pipeline", o.comm, o.ranks, o.gpu, o.config(),
                          [&](Communicator& comm, BufferResource& br, std::mutex& print) {
                            return run_rank(o, comm, br, print);
                          });
}
