// spillway-bench-comm: an all-to-all exchange of fixed-size messages between the ranks of a
// communicator, timed per run, next to the exchange a user would write without spillway,
// measured in the same run on the same bytes: MPI_Alltoallv for `-C mpi` on host memory, NCCL
// (ncclSend/ncclRecv in a group) for device memory.
//
// Every rank sends `-n` messages of `-s` bytes to every other rank. Local throughput: the
// bytes this rank sent over its time. Global throughput: the bytes all ranks sent over the
// slowest rank's time (one figure for the whole exchange).
#include <spillway/comm/bootstrap.hpp>
#include <spillway/comm/collectives.hpp>
#include <spillway/comm/launch.hpp>
#include <spillway/comm/local.hpp>
#include <spillway/comm/mpi.hpp>
#include <spillway/comm/single.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/buffer_resource.hpp>

#if SPILLWAY_HAS_MPI
#include <mpi.h>
#include <spillway/comm/mpi_world.hpp>

#include "alltoallv.hpp"
#endif
#if SPILLWAY_BENCH_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

#include <algorithm>
#include <array>
#include <barrier>
#include <chrono>
#include <cstring>
#include <iostream>
#include <mutex>
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
  std::size_t size{MiB};
  int ops{1};
  int runs{5};
  int warmups{2};
  MemoryType tier{MemoryType::HOST};
  bool tier_given{false};
  bool baseline{true};
};

[[noreturn]] void usage(const std::string& error) {
  cli::print_usage(
      "spillway-bench-comm", error,
      "usage: spillway-bench-comm [options]\n"
      "  -C local|mpi|single|transfer  communicator (default local; mpi: run under mpirun;\n"
      "                       transfer: under spillway-run, else --ranks threads)\n"
      "  --ranks N            ranks of -C local and transfer (default 2)\n"
      "  -s SIZE              bytes per message, e.g. 64KiB, 256MiB (default 1MiB)\n"
      "  -n N                 messages per peer and run, all in flight (default 1)\n"
      "  -r N                 timed runs (default 5)\n"
      "  -w N                 warm-up runs (default 2)\n"
      "  -t device|pinned|host  memory of the messages (default device with a GPU, else host)\n"
      "  --no-baseline        skip MPI_Alltoallv / NCCL\n"
      "  -h                   this help\n");
}

