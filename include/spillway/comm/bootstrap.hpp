#pragma once
/// @file bootstrap.hpp
/// How the processes that spillway-run starts find each other. The launcher gives every rank
/// its place through the environment (SPILLWAY_RUN_RANK, SPILLWAY_RUN_NRANKS,
/// SPILLWAY_RUN_DEVICE, SPILLWAY_RUN_DIR, SPILLWAY_RUN_TOKEN) and a private directory where
/// ranks publish what the others need (for MPI, rank 0's port name), under names that carry a
/// random token so that files of another launch are never read.

#include <chrono>
#include <optional>
#include <string>

namespace spillway {

/// This process's place in a launch by spillway-run.
struct LaunchInfo {
  int rank{0};
  int nranks{1};
  int device{-1};     ///< the GPU of this rank; -1 when the launcher gave none
  std::string dir;    ///< the launch's private directory
  std::string token;  ///< the launch's random token
};

namespace bootstrap {

/// The launch info when spillway-run started this process, else nullopt.
/// @throws spillway::logic_error naming the variable that is malformed
std::optional<LaunchInfo> from_environment();

/// The GPU a rank should use: SPILLWAY_RUN_DEVICE under spillway-run, else `rank` modulo the
/// GPU count; -1 without GPUs.
int device_for_rank(int rank);

/// Makes `value` visible to the other ranks under `key` (written whole, then renamed).
/// @throws spillway::io_error when the directory cannot be written
void publish(const LaunchInfo& launch, const std::string& key, const std::string& value);

/// The value published under `key` by rank `from`, waiting for it up to `timeout`.
/// @throws spillway::comm_error when it has not appeared by then, or at once when the launcher
/// has said that rank `from` exited (announce_exit)
std::string lookup(const LaunchInfo& launch, const std::string& key, int from,
                   std::chrono::milliseconds timeout);

/// The launcher's word that rank `rank` has exited, `how` ("with code 0", "killed by signal 9"):
/// ranks waiting for something it would have published fail at once instead of at the timeout.
void announce_exit(const LaunchInfo& launch, int rank, const std::string& how);

}  // namespace bootstrap

}  // namespace spillway
