#pragma once
// MPI_Alltoallv of host memory: the exchange a user would write without spillway, measured
// next to spillway-bench-comm and spillway-bench-shuffle under -C mpi (tool-private, needs MPI).
#include <spillway/comm/mpi_world.hpp>
#include <spillway/core/error.hpp>

#include <mpi.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

namespace spillway::tools {

/// One rank's side of a timed MPI_Alltoallv. The buffers are made and touched once, so runs
/// time the exchange alone. MPI counts are ints: bytes go in units of the smallest power of
/// two that makes every rank's total fit and divides every count. All members are collective.
class Alltoallv {
 public:
  /// @param counts the bytes this rank sends to each rank (its own block included, if any).
  explicit Alltoallv(const std::vector<std::size_t>& counts) {
    int n = 0;
    MPI_Comm_size(mpi::world(), &n);
    SPILLWAY_EXPECTS(counts.size() == static_cast<std::size_t>(n), "Alltoallv: one count per rank");
    std::vector<std::uint64_t> out(counts.begin(), counts.end());
    std::vector<std::uint64_t> in(out.size());
    MPI_Alltoall(out.data(), 1, MPI_UINT64_T, in.data(), 1, MPI_UINT64_T, mpi::world());
    int zeros = 62;  // the power of two that divides every count, here and at every rank
    for (const std::uint64_t c : out) zeros = c != 0 ? std::min(zeros, std::countr_zero(c)) : zeros;
    for (const std::uint64_t c : in) zeros = c != 0 ? std::min(zeros, std::countr_zero(c)) : zeros;
    MPI_Allreduce(MPI_IN_PLACE, &zeros, 1, MPI_INT, MPI_MIN, mpi::world());
    std::uint64_t biggest = std::max(std::accumulate(out.begin(), out.end(), std::uint64_t{0}),
                                     std::accumulate(in.begin(), in.end(), std::uint64_t{0}));
    MPI_Allreduce(MPI_IN_PLACE, &biggest, 1, MPI_UINT64_T, MPI_MAX, mpi::world());
    std::uint64_t unit = 1;
    while (biggest / unit > INT_MAX && unit < (std::uint64_t{1} << zeros)) unit *= 2;
    fits_ = biggest / unit <= INT_MAX;
    if (!fits_) return;
    if (unit > 1) {
      MPI_Type_contiguous(static_cast<int>(unit), MPI_BYTE, &type_);
      MPI_Type_commit(&type_);
    }
    auto layout = [&](const std::vector<std::uint64_t>& bytes, std::vector<int>& cnt,
                      std::vector<int>& displ) {
      int at = 0;
      for (const std::uint64_t b : bytes) {
        cnt.push_back(static_cast<int>(b / unit));
        displ.push_back(at);
        at += cnt.back();
      }
      return static_cast<std::size_t>(at) * unit;
    };
    send_.assign(layout(out, send_counts_, send_displs_), 1);
    recv_.assign(layout(in, recv_counts_, recv_displs_), 0);
  }
  ~Alltoallv() {
    if (type_ != MPI_BYTE) MPI_Type_free(&type_);
  }
  Alltoallv(const Alltoallv&) = delete;
  Alltoallv& operator=(const Alltoallv&) = delete;

  /// Whether the counts fit MPI's int counts in some unit; run() only where they do.
  [[nodiscard]] bool fits() const noexcept { return fits_; }

  /// One exchange after a barrier: the slowest rank's seconds.
  double run() {
    MPI_Barrier(mpi::world());
    const auto t0 = std::chrono::steady_clock::now();
    const int rc =
        MPI_Alltoallv(send_.data(), send_counts_.data(), send_displs_.data(), type_, recv_.data(),
                      recv_counts_.data(), recv_displs_.data(), type_, mpi::world());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rc != MPI_SUCCESS) throw comm_error("MPI_Alltoallv failed (baseline)");
    MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, mpi::world());
    return s;
  }

 private:
  bool fits_{false};
  MPI_Datatype type_{MPI_BYTE};
  std::vector<char> send_;
  std::vector<char> recv_;
  std::vector<int> send_counts_, send_displs_, recv_counts_, recv_displs_;
};

}  // namespace spillway::tools
