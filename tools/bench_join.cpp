// spillway-bench-join: the distributed hash join (ops::hash_join, the shuffle plan) of a probe
// side (left) and a build side (right) on int64 keys with two int64 payloads a side, timed per
// run and validated. The build keys of all ranks are 0 .. B-1, each once; a probe key is drawn
// uniformly from them (or, with --skew F, is key 0 for a fraction F of the rows), so every
// probe row matches exactly one build row, and a build row's payloads are a function of its
// key: each rank knows what its probe rows must come out as without a join, and the output's
// order-independent checksum over all ranks must equal that. With --gpu the tables are in
// device memory (copied there before each run, untimed) and the join runs on the GPU. DuckDB
// on the same shape of data is bench/join_duckdb.py's (CPU machine) and
// bench/join_duckdb_sql.py's (any machine, data made in SQL).
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
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "cli.hpp"

using namespace spillway;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string comm{"local"};
  int ranks{2};
  std::size_t build{1000000};  // rows per rank
  std::size_t probe{4000000};  // rows per rank
  double skew{0};
  JoinType type{JoinType::inner};
  std::uint32_t partitions{0};
  long long host_limit_mib{-1};
  long long device_limit_mib{-1};
  long long piece_mib{-1};  // -1: whole tables, or 64 under a device limit
  bool gpu{false};
  int runs{3};
  int warmups{1};
};

[[noreturn]] void usage(const std::string& error) {
  cli::print_usage(
      "spillway-bench-join", error,
      "usage: spillway-bench-join [options]\n"
      "  -C local|mpi|single   communicator (default local; mpi: run under mpirun)\n"
      "  --ranks N             ranks of -C local (default 2)\n"
      "  -b N                  build (right) rows per rank (default 1000000)\n"
      "  -p N                  probe (left) rows per rank (default 4000000)\n"
      "  --skew F              this fraction of probe rows has key 0 (default 0: uniform)\n"
      "  --type T              inner, left, left_semi or left_anti (default inner)\n"
      "  --partitions N        partitions of the shuffles (default: one per 2 MiB of build\n"
      "                        side, 512 MiB with --gpu, at least one per rank)\n"
      "  --gpu                 tables in device memory, the join on the GPU\n"
      "  --host-limit MIB      HOST limit per rank (default: the settings')\n"
      "  --device-limit MIB    DEVICE limit per rank, with --gpu (default: the settings')\n"
      "  --piece MIB           give the join each side in pieces of this size, each made (and\n"
      "                        with --gpu copied to the device) when the join asks for it,\n"
      "                        timed (default: whole tables made before the runs; 64 under\n"
      "                        --device-limit)\n"
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
    if (a == "-h" || a == "--help") {
      usage("");
    } else if (a == "-C") {
      o.comm = cli::rank_kind(argc, argv, i, usage);
    } else if (a == "--ranks") {
      o.ranks = static_cast<int>(number(i, 1, 1024));
    } else if (a == "-b") {
      o.build = static_cast<std::size_t>(number(i, 1, 1LL << 34));
    } else if (a == "-p") {
      o.probe = static_cast<std::size_t>(number(i, 0, 1LL << 34));
    } else if (a == "--skew") {
      const std::string v = cli::value(argc, argv, i, usage);
      char* end = nullptr;
      o.skew = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(o.skew >= 0 && o.skew <= 1)) {
        usage("--skew takes a fraction from 0 to 1, got '" + v + "'");
      }
    } else if (a == "--type") {
      const std::string v = cli::value(argc, argv, i, usage);
      bool found = false;
      for (JoinType t :
           {JoinType::inner, JoinType::left, JoinType::left_semi, JoinType::left_anti}) {
        if (v == to_string(t)) {
          o.type = t;
          found = true;
        }
      }
      if (!found) usage("--type takes inner, left, left_semi or left_anti, got '" + v + "'");
    } else if (a == "--partitions") {
      o.partitions = static_cast<std::uint32_t>(number(i, 1, 1 << 20));
    } else if (a == "--host-limit") {
      o.host_limit_mib = number(i, 1, 1LL << 30);
    } else if (a == "--device-limit") {
      o.device_limit_mib = number(i, 1, 1LL << 30);
    } else if (a == "--piece") {
      o.piece_mib = number(i, 1, 1LL << 30);
    } else if (a == "--gpu") {
      o.gpu = true;
    } else if (a == "-r") {
      o.runs = static_cast<int>(number(i, 1, 1000));
    } else if (a == "-w") {
      o.warmups = static_cast<int>(number(i, 0, 1000));
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  if (o.device_limit_mib > 0 && !o.gpu) usage("--device-limit needs --gpu");
  if (o.piece_mib < 0 && o.device_limit_mib > 0) o.piece_mib = 64;
  return o;
}

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// A build row's payloads, functions of its key.
std::int64_t b1_of(std::int64_t k) {
  return static_cast<std::int64_t>(mix(k) >> 1);
}
std::int64_t b2_of(std::int64_t k) {
  return static_cast<std::int64_t>(mix(k ^ 0x5bd1e995) >> 1);
}

/// f(begin, end) over [0, n) in `threads` ranges at once.
template <typename F>
void parallel_rows(std::size_t n, std::size_t threads, const F& f) {
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { f(n * t / threads, n * (t + 1) / threads); });
  }
  for (auto& th : pool) th.join();
}

