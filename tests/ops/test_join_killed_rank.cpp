// A rank of an MPI job killed with SIGKILL in the middle of a distributed hash join, its input
// half given: the surviving ranks' join fails with a comm_error within the communicator's
// timeout instead of hanging, and once their buffer resources are gone their spill
// directories are too (a host limit below the data makes them spill to disk first). Run
// under mpirun with orte_enable_recovery=1 and orte_abort_on_non_zero_status=0 (else OpenMPI
// ends the whole job itself); ctest checks for one "PASS" line per surviving rank and no
// "FAIL". The first argument is the host limit in MiB (default 4: at 6 a slow rank 2 under
// ASan once left rank 0 holding 4.9 MiB, under the limit, and it never spilled); at 2 the memory
// held by sends to the dead rank runs out before they time out, and the error must still be the
// comm_error that names the peer, not an out_of_memory.
#include <spillway/comm/mpi.hpp>
#include <spillway/core/error.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/ops/hash_join.hpp>
#include <spillway/table/generator.hpp>

#include <mpi.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

using namespace spillway;

int main(int argc, char** argv) {
  mpi::init(&argc, &argv);
  // Each rank's own spill directory.
  const std::filesystem::path mine =
      std::filesystem::temp_directory_path() / ("spillway-killed-join-" + std::to_string(getpid()));
  std::filesystem::create_directories(mine);
  int rank = -1;
  int killed_dir = -1;  // the pid that names rank 1's directory
  const char* verdict = "FAIL: no error";
  {
    auto cfg = BufferResourceConfig::from_options();
    cfg.use_gpu = false;
    const std::size_t limit_mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 4;
    cfg.limits[index(MemoryType::HOST)] = Limit::bytes(limit_mib << 20);
    cfg.spill_dir = mine.string();
    BufferResource br(cfg);
    auto comm = make_mpi_communicator(br);
    comm->set_timeout(std::chrono::seconds(3));
    rank = comm->rank();
    // Every rank's pid, so that rank 0 can remove the killed rank's directory at the end.
    const int pid = getpid();
    std::vector<int> pids(static_cast<std::size_t>(comm->nranks()));
    MPI_Allgather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, MPI_COMM_WORLD);
    killed_dir = pids.size() > 1 ? pids[1] : -1;
    comm->barrier();
    // 8 pieces a side of 20000 rows (0.46 MiB each): 7.3 MiB per rank, over the 4 MiB limit.
    // Rank 1 dies when asked for its fifth left piece.
    int pieces = 0;
    const auto source = [&](std::uint64_t seed) -> ops::TableSource {
      return [&, seed, n = 0]() mutable -> std::optional<Table> {
        if (n == 8) return std::nullopt;
        if (comm->rank() == 1 && seed == 1 && n == 4) std::raise(SIGKILL);
        ++pieces;
        RandomTableOptions o;
        o.rows = 20000;
        o.types = {TypeId::INT64, TypeId::INT64, TypeId::FLOAT64};
        o.key_cardinality = 100000;
        o.seed = seed * 1000 + static_cast<std::uint64_t>(comm->rank()) * 10 +
                 static_cast<std::uint64_t>(n++);
        return random_table(o, br);
      };
    };
    ops::HashJoinOptions jo;
    jo.partitions = 12;
    const std::vector<std::size_t> keys{0};
    const auto t0 = std::chrono::steady_clock::now();
    try {
      ops::hash_join(*comm, br, source(1), keys, source(2), keys, jo,
                     [](std::uint32_t, Table&&) {});
    } catch (const comm_error& e) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      verdict =
          s < 3.0 + 10.0 ? "PASS: comm_error within the timeout" : "FAIL: the error came late";
      std::printf("rank %d: join error after %.2f s (%d pieces made): %s\n", rank, s, pieces,
                  e.what());
    } catch (const std::exception& e) {
      verdict = "FAIL: an error that is not a comm_error";
      std::printf("rank %d: %s\n", rank, e.what());
    }
    const bool spilled = br.statistics().get("spill-host-to-disk").has_value();
    if (verdict[0] == 'P' && !spilled) verdict = "FAIL: the join never spilled to disk";
    comm.reset();  // before the resource it uses
  }
  // The resource is gone: its private spill directory with it.
  if (verdict[0] == 'P' && !std::filesystem::is_empty(mine)) {
    verdict = "FAIL: a spill directory outlived its resource";
  }
  std::printf("rank %d: %s\n", rank, verdict);
  std::fflush(stdout);
  std::error_code ec;
  std::filesystem::remove_all(mine, ec);
  // The killed rank could not remove its own (a survivor takes it, none left behind).
  if (rank == 0 && killed_dir > 0) {
    std::filesystem::remove_all(std::filesystem::temp_directory_path() /
                                    ("spillway-killed-join-" + std::to_string(killed_dir)),
                                ec);
  }
  std::_Exit(0);  // not MPI_Finalize: it would wait for the dead rank
}
