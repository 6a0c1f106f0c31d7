#include <spillway/comm/launch.hpp>

#include <spillway/comm/bootstrap.hpp>
#include <spillway/comm/local.hpp>
#include <spillway/comm/mpi.hpp>
#include <spillway/comm/single.hpp>
#include <spillway/comm/transfer.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>

#include "core/detail/enum_names.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include <stdlib.h>

namespace spillway {

RankKind parse_rank_kind(const std::string& text) {
  static constexpr detail::EnumNames<RankKind, 4> names{{{"single", RankKind::single},
                                                         {"local", RankKind::local},
                                                         {"mpi", RankKind::mpi},
                                                         {"transfer", RankKind::transfer}}};
  return detail::parse_enum(text, names, "kind of ranks");
}

int ranks_per_gpu(RankKind kind, int nranks) {
  const int gpus = cuda::is_available() ? cuda::device_count() : 0;
  if (gpus <= 0) return 1;
  int here = kind == RankKind::local || kind == RankKind::transfer ? nranks : 1;
  if (kind == RankKind::transfer) {
    if (const auto launch = bootstrap::from_environment()) here = launch->nranks;
  }
  if (kind == RankKind::mpi) {
    if (const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) {
      here = std::max(1, std::atoi(local_size));
    }
    if (const auto launch = bootstrap::from_environment()) here = launch->nranks;
  }
  return (here + gpus - 1) / gpus;
}

BufferResourceConfig shared_gpu_config(BufferResourceConfig config, int sharers) {
  if (sharers > 1 && config.device_pool_size.is_unlimited() &&
      config.limits[index(MemoryType::DEVICE)].is_unlimited()) {
    config.device_pool_size = Limit::fraction(0.9 / sharers);
  }
  return config;
}

namespace {

void report(const LaunchOptions& o, Rank r, const std::string& what) {
  if (o.on_error) {
    o.on_error(r, what);
    return;
  }
  static std::mutex m;
  std::lock_guard lock(m);
  std::cerr << o.program << ": rank " << r << ": " << what << "\n";
}

int run_threads(RankKind kind, int nranks, const BufferResourceConfig& config,
                const RankFunction& fn, const LaunchOptions& o) {
  std::vector<std::unique_ptr<Communicator>> comms;
  if (kind == RankKind::single) {
    comms.push_back(make_single_communicator());
  } else {
    comms = LocalCommunicator::create(nranks);
  }
  const BufferResourceConfig shared = shared_gpu_config(config, ranks_per_gpu(kind, nranks));
  std::vector<int> rc(comms.size(), 0);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < comms.size(); ++i) {
    threads.emplace_back([&, i] {
      const Rank r = static_cast<Rank>(i);
      try {
        if (o.place_on_gpu) {
          if (const int dev = LocalCommunicator::device_of(r); dev >= 0) cuda::set_device(dev);
        }
        BufferResource br(shared);
        rc[i] = fn(*comms[i], br);
        comms[i].reset();  // leaves the group while `br` is alive
      } catch (const std::exception& e) {
        report(o, r, e.what());
        rc[i] = 1;
        comms[i].reset();  // the peers fail instead of waiting for this rank
      }
    });
  }
  for (auto& t : threads) t.join();
  return *std::max_element(rc.begin(), rc.end());
}

int run_mpi(const BufferResourceConfig& config, const RankFunction& fn, const LaunchOptions& o) {
  SPILLWAY_EXPECTS(mpi::is_compiled(), "ranks of kind mpi: spillway was built without MPI");
  mpi::init(nullptr, nullptr);
  int rc = 0;
  {
    // In this order so that the communicator goes before the resource it uses.
    std::unique_ptr<BufferResource> br;
    std::unique_ptr<Communicator> comm;
    try {
      if (const int dev = bootstrap::device_for_rank(mpi::world_rank());
          dev >= 0 && o.place_on_gpu) {
        cuda::set_device(dev);
      }
      br = std::make_unique<BufferResource>(
          shared_gpu_config(config, ranks_per_gpu(RankKind::mpi, 0)));
      comm = make_mpi_communicator(*br);
      rc = fn(*comm, *br);
    } catch (const std::exception& e) {
      report(o, mpi::world_rank(), e.what());
      mpi::abort(1);  // the other ranks may be waiting on this one
    }
  }
  mpi::finalize();
  return rc;
}

/// One rank of `launch`: its GPU, resource and communicator. A rank that fails says so in the
/// rendezvous directory, so that peers still meeting there fail at once.
int run_transfer_rank(const LaunchInfo& launch, int device, const BufferResourceConfig& config,
                      const RankFunction& fn, const LaunchOptions& o) {
  std::unique_ptr<Communicator> comm;
  try {
    if (device >= 0 && o.place_on_gpu) cuda::set_device(device);
    BufferResource br(config);
    comm = make_transfer_communicator(br, launch);
    const int rc = fn(*comm, br);
    comm.reset();  // leaves while `br` is alive
    return rc;
  } catch (const std::exception& e) {
    report(o, launch.rank, e.what());
    comm.reset();  // the peers see its engine go
    try {
      bootstrap::announce_exit(launch, launch.rank, "with an error");
    } catch (const std::exception&) {
      // The directory is gone; the peers time out instead.
    }
    return 1;
  }
}

int run_transfer(int nranks, const BufferResourceConfig& config, const RankFunction& fn,
                 const LaunchOptions& o) {
  const BufferResourceConfig shared =
      shared_gpu_config(config, ranks_per_gpu(RankKind::transfer, nranks));
  if (const auto launch = bootstrap::from_environment()) {
    return run_transfer_rank(*launch, bootstrap::device_for_rank(launch->rank), shared, fn, o);
  }
  SPILLWAY_EXPECTS(std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr,
                   "ranks of kind transfer: under mpirun each process would run all ranks; "
                   "start the processes with spillway-run instead");
  SPILLWAY_EXPECTS(nranks >= 1,
                   "run_ranks: " + std::to_string(nranks) + " transfer ranks (at least 1)");
  const char* tmp = std::getenv("TMPDIR");
  std::string dir =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/spillway-transfer-XXXXXX";
  SPILLWAY_EXPECTS(::mkdtemp(dir.data()) != nullptr,
                   "run_ranks: cannot make a rendezvous directory under " + dir, io_error);
  std::vector<int> rc(static_cast<std::size_t>(nranks), 0);
  std::vector<std::thread> threads;
  for (Rank r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      const LaunchInfo launch{r, nranks, -1, dir, "threads"};
      rc[static_cast<std::size_t>(r)] =
          run_transfer_rank(launch, LocalCommunicator::device_of(r), shared, fn, o);
    });
  }
  for (auto& t : threads) t.join();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return *std::max_element(rc.begin(), rc.end());
}

}  // namespace

int run_ranks(RankKind kind, int nranks, const BufferResourceConfig& config, const RankFunction& fn,
              const LaunchOptions& options) {
  SPILLWAY_EXPECTS(static_cast<bool>(fn), "run_ranks: no rank function");
  if (kind == RankKind::mpi) return run_mpi(config, fn, options);
  if (kind == RankKind::transfer) return run_transfer(nranks, config, fn, options);
  SPILLWAY_EXPECTS(kind == RankKind::single || nranks >= 1,
                   "run_ranks: " + std::to_string(nranks) + " local ranks (at least 1)");
  return run_threads(kind, nranks, config, fn, options);
}

}  // namespace spillway