Options parse(int argc, char** argv) {
  Options o;
  auto value = [&](int& i) { return cli::value(argc, argv, i, usage); };
  auto number = [&](int& i, int min) {
    return static_cast<int>(cli::number(argc, argv, i, min, 1 << 20, usage));
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage("");
    } else if (a == "-C") {
      o.comm = cli::rank_kind(argc, argv, i, usage);
    } else if (a == "--ranks") {
      o.ranks = number(i, 1);
    } else if (a == "-s") {
      const std::string v = value(i);
      try {
        o.size = parse_bytes(v, "-s");
      } catch (const std::exception& e) {
        usage(e.what());
      }
    } else if (a == "-n") {
      o.ops = number(i, 1);
    } else if (a == "-r") {
      o.runs = number(i, 1);
    } else if (a == "-w") {
      o.warmups = number(i, 0);
    } else if (a == "-t") {
      const std::string v = value(i);
      o.tier_given = true;
      if (v == "device") {
        o.tier = MemoryType::DEVICE;
      } else if (v == "pinned") {
        o.tier = MemoryType::PINNED_HOST;
      } else if (v == "host") {
        o.tier = MemoryType::HOST;
      } else {
        usage("-t takes device, pinned or host, got '" + v + "'");
      }
    } else if (a == "--no-baseline") {
      o.baseline = false;
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  if (o.comm == "single") o.ranks = 1;
  if (!o.tier_given && cuda::is_available()) o.tier = MemoryType::DEVICE;
  return o;
}

std::string gib_s(double bytes, double seconds) {
  std::ostringstream os;
  os.precision(2);
  os << std::fixed << bytes / seconds / double(GiB) << " GiB/s";
  return os.str();
}

/// One byte of a buffer of any memory tier.
unsigned char byte_at(const Buffer& b, std::size_t i, BufferResource& br) {
  unsigned char v = 0;
  if (is_host_accessible(b.mem_type())) return static_cast<unsigned char>(b.data()[i]);
  cuda::memcpy_async(&v, b.data() + i, 1, br.stream());
  br.stream().synchronize();
  return v;
}

/// What a rank reports to the others after each run: the slowest rank's time.
using MaxOverRanks = std::function<double(double)>;

/// The exchange with spillway's communicator; returns this rank's and the slowest rank's
/// time per timed run. Contents are checked after the first run.
std::pair<std::vector<double>, std::vector<double>> exchange(Communicator& comm, BufferResource& br,
                                                             const Options& o,
                                                             const MaxOverRanks& max_over) {
  const Rank me = comm.rank();
  const int n = comm.nranks();
  std::vector<std::unique_ptr<Buffer>> out, in;
  for (Rank p = 0; p < n; ++p) {
    if (p == me) continue;
    for (int k = 0; k < o.ops; ++k) {
      auto host = br.allocate(MemoryType::HOST, o.size);
      std::memset(host->data(), (me * 31 + p * 7 + k) & 0xFF, o.size);
      out.push_back(o.tier == MemoryType::HOST ? std::move(host)
                                               : br.move(std::move(host), o.tier, br.stream()));
      in.push_back(br.allocate(o.tier, o.size, br.stream()));
    }
  }
  br.stream().synchronize();
  std::vector<double> mine, slowest;
  for (int run = 0; run < o.warmups + o.runs; ++run) {
    std::vector<std::unique_ptr<Future>> sends, recvs;
    comm.barrier();
    const auto t0 = Clock::now();
    std::size_t i = 0;
    for (Rank p = 0; p < n; ++p) {
      if (p == me) continue;
      for (int k = 0; k < o.ops; ++k, ++i) {
        recvs.push_back(comm.recv(p, Tag{1, static_cast<std::uint8_t>(k % 256)}, std::move(in[i])));
      }
    }
    i = 0;
    for (Rank p = 0; p < n; ++p) {
      if (p == me) continue;
      for (int k = 0; k < o.ops; ++k, ++i) {
        sends.push_back(
            comm.send(std::move(out[i]), p, Tag{1, static_cast<std::uint8_t>(k % 256)}));
      }
    }
    for (auto& f : recvs) comm.wait(*f);
    for (auto& f : sends) comm.wait(*f);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    for (std::size_t j = 0; j < sends.size(); ++j) {
      out[j] = comm.release(std::move(sends[j]));
      in[j] = comm.release(std::move(recvs[j]));
    }
    if (run == 0 && o.size > 0) {  // check one byte at each end of every message
      i = 0;
      for (Rank p = 0; p < n; ++p) {
        if (p == me) continue;
        for (int k = 0; k < o.ops; ++k, ++i) {
          const std::array<unsigned char, 2> b{byte_at(*in[i], 0, br),
                                               byte_at(*in[i], o.size - 1, br)};
          const auto want = static_cast<unsigned char>((p * 31 + me * 7 + k) & 0xFF);
          if (b[0] != want || b[1] != want) {
            throw std::runtime_error("message " + std::to_string(k) + " from rank " +
                                     std::to_string(p) + " arrived corrupted");
          }
        }
      }
    }
    const double worst = max_over(s);
    if (run >= o.warmups) {
      mine.push_back(s);
      slowest.push_back(worst);
    }
  }
  return {mine, slowest};
}

/// Prints the runs and the medians (rank 0 prints the global figures).
void report(const char* what, const Options& o, int nranks, const std::vector<double>& mine,
            const std::vector<double>& slowest, bool print) {
  const double bytes = double(o.size) * o.ops * (nranks - 1);
  if (!print) return;
  for (std::size_t r = 0; r < mine.size(); ++r) {
    std::cout << what << " elapsed: " << slowest[r]
              << " s | local throughput: " << gib_s(bytes, mine[r])
              << " | global throughput: " << gib_s(bytes * nranks, slowest[r]) << "\n";
  }
  std::cout << what << " median: elapsed " << cli::median(slowest)
            << " s | local throughput: " << gib_s(bytes, cli::median(mine))
            << " | global throughput: " << gib_s(bytes * nranks, cli::median(slowest)) << "\n";
}

#if SPILLWAY_HAS_MPI
/// MPI_Alltoallv of the same bytes per peer (one block of ops x size, none to itself, as
/// above), host memory: the slowest rank's seconds per timed run; empty when the counts do
/// not fit MPI's int counts (the caller says so).
std::vector<double> alltoallv(const Options& o, int nranks, int me) {
  std::vector<std::size_t> counts(static_cast<std::size_t>(nranks),
                                  o.size * static_cast<std::size_t>(o.ops));
  counts[static_cast<std::size_t>(me)] = 0;
  tools::Alltoallv a2a(counts);
  std::vector<double> slowest;
  if (!a2a.fits()) return slowest;
  for (int run = 0; run < o.warmups + o.runs; ++run) {
    const double s = a2a.run();
    if (run >= o.warmups) slowest.push_back(s);
  }
  return slowest;
}
#endif

#if SPILLWAY_BENCH_NCCL
#define NCCL_TRY(call)                                                              \
  do {                                                                              \
    if (const ncclResult_t r_ = (call); r_ != ncclSuccess) {                        \
      throw std::runtime_error(std::string(#call) + ": " + ncclGetErrorString(r_)); \
    }                                                                               \
  } while (0)

/// ncclSend/ncclRecv of the same messages in one group, device memory; returns the rank's
/// time per run (the caller takes the max over ranks).
std::vector<double> nccl_exchange(ncclComm_t nc, const Options& o, int nranks, int me,
                                  const std::function<void()>& barrier) {
  cudaStream_t st = nullptr;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  const std::size_t count = o.size * static_cast<std::size_t>(o.ops) * (nranks - 1);
  void* send = nullptr;
  void* recv = nullptr;
  if (cudaMalloc(&send, std::max<std::size_t>(count, 1)) != cudaSuccess ||
      cudaMalloc(&recv, std::max<std::size_t>(count, 1)) != cudaSuccess) {
    throw std::runtime_error("cudaMalloc for the NCCL baseline failed");
  }
  cudaMemset(send, 1, std::max<std::size_t>(count, 1));
  std::vector<double> times;
  for (int run = 0; run < o.warmups + o.runs; ++run) {
    barrier();
    const auto t0 = Clock::now();
    NCCL_TRY(ncclGroupStart());
    std::size_t at = 0;
    for (int p = 0; p < nranks; ++p) {
      if (p == me) continue;
      for (int k = 0; k < o.ops; ++k, at += o.size) {
        NCCL_TRY(ncclSend(static_cast<char*>(send) + at, o.size, ncclChar, p, nc, st));
        NCCL_TRY(ncclRecv(static_cast<char*>(recv) + at, o.size, ncclChar, p, nc, st));
      }
    }
    NCCL_TRY(ncclGroupEnd());
    cudaStreamSynchronize(st);
    if (run >= o.warmups) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  cudaFree(send);
  cudaFree(recv);
  cudaStreamDestroy(st);
  return times;
}
#endif

void print_ratio(const char* peer, const std::vector<double>& spillway,
                 const std::vector<double>& baseline) {
  if (baseline.empty()) return;
  std::cout << "ratio spillway / " << peer
            << " (global throughput, medians): " << cli::median(baseline) / cli::median(spillway)
            << "\n";
}

#if SPILLWAY_HAS_MPI
/// Times MPI_Alltoallv of the same bytes (collective) and prints it beside spillway's
/// `slowest` on rank 0.
void alltoallv_beside(const Options& o, int nranks, int me, const std::vector<double>& slowest) {
  const auto base = alltoallv(o, nranks, me);
  if (me != 0) return;
  if (base.empty()) {
    std::cout << "MPI_Alltoallv: skipped (these counts do not fit MPI's int counts)\n";
    return;
  }
  report("MPI_Alltoallv", o, nranks, base, base, true);
  print_ratio("MPI_Alltoallv", slowest, base);
}
#endif

BufferResourceConfig rank_config(const Options& o) {
  auto c = BufferResourceConfig::from_options();
  c.use_gpu = o.tier != MemoryType::HOST;
  return c;
}

int run_local(const Options& o) {
  std::vector<double> worst(static_cast<std::size_t>(o.ranks));
  std::barrier sync(o.ranks);
  std::mutex m;
  std::vector<std::vector<double>> nccl_times(static_cast<std::size_t>(o.ranks));
  const int gpus = cuda::device_count();
  const bool nccl = o.baseline && o.tier == MemoryType::DEVICE && o.ranks > 1 && o.ranks <= gpus;
#if SPILLWAY_BENCH_NCCL
  std::vector<ncclComm_t> ncomms(static_cast<std::size_t>(o.ranks));
  if (nccl) {
    std::vector<int> devs(static_cast<std::size_t>(o.ranks));
    for (int r = 0; r < o.ranks; ++r) devs[static_cast<std::size_t>(r)] = r;
    NCCL_TRY(ncclCommInitAll(ncomms.data(), o.ranks, devs.data()));
  }
#endif
  std::vector<std::string> errors;
  std::vector<double> mine0, slowest0;
  LaunchOptions launch;
  launch.on_error = [&](Rank r, const std::string& what) {
    std::lock_guard lock(m);
    errors.push_back("rank " + std::to_string(r) + ": " + what);
  };
  run_ranks(
      RankKind::local, o.ranks, rank_config(o),
      [&](Communicator& comm, BufferResource& br) {
        const Rank r = comm.rank();
        auto max_over = [&](double s) {
          worst[static_cast<std::size_t>(r)] = s;
          sync.arrive_and_wait();
          const double w = *std::max_element(worst.begin(), worst.end());
          sync.arrive_and_wait();
          return w;
        };
        auto [mine, slowest] = exchange(comm, br, o, max_over);
        if (r == 0) {
          mine0 = mine;
          slowest0 = slowest;
        }
#if SPILLWAY_BENCH_NCCL
        if (nccl) {
          nccl_times[static_cast<std::size_t>(r)] = nccl_exchange(
              ncomms[static_cast<std::size_t>(r)], o, o.ranks, r, [&] { sync.arrive_and_wait(); });
        }
#endif
        return 0;
      },
      launch);
  for (const auto& e : errors) std::cerr << "spillway-bench-comm: " << e << "\n";
  if (!errors.empty()) return 1;
  report("spillway", o, o.ranks, mine0, slowest0, true);
  if (nccl) {
    std::vector<double> slowest(static_cast<std::size_t>(o.runs), 0);
    for (const auto& t : nccl_times) {
      for (std::size_t i = 0; i < t.size(); ++i) slowest[i] = std::max(slowest[i], t[i]);
    }
    report("nccl", o, o.ranks, nccl_times[0], slowest, true);
    print_ratio("NCCL", slowest0, slowest);
  } else if (o.baseline) {
    std::cout << "baseline: none for -C local on " << to_string(o.tier)
              << " (NCCL needs device memory and one GPU per rank; MPI_Alltoallv needs -C mpi)\n";
  }
#if SPILLWAY_BENCH_NCCL
  for (auto c : ncomms) {
    if (c != nullptr) ncclCommDestroy(c);
  }
#endif
  return 0;
}

int run_mpi(const Options& o) {
#if SPILLWAY_HAS_MPI
  LaunchOptions launch;
  launch.program = "spillway-bench-comm";
  // NCCL takes one GPU per rank ("invalid usage" for two ranks on one).
  const bool own_gpu = ranks_per_gpu(RankKind::mpi, 0) == 1;
  return run_ranks(
      RankKind::mpi, 0, rank_config(o),
      [&](Communicator& comm, BufferResource& br) {
        const int me = comm.rank();
        const int n = comm.nranks();
        auto max_over = [](double s) {
          MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, mpi::world());
          return s;
        };
        auto [mine, slowest] = exchange(comm, br, o, max_over);
        report("spillway", o, n, mine, slowest, me == 0);
        if (o.baseline && o.tier != MemoryType::DEVICE) alltoallv_beside(o, n, me, slowest);
        if (o.baseline && o.tier == MemoryType::DEVICE && !own_gpu && me == 0) {
          std::cout << "baseline: none (NCCL needs one GPU per rank; these ranks share one)\n";
        }
#if SPILLWAY_BENCH_NCCL
        if (o.baseline && o.tier == MemoryType::DEVICE && own_gpu) {
          ncclUniqueId id;
          if (me == 0) NCCL_TRY(ncclGetUniqueId(&id));
          MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, mpi::world());
          ncclComm_t nc = nullptr;
          NCCL_TRY(ncclCommInitRank(&nc, n, id, me));
          auto t = nccl_exchange(nc, o, n, me, [] { MPI_Barrier(mpi::world()); });
          std::vector<double> slow = t;
          MPI_Allreduce(MPI_IN_PLACE, slow.data(), static_cast<int>(slow.size()), MPI_DOUBLE,
                        MPI_MAX, mpi::world());
          if (me == 0) {
            report("nccl", o, n, t, slow, true);
            print_ratio("NCCL", slowest, slow);
          }
          ncclCommDestroy(nc);
        }
#endif
        return 0;
      },
      launch);
#else
  (void)o;
  std::cerr << "spillway-bench-comm: built without MPI\n";
  return 2;
#endif
}

/// Over the transfer communicator: between the processes of spillway-run (then MPI_Alltoallv
/// of the same bytes is the peer, in the same run, for host memory), else between threads.
int run_transfer(const Options& o) {
  LaunchOptions launch;
  launch.program = "spillway-bench-comm";
  const bool processes = bootstrap::from_environment().has_value();
  return run_ranks(
      RankKind::transfer, o.ranks, rank_config(o),
      [&](Communicator& comm, BufferResource& br) {
        const int me = comm.rank();
        const int n = comm.nranks();
        auto max_over = [&](double s) {
          constexpr OpID kTimes = 0xFFFE;  // the exchange uses op 1
          return allreduce(comm, kTimes, std::span(&s, 1), ReduceOp::max).at(0);
        };
        auto [mine, slowest] = exchange(comm, br, o, max_over);
        report("spillway", o, n, mine, slowest, me == 0);
        const bool a2a = o.baseline && processes && o.tier != MemoryType::DEVICE;
#if SPILLWAY_HAS_MPI
        if (a2a) {
          mpi::init(nullptr, nullptr);  // spillway-run's ranks join as MPI singletons
          alltoallv_beside(o, n, me, slowest);
          mpi::finalize();
        }
#endif
        if (o.baseline && me == 0 && (!a2a || !mpi::is_compiled())) {
          std::cout << "baseline: none here (MPI_Alltoallv needs host memory, processes of "
                       "spillway-run and a build with MPI)\n";
        }
        return 0;
      },
      launch);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.tier != MemoryType::HOST && !cuda::is_available()) {
    std::cerr << "spillway-bench-comm: -t " << to_string(o.tier) << " needs a GPU\n";
    return 2;
  }
  try {
    std::cout << "spillway-bench-comm: -C " << o.comm << " ranks "
              << (o.comm == "mpi" || bootstrap::from_environment() ? std::string("(of the launch)")
                                                                   : std::to_string(o.ranks))
              << " | message " << format_bytes(double(o.size)) << " x " << o.ops << " per peer | "
              << to_string(o.tier) << " | runs " << o.runs << " (+" << o.warmups << " warm-up)\n";
    if (o.comm == "transfer") return run_transfer(o);
    return o.comm == "mpi" ? run_mpi(o) : run_local(o);
  } catch (const std::exception& e) {
    std::cerr << "spillway-bench-comm: " << e.what() << "\n";
    return 1;
  }
}