/// A table of INT64 columns from host vectors, in tier `to` (copies to the device are on the
/// buffer resource's stream).
Table make_table(const std::vector<std::vector<std::int64_t>>& cols, std::vector<std::string> names,
                 MemoryType to, BufferResource& br) {
  std::vector<Column> out;
  for (const auto& v : cols) {
    auto b = br.allocate(to, v.size() * 8, br.stream());
    if (!v.empty() && to == MemoryType::HOST) {
      std::memcpy(b->data(), v.data(), v.size() * 8);
    } else if (!v.empty()) {
      cuda::memcpy_async(b->data(), v.data(), v.size() * 8, br.stream());
    }
    out.emplace_back(TypeId::INT64, v.size(), std::move(b));
  }
  return Table(std::move(out), std::move(names));
}

/// This rank's rows of both sides, any range of them made on demand (the same values whatever
/// the ranges), and what the join must give for them.
class Rows {
 public:
  Rows(const Options& o, Rank rank, int nranks)
      : o_{o},
        rank_{static_cast<std::uint64_t>(rank)},
        total_build_{static_cast<std::uint64_t>(o.build) * static_cast<std::uint64_t>(nranks)},
        threads_{std::max<std::size_t>(
            1, std::thread::hardware_concurrency() / static_cast<unsigned>(nranks))} {}

  /// Build rows [begin, end): keys rank * build + i, payloads functions of the key.
  Table build(std::size_t begin, std::size_t end, MemoryType to, BufferResource& br) const {
    std::vector<std::vector<std::int64_t>> c(3, std::vector<std::int64_t>(end - begin));
    parallel_rows(end - begin, threads_, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) {
        c[0][i] = static_cast<std::int64_t>(rank_ * o_.build + begin + i);
        c[1][i] = b1_of(c[0][i]);
        c[2][i] = b2_of(c[0][i]);
      }
    });
    return make_table(c, {"k", "b1", "b2"}, to, br);
  }
  /// Probe rows [begin, end); with `joined`, each with its build row's columns after it (what
  /// an inner or left join gives for it).
  Table probe(std::size_t begin, std::size_t end, MemoryType to, BufferResource& br,
              bool joined = false) const {
    std::vector<std::vector<std::int64_t>> c(joined ? 6 : 3,
                                             std::vector<std::int64_t>(end - begin));
    const auto hot = static_cast<std::uint64_t>(o_.skew * 1e9);
    parallel_rows(end - begin, threads_, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) {
        const std::uint64_t h = mix((rank_ << 40) ^ (begin + i));
        c[0][i] = h % 1000000000 < hot ? 0 : static_cast<std::int64_t>((h >> 20) % total_build_);
        c[1][i] = static_cast<std::int64_t>(begin + i);
        c[2][i] = static_cast<std::int64_t>(mix(h) >> 1);
        if (joined) {
          c[3][i] = c[0][i];
          c[4][i] = b1_of(c[0][i]);
          c[5][i] = b2_of(c[0][i]);
        }
      }
    });
    if (!joined) return make_table(c, {"k", "p1", "p2"}, to, br);
    return make_table(c, {"k", "p1", "p2", "k_right", "b1", "b2"}, to, br);
  }
  /// The checksum of this rank's probe rows as the join gives them (every one matches), made
  /// want_rows at a time.
  TableChecksum want(BufferResource& br) const {
    TableChecksum sum;
    if (o_.type == JoinType::left_anti) return sum;
    const bool joined = o_.type != JoinType::left_semi;
    for (std::size_t at = 0; at < o_.probe; at += want_rows) {
      const std::size_t end = std::min(o_.probe, at + want_rows);
      sum += checksum(probe(at, end, MemoryType::HOST, br, joined).view());
    }
    return sum;
  }
  /// A source of one side's rows in pieces of about `piece` bytes, made into `to` as asked for.
  ops::TableSource pieces(bool build_side, std::size_t piece, MemoryType to,
                          BufferResource& br) const {
    const std::size_t rows = std::max<std::size_t>(1, piece / 24);  // 3 int64 columns
    const std::size_t n = build_side ? o_.build : o_.probe;
    struct Cursor {
      std::size_t at{0};
      bool first{true};  // (a side without rows is one piece without rows)
    };
    auto cur = std::make_shared<Cursor>();
    return [this, &br, build_side, rows, n, to, cur]() -> std::optional<Table> {
      if (!cur->first && cur->at >= n) return std::nullopt;
      cur->first = false;
      const std::size_t end = std::min(n, cur->at + rows);
      Table t = build_side ? build(cur->at, end, to, br) : probe(cur->at, end, to, br);
      cur->at = end;
      return t;
    };
  }

 private:
  static constexpr std::size_t want_rows = std::size_t{1} << 20;
  const Options& o_;
  std::uint64_t rank_;
  std::uint64_t total_build_;
  std::size_t threads_;
};

