#pragma once
/// @file topology.hpp
/// Where the CPUs, NUMA nodes and GPUs of this machine sit, read from sysfs (no libnuma), and
/// the calls that put a thread or its memory near a GPU. Used for the I/O defaults and by
/// spillway-run's --bind-to.

#include <array>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::topology {

/// "0-3,8-11" (the kernel's cpulist format) -> {0, 1, 2, 3, 8, 9, 10, 11}, sorted, no duplicates.
/// @throws spillway::logic_error naming the text when it is not such a list.
std::vector<int> parse_cpu_list(std::string_view text);

struct NumaNode {
  int id{-1};
  std::vector<int> cpus;
};

/// The NUMA nodes that have CPUs, from `<sys>/devices/system/node/node*/cpulist`, by id.
/// Empty when sysfs does not say (then treat the machine as one node).
std::vector<NumaNode> numa_nodes(const std::filesystem::path& sys = "/sys");

/// The CPUs the calling thread may run on (sched_getaffinity: the process's set unless the
/// thread was bound), sorted.
std::vector<int> allowed_cpus();

/// Where a GPU sits: sysfs's view of its PCI device.
struct GpuPlacement {
  std::string bus;        // "0000:1b:00.0"
  std::vector<int> cpus;  // local_cpulist (empty when unknown)
  int numa_node{-1};      // -1 when the machine or VM does not say
};

/// The placement of the PCI device `bus` under `<sys>/bus/pci/devices`.
GpuPlacement pci_placement(const std::string& bus, const std::filesystem::path& sys = "/sys");
/// The placement of CUDA device `device`. @throws when there is no such GPU.
GpuPlacement gpu_placement(int device);

/// The CPUs that work feeding a GPU at `placement` should run on: the allowed CPUs of the
/// GPU's NUMA node when the machine has several nodes and the GPU's node is known and has
/// allowed CPUs; otherwise an empty list, meaning "anywhere" (one node: nothing to gain).
std::vector<int> near_cpus(const GpuPlacement& placement, std::span<const NumaNode> nodes,
                           std::span<const int> allowed);

/// near_cpus for CUDA device `device` on this machine: empty on a one-node machine (without
/// asking CUDA), without a GPU, or when sysfs does not place the GPU.
std::vector<int> cpus_near_gpu(int device);
/// The NUMA node of CUDA device `device` on a machine of several nodes; -1 otherwise.
int numa_node_of_gpu(int device);

/// Binds the calling thread to `cpus` (sched_setaffinity). Empty: leaves it as it is. Only a
/// system call: safe in a child between fork and exec.
/// @returns whether the binding took (false when the kernel refused it).
bool bind_this_thread(std::span<const int> cpus) noexcept;

/// From now on, the calling thread's new memory prefers NUMA node `node` (set_mempolicy
/// MPOL_PREFERRED). Only system calls: safe in a child between fork and exec.
/// @returns whether the policy took (false for node < 0 or when the kernel refused it).
bool prefer_node(int node) noexcept;

/// While alive, the calling thread's new memory prefers NUMA node `node` (set_mempolicy
/// MPOL_PREFERRED); the previous policy comes back at destruction. A node < 0 does nothing.
class ScopedPreferredNode {
 public:
  explicit ScopedPreferredNode(int node) noexcept;
  ~ScopedPreferredNode();
  ScopedPreferredNode(const ScopedPreferredNode&) = delete;
  ScopedPreferredNode& operator=(const ScopedPreferredNode&) = delete;
  ScopedPreferredNode(ScopedPreferredNode&&) = delete;
  ScopedPreferredNode& operator=(ScopedPreferredNode&&) = delete;

  /// Whether the policy was set (false for node < 0 or when the kernel refused it).
  [[nodiscard]] bool active() const noexcept { return active_; }

 private:
  bool active_{false};
  int old_mode_{0};
  std::array<unsigned long, 16> old_mask_{};  // nodes 0 .. 1023
};

/// The preferred node of the calling thread's memory policy, or -1 when the policy is not
/// MPOL_PREFERRED (tests and logs).
int preferred_node() noexcept;

}  // namespace spillway::topology
