#pragma once
// The pinned host <-> device copy ceiling of the current GPU, measured in the same run as the
// figures printed beside it (spillway-readspeed, spillway-bench-shuffle). Its buffers are
// allocated and freed here, outside any BufferResource's accounting.

#include <spillway/core/cuda.hpp>
#include <spillway/core/stream.hpp>
#include <spillway/core/units.hpp>

#include "cli.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace spillway::tools {

using Owned = std::unique_ptr<void, void (*)(void*)>;

/// Which PCIe link a rank's copies take: its host and GPU, as a number that fits a double
/// exactly (52 bits), so that ranks can sum them in one allreduce.
inline std::uint64_t pcie_link_id(int device) {
  std::array<char, 256> host{};
  ::gethostname(host.data(), host.size() - 1);
  return (std::hash<std::string>{}(host.data()) ^ static_cast<std::uint64_t>(device)) >> 12;
}

/// The seconds the busiest link needs for the bytes each rank must move over it: `bytes[r]`
/// and `links[r]` (pcie_link_id) of every rank r, at `gbps` a link.
inline double pcie_floor_seconds(const std::vector<double>& bytes, const std::vector<double>& links,
                                 double gbps) {
  double floor = 0;
  for (std::size_t r = 0; r < bytes.size(); ++r) {
    double on_link = 0;
    for (std::size_t q = 0; q < bytes.size(); ++q) on_link += links[q] == links[r] ? bytes[q] : 0;
    floor = std::max(floor, on_link / (gbps * 1e9));
  }
  return floor;
}

/// A pinned host and a device buffer of `n` bytes, both written.
inline std::pair<Owned, Owned> pcie_buffers(std::size_t n) {
  Owned host(cuda::malloc_pinned(n), cuda::free_pinned);
  Owned dev(cuda::malloc_device(n), cuda::free_device);
  std::memset(host.get(), 1, n);
  cuda::memset_device(dev.get(), 1, n);
  return {std::move(host), std::move(dev)};
}

/// GB/s of `bytes` (at most 1 GiB) copied from pinned host memory to the device (or back):
/// the median of 5 copies after one to warm up.
inline double pcie_ceiling(std::size_t bytes, bool to_device) {
  const std::size_t n = std::min<std::size_t>(bytes, GiB);
  auto [host, dev] = pcie_buffers(n);
  std::vector<double> gbps;
  for (int i = 0; i < 6; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (to_device) {
      cuda::memcpy_async(dev.get(), host.get(), n, Stream{});
    } else {
      cuda::memcpy_async(host.get(), dev.get(), n, Stream{});
    }
    cuda::stream_synchronize(Stream{});
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) gbps.push_back(static_cast<double>(n) / s / 1e9);  // the first warms up
  }
  return cli::median(std::move(gbps));
}

/// GB/s of `bytes` (at most 1 GiB) each way with both directions at once: a copy up and a
/// copy down of the same size started together on two streams, each timed by its own events
/// (the rate a copy up gets while the link also carries a copy down). Medians of 5 after one
/// to warm up: {H2D, D2H}.
inline std::pair<double, double> pcie_duplex_ceiling(std::size_t bytes) {
  const std::size_t n = std::min<std::size_t>(bytes, GiB);
  auto [up_src, up_dst] = pcie_buffers(n);
  auto [down_dst, down_src] = pcie_buffers(n);
  const OwningStream up_stream;
  const OwningStream down_stream;
  Owned events[4] = {{cuda::event_create(), cuda::event_destroy},
                     {cuda::event_create(), cuda::event_destroy},
                     {cuda::event_create(), cuda::event_destroy},
                     {cuda::event_create(), cuda::event_destroy}};
  auto gbps = [&](const Owned& start, const Owned& end) {
    return static_cast<double>(n) / cuda::event_elapsed_ms(start.get(), end.get()) / 1e6;
  };
  std::vector<double> up;
  std::vector<double> down;
  for (int i = 0; i < 6; ++i) {
    cuda::event_record(events[0].get(), up_stream.view());
    cuda::memcpy_async(up_dst.get(), up_src.get(), n, up_stream.view());
    cuda::event_record(events[1].get(), up_stream.view());
    cuda::event_record(events[2].get(), down_stream.view());
    cuda::memcpy_async(down_dst.get(), down_src.get(), n, down_stream.view());
    cuda::event_record(events[3].get(), down_stream.view());
    cuda::event_synchronize(events[1].get());
    cuda::event_synchronize(events[3].get());
    if (i == 0) continue;  // the first warms up
    up.push_back(gbps(events[0], events[1]));
    down.push_back(gbps(events[2], events[3]));
  }
  return {cli::median(std::move(up)), cli::median(std::move(down))};
}

/// The ceilings beside several ranks' copy rates, 1 GiB each way, each rank on its own GPU:
/// {H2D, D2H} of rank 0's GPU alone, then of every GPU at once, one direction at a time, then
/// both directions at once on every GPU (the ranks share the host's memory and links). Every
/// rank calls it; `barrier` is the ranks' barrier. Rank 0's figures count.
template <typename Barrier>
std::array<double, 6> pcie_ceilings_of_ranks(bool rank0, Barrier&& barrier) {
  std::array<double, 6> gbps{};
  barrier();
  if (rank0) {
    gbps[0] = pcie_ceiling(GiB, true);
    gbps[1] = pcie_ceiling(GiB, false);
  }
  barrier();
  gbps[2] = pcie_ceiling(GiB, true);
  barrier();
  gbps[3] = pcie_ceiling(GiB, false);
  barrier();
  std::tie(gbps[4], gbps[5]) = pcie_duplex_ceiling(GiB);
  barrier();
  return gbps;
}

}  // namespace spillway::tools
