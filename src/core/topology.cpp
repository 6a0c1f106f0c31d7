#include <spillway/core/topology.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <fstream>
#include <iterator>

namespace spillway::topology {

namespace {

// <numaif.h> values, without linking libnuma.
constexpr int mpol_default = 0;
constexpr int mpol_preferred = 1;
constexpr unsigned long mask_bits = 16 * 64;

std::string read_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

int parse_int(std::string_view s, std::string_view whole) {
  int v = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  SPILLWAY_EXPECTS(ec == std::errc{} && end == s.data() + s.size() && v >= 0,
                   "not a CPU list: '" + std::string(whole) + "'");
  return v;
}

}  // namespace

std::vector<int> parse_cpu_list(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  // Linux allows at most 8192 CPUs (NR_CPUS); ids beyond this are not a machine's.
  constexpr int max_cpus = 1 << 16;
  std::vector<bool> seen(max_cpus, false);
  std::vector<int> out;
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t dash = item.find('-');
    const int lo = parse_int(item.substr(0, dash), text);
    const int hi = dash == std::string_view::npos ? lo : parse_int(item.substr(dash + 1), text);
    SPILLWAY_EXPECTS(lo <= hi && hi < max_cpus, "not a CPU list (CPU ids 0.." +
                                                    std::to_string(max_cpus - 1) + "): '" +
                                                    std::string(text) + "'");
    for (int c = lo; c <= hi; ++c) seen[static_cast<std::size_t>(c)] = true;
  }
  // Through the bitmap: overlapping ranges cost nothing more (fuzz_options found that many
  // copies of a wide range took seconds to sort).
  for (int c = 0; c < max_cpus; ++c) {
    if (seen[static_cast<std::size_t>(c)]) out.push_back(c);
  }
  return out;
}

std::vector<NumaNode> numa_nodes(const std::filesystem::path& sys) {
  std::vector<NumaNode> nodes;
  std::error_code ec;
  const auto dir = sys / "devices" / "system" / "node";
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() == 4) continue;
    int id = -1;
    const auto [end, err] = std::from_chars(name.data() + 4, name.data() + name.size(), id);
    if (err != std::errc{} || end != name.data() + name.size()) continue;
    NumaNode node{id, {}};
    try {
      node.cpus = parse_cpu_list(read_line(entry.path() / "cpulist"));
    } catch (const logic_error&) {
      continue;  // a node sysfs describes oddly is left out rather than guessed at
    }
    if (!node.cpus.empty()) nodes.push_back(std::move(node));
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  return nodes;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

GpuPlacement pci_placement(const std::string& bus, const std::filesystem::path& sys) {
  GpuPlacement p{bus, {}, -1};
  const auto dir = sys / "bus" / "pci" / "devices" / bus;
  try {
    p.cpus = parse_cpu_list(read_line(dir / "local_cpulist"));
  } catch (const logic_error&) {
    p.cpus.clear();
  }
  const std::string node = read_line(dir / "numa_node");
  int id = -1;
  const auto [end, ec] = std::from_chars(node.data(), node.data() + node.size(), id);
  p.numa_node = (ec == std::errc{} && id >= 0) ? id : -1;
  return p;
}

GpuPlacement gpu_placement(int device) {
  return pci_placement(cuda::pci_bus_id(device));
}

std::vector<int> near_cpus(const GpuPlacement& placement, std::span<const NumaNode> nodes,
                           std::span<const int> allowed) {
  if (nodes.size() < 2 || placement.numa_node < 0) return {};
  const auto node = std::find_if(nodes.begin(), nodes.end(),
                                 [&](const NumaNode& n) { return n.id == placement.numa_node; });
  if (node == nodes.end()) return {};
  std::vector<int> out;
  std::set_intersection(node->cpus.begin(), node->cpus.end(), allowed.begin(), allowed.end(),
                        std::back_inserter(out));
  return out;
}

std::vector<int> cpus_near_gpu(int device) {
  const auto nodes = numa_nodes();
  if (nodes.size() < 2 || !cuda::is_available()) return {};
  return near_cpus(gpu_placement(device), nodes, allowed_cpus());
}

int numa_node_of_gpu(int device) {
  if (numa_nodes().size() < 2 || !cuda::is_available()) return -1;
  return gpu_placement(device).numa_node;
}

bool bind_this_thread(std::span<const int> cpus) noexcept {
  if (cpus.empty()) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

bool prefer_node(int node) noexcept {
  if (node < 0 || static_cast<unsigned long>(node) + 1 >= mask_bits) return false;
  std::array<unsigned long, 16> mask{};
  mask[static_cast<std::size_t>(node) / 64] = 1UL << (node % 64);
  return syscall(SYS_set_mempolicy, mpol_preferred, mask.data(), mask_bits) == 0;
}

ScopedPreferredNode::ScopedPreferredNode(int node) noexcept {
  if (node < 0) return;
  if (syscall(SYS_get_mempolicy, &old_mode_, old_mask_.data(), mask_bits, nullptr, 0UL) != 0) {
    return;
  }
  active_ = prefer_node(node);
}

ScopedPreferredNode::~ScopedPreferredNode() {
  if (!active_) return;
  if (old_mode_ == mpol_default) {
    (void)syscall(SYS_set_mempolicy, mpol_default, nullptr, 0UL);
  } else {
    (void)syscall(SYS_set_mempolicy, old_mode_, old_mask_.data(), mask_bits);
  }
}

int preferred_node() noexcept {
  int mode = 0;
  std::array<unsigned long, 16> mask{};
  if (syscall(SYS_get_mempolicy, &mode, mask.data(), mask_bits, nullptr, 0UL) != 0) return -1;
  if ((mode & 0xFF) != mpol_preferred) return -1;
  for (std::size_t w = 0; w < mask.size(); ++w) {
    if (mask[w] != 0) return static_cast<int>(w * 64 + std::countr_zero(mask[w]));
  }
  return -1;
}

}  // namespace spillway::topology
