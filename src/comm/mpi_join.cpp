#include "comm/detail/mpi_join.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/options.hpp>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

namespace spillway::mpi::detail {

namespace {

/// Runs `call` (an MPI call that may block: connect, accept), and ends the process with a
/// message if it has not returned within `timeout`: MPI cannot interrupt it, and a peer that
/// died inside it would hang this rank forever. Only the join uses it, before any spill file
/// or GPU memory exists.
template <typename Call>
int within(std::chrono::milliseconds timeout, const std::string& what, Call&& call) {
  std::mutex m;
  std::condition_variable cv;
  bool returned = false;
  std::thread watchdog([&] {
    std::unique_lock lock(m);
    if (cv.wait_for(lock, timeout, [&] { return returned; })) return;
    std::fprintf(stderr, "%s did not return within %lld ms: a peer died while joining\n",
                 what.c_str(), static_cast<long long>(timeout.count()));
    std::_Exit(1);
  });
  const int rc = call();
  {
    std::lock_guard lock(m);
    returned = true;
  }
  cv.notify_all();
  watchdog.join();
  return rc;
}

}  // namespace

/// Under spillway-run every rank starts as an MPI singleton: rank 0 opens a port and publishes
/// its name; the others connect to it one at a time, in rank order (rank k waits until rank
/// k - 1 has said it joined: OpenMPI 4.1 can hang when two processes connect to one port at
/// once), each joining the group that has formed so far, which accepts once per missing rank;
/// a split makes the order explicit. OpenMPI needs the ompi-server that spillway-run starts.
/// Every wait honours the timeout: the group accepts rank k only once k has said it is
/// connecting, and a rank that exited (the launcher says so) fails the wait at once.
MPI_Comm join(const LaunchInfo& launch) {
  const auto timeout = options::get().comm_timeout;
  const std::string me = "[rank " + std::to_string(launch.rank) + "] spillway-run ";
  auto check = [&](int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    SPILLWAY_FAIL(me + "bootstrap: " + what +
                      " failed (OpenMPI needs the ompi-server that spillway-run starts)",
                  comm_error);
  };
  auto wait_for = [&](const std::string& key, int from) {
    try {
      return bootstrap::lookup(launch, key, from, timeout);
    } catch (const comm_error& e) {
      SPILLWAY_FAIL(me + e.what(), comm_error);
    }
  };
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  std::array<char, MPI_MAX_PORT_NAME> port{};
  MPI_Comm group = MPI_COMM_NULL;
  check(MPI_Comm_dup(MPI_COMM_SELF, &group), "MPI_Comm_dup");
  if (launch.rank == 0) {
    check(MPI_Open_port(MPI_INFO_NULL, port.data()), "MPI_Open_port");
    bootstrap::publish(launch, "mpi-port", port.data());
  } else {
    const std::string name = wait_for("mpi-port", 0);
    SPILLWAY_EXPECTS(name.size() < port.size(),
                     "bootstrap: the published MPI port name is too long");
    std::memcpy(port.data(), name.data(), name.size());
    if (launch.rank > 1)
      (void)wait_for("mpi-joined-" + std::to_string(launch.rank - 1), launch.rank - 1);
    bootstrap::publish(launch, "mpi-connecting-" + std::to_string(launch.rank), "1");
    MPI_Comm inter = MPI_COMM_NULL;
    check(within(timeout, me + "MPI_Comm_connect",
                 [&] {
                   return MPI_Comm_connect(port.data(), MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
                 }),
          "MPI_Comm_connect");
    MPI_Comm_free(&group);
    check(MPI_Intercomm_merge(inter, 1, &group), "MPI_Intercomm_merge");
    MPI_Comm_free(&inter);
    bootstrap::publish(launch, "mpi-joined-" + std::to_string(launch.rank), "1");
  }
  for (int size = 1;;) {
    MPI_Comm_size(group, &size);
    if (size == launch.nranks) break;
    (void)wait_for("mpi-connecting-" + std::to_string(size), size);
    MPI_Comm inter = MPI_COMM_NULL;
    MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN);
    check(within(timeout, me + "MPI_Comm_accept of rank " + std::to_string(size),
                 [&] { return MPI_Comm_accept(port.data(), MPI_INFO_NULL, 0, group, &inter); }),
          "MPI_Comm_accept");
    MPI_Comm grown = MPI_COMM_NULL;
    check(MPI_Intercomm_merge(inter, 0, &grown), "MPI_Intercomm_merge");
    MPI_Comm_free(&inter);
    MPI_Comm_free(&group);
    group = grown;
  }
  if (launch.rank == 0) MPI_Close_port(port.data());
  MPI_Comm ordered = MPI_COMM_NULL;
  check(MPI_Comm_split(group, 0, launch.rank, &ordered), "MPI_Comm_split");
  MPI_Comm_free(&group);
  int r = -1;
  MPI_Comm_rank(ordered, &r);
  SPILLWAY_EXPECTS(r == launch.rank, "spillway-run bootstrap: two processes claim rank " +
                                         std::to_string(launch.rank));
  return ordered;
}

}  // namespace spillway::mpi::detail
