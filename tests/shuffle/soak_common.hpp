#pragma once
// The soak's random shuffles, shared by the local and the MPI soak: each shuffle's shape,
// feed, skew, limit and spill injection from one seed, the same on every rank.

#include "common.hpp"
#include "shuffle/shuffle_common.hpp"

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

namespace spillway::test {

/// One random shuffle of the soak.
struct SoakCase {
  int nranks{2};  // (local soak only: MPI has its world)
  Feed feed{Feed::streaming};
  double skew{0};
  Shape shape;
  std::size_t host_limit_mib{0};  // 0: unlimited
  double spill_injection{0};
  bool background_spilling{false};  // spill what can be spilled, every millisecond
};

inline SoakCase soak_case(std::uint64_t seed, int i) {
  std::mt19937_64 rng(seed * 1'000'003 + static_cast<std::uint64_t>(i));
  auto pick = [&](std::uint64_t n) { return static_cast<std::size_t>(rng() % n); };
  SoakCase c;
  c.nranks = 1 + static_cast<int>(pick(4));
  c.feed = static_cast<Feed>(pick(4));
  c.skew = pick(2) == 0 ? 0.9 : 0.0;
  static constexpr std::size_t limits[] = {0, 1, 2, 4};
  c.host_limit_mib = limits[pick(4)];
  // Input (about 24 B a row) up to a fifth of the limit when streamed (a skewed shuffle then
  // lands more than the limit on one rank, which must spill), a sixth for direct feeds (which
  // hold their table, the partitions landing and what the test unpacks at once). Spill
  // injection (every reservation spills its tier first) and the background spill thread spill
  // at other moments.
  const std::size_t per_row = c.feed == Feed::streaming ? 110 : 150;
  c.shape.rows = 1 + pick(c.host_limit_mib > 0 ? c.host_limit_mib * MiB / per_row : 20000);
  c.shape.partitions = static_cast<PartID>(1 + pick(40));
  c.shape.seed = static_cast<std::uint64_t>(i);
  c.spill_injection = pick(2) == 0 ? 0.0 : 1.0;
  c.background_spilling = c.host_limit_mib > 0 && pick(2) == 0;
  return c;
}

/// How many shuffles a soak runs: SPILLWAY_SOAK_SHUFFLES, else `fallback`.
inline int soak_shuffles(int fallback) {
  const char* v = std::getenv("SPILLWAY_SOAK_SHUFFLES");
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

/// This process's file descriptors open on files under `dir`.
inline int open_files_under(const std::string& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(e.path(), ec).string().rfind(dir + "/", 0) == 0) ++n;
  }
  return n;
}

}  // namespace spillway::test