int run_rank(const Options& o, Communicator& comm, BufferResource& br, std::mutex& print) {
  if (o.gpu && !br.is_live(MemoryType::DEVICE)) {
    throw std::runtime_error("--gpu: no GPU here, or spillway was built without CUDA");
  }
  const int n = comm.nranks();
  const Rows rows(o, comm.rank(), n);
  TableChecksum want;
  {  // (the oracle's memory is not the join's: a resource of its own, without limits)
    BufferResourceConfig c;
    c.use_gpu = false;
    BufferResource oracle(c);
    want = rows.want(oracle);
  }
  // Whole tables are made once, in host memory (then copied to the device before each run
  // with --gpu); pieces are made as the join asks for them, so no side is ever whole.
  std::optional<Table> probe_table, build_table;
  if (o.piece_mib <= 0) {
    probe_table = rows.probe(0, o.probe, MemoryType::HOST, br);
    build_table = rows.build(0, o.build, MemoryType::HOST, br);
  }
  const std::uint64_t total_build = static_cast<std::uint64_t>(o.build) * n;
  const std::uint64_t total_probe = static_cast<std::uint64_t>(o.probe) * n;
  const double input_bytes = double(total_build + total_probe) * 24;
  const std::size_t per_partition = o.gpu ? 512 * MiB : 2 * MiB;  // of build side
  const std::uint32_t partitions =
      o.partitions != 0 ? o.partitions
                        : static_cast<std::uint32_t>(std::max<std::uint64_t>(
                              static_cast<std::uint64_t>(n), total_build * 24 / per_partition + 1));
  const std::vector<std::size_t> keys{0};
  const auto say = [&](const std::string& line) {
    if (comm.rank() != 0) return;
    std::lock_guard lock(print);
    std::cout << line << std::endl;
  };
  {
    std::ostringstream h;
    h << "spillway-bench-join: -C " << o.comm << " | nranks " << n << " | "
      << (o.gpu ? "GPU" : "CPU") << " | " << to_string(o.type) << " join | build " << total_build
      << " rows, probe " << total_probe << " rows (int64 key, 2 int64 payloads a side; "
      << format_bytes(input_bytes) << " in all) | skew " << o.skew
      << "\nplan: shuffle join (both sides hashed into " << partitions << " partitions, "
      << format_bytes(double(total_build) * 24 / partitions)
      << " of build side each; each pair joined as it arrives"
      << (o.piece_mib > 0 ? "; input made in pieces of " + std::to_string(o.piece_mib) +
                                " MiB as the join asks for them (timed)" +
                                (o.gpu ? ", each copied to the device" : "")
                          : std::string())
      << ")\nMemory: " << br.usage();
    say(h.str());
  }
  ops::HashJoinOptions jo;
  jo.type = o.type;
  jo.partitions = partitions;
  std::vector<double> times;
  bool valid = true;
  for (int run = 0; run < o.warmups + o.runs; ++run) {
    comm.barrier();
    for (MemoryType t : all_memory_types) br.reset_peak(t);
    TableChecksum got;
    double check_seconds = 0;
    const auto check = [&](std::uint32_t, Table&& t) {
      const auto c0 = Clock::now();
      got += o.gpu ? gpu::checksum(t.view(), br, br.stream()) : checksum(t.view());
      check_seconds += std::chrono::duration<double>(Clock::now() - c0).count();
    };
    std::optional<Clock::time_point> t0;
    if (o.piece_mib > 0) {  // pieces made as the join asks for them, timed
      const MemoryType to = o.gpu ? MemoryType::DEVICE : MemoryType::HOST;
      const auto piece = static_cast<std::size_t>(o.piece_mib) * MiB;
      t0 = Clock::now();
      ops::hash_join(comm, br, rows.pieces(false, piece, to, br), keys,
                     rows.pieces(true, piece, to, br), keys, jo, check);
    } else if (o.gpu) {  // the join consumes device copies, made before the clock starts
      Table probe = copy_table(*probe_table, MemoryType::DEVICE, br, br.stream());
      Table build = copy_table(*build_table, MemoryType::DEVICE, br, br.stream());
      br.stream().synchronize();
      comm.barrier();
      t0 = Clock::now();
      ops::hash_join(comm, br, std::move(probe), keys, std::move(build), keys, jo, check);
    } else {
      t0 = Clock::now();
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
    std::ostringstream line;
    line << "elapsed: " << slowest << " sec | " << double(total_build + total_probe) / slowest / 1e6
         << " M input rows/s | " << input_bytes / slowest / 1e9 << " GB/s of input | output "
         << all[0] << " rows" << (warm ? " (warmup run)" : "") << " | "
         << (ok ? "validated" : "INVALID: want " + std::to_string(all[2]) + " rows");
    say(line.str());
  }
  std::ostringstream m;
  const double med = cli::median(times);
  m << "medians: " << med << " sec | " << double(total_build + total_probe) / med / 1e6
    << " M input rows/s | " << input_bytes / med / 1e9 << " GB/s of input | peak of rank 0:";
  for (MemoryType t : all_memory_types) {
    if (!br.is_live(t)) continue;
    m << " " << to_string(t) << " " << format_bytes(double(br.peak(t))) << "/"
      << (br.limit(t) == unlimited_bytes ? std::string("unlimited")
                                         : format_bytes(double(br.limit(t))));
  }
  say(m.str());
  if (comm.rank() == 0 && br.statistics().get("spill-host-to-disk")) {
    say(" - spilled HOST -> DISK: " +
        format_bytes(br.statistics().get("spill-host-to-disk")->bytes) + " (rank 0, all runs)");
  }
  return valid ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    if (o.comm == "mpi" && !mpi::is_compiled()) {
      std::cerr << "spillway-bench-join: built without MPI\n";
      return 2;
    }
    auto cfg = BufferResourceConfig::from_options();
    cfg.use_gpu = o.gpu;
    if (o.host_limit_mib > 0) {
      cfg.limits[index(MemoryType::HOST)] =
          Limit::bytes(static_cast<std::size_t>(o.host_limit_mib) * MiB);
    }
    if (o.device_limit_mib > 0) {
      cfg.limits[index(MemoryType::DEVICE)] =
          Limit::bytes(static_cast<std::size_t>(o.device_limit_mib) * MiB);
    }
    std::mutex print;
    LaunchOptions launch;
    launch.place_on_gpu = o.gpu;
    launch.program = "spillway-bench-join";
    return run_ranks(
        parse_rank_kind(o.comm), o.ranks, cfg,
        [&](Communicator& comm, BufferResource& br) { return run_rank(o, comm, br, print); },
        launch);
  } catch (const std::exception& e) {
    std::cerr << "spillway-bench-join: " << e.what() << "\n";
    return 1;
  }
}
