#include <spillway/core/error.hpp>
#include <spillway/core/topology.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common.hpp"

using namespace spillway;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

/// A sysfs tree with the given node cpulists ("" = a node without CPUs).
void make_nodes(const fs::path& sys, const std::vector<std::pair<std::string, std::string>>& n) {
  for (const auto& [name, cpus] : n)
    write(sys / "devices/system/node" / name / "cpulist", cpus + "\n");
}

}  // namespace

TEST(Topology, ParsesCpuLists) {
  EXPECT_EQ(topology::parse_cpu_list("0-3,8-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(topology::parse_cpu_list("5"), (std::vector<int>{5}));
  EXPECT_EQ(topology::parse_cpu_list("3,1-2,2"), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(topology::parse_cpu_list("").empty());
  EXPECT_TRUE(topology::parse_cpu_list("\n").empty());
}

TEST(Topology, RejectsWhatIsNotACpuList) {
  for (const char* bad : {"a", "1,,2", "3-1", "-1", "1-", "0-3;4", "1 2", "0-99999999", "65536",
                          "0-813813,0-1138,8310,2-11"}) {
    try {
      (void)topology::parse_cpu_list(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const logic_error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

// Many copies of a wide range once took seconds to sort (found by fuzz_options): the ids go
// through a bitmap now, whatever the overlap.
TEST(Topology, OverlappingRangesAreCheap) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "0-65535,";
  text += "7";
  const auto cpus = topology::parse_cpu_list(text);
  ASSERT_EQ(cpus.size(), 65536u);
  EXPECT_EQ(cpus.front(), 0);
  EXPECT_EQ(cpus.back(), 65535);
}

TEST(Topology, ReadsNumaNodesFromSysfs) {
  test::TempDir dir;
  const fs::path sys = dir.path();
  make_nodes(sys, {{"node0", "0-3"}, {"node1", "4-7"}, {"node10", "8"}, {"node2", ""}});
  write(sys / "devices/system/node/possible", "0-10\n");    // not a node directory
  write(sys / "devices/system/node/nodeX/cpulist", "9\n");  // not a node number
  const auto nodes = topology::numa_nodes(sys);
  ASSERT_EQ(nodes.size(), 3u);  // node2 has no CPUs
  EXPECT_EQ(nodes[0].id, 0);
  EXPECT_EQ(nodes[0].cpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(nodes[1].id, 1);
  EXPECT_EQ(nodes[2].id, 10);
  EXPECT_EQ(nodes[2].cpus, (std::vector<int>{8}));
  EXPECT_TRUE(topology::numa_nodes(sys / "missing").empty());
}

TEST(Topology, ReadsThisMachine) {
  const auto allowed = topology::allowed_cpus();
  ASSERT_FALSE(allowed.empty());
  EXPECT_TRUE(std::is_sorted(allowed.begin(), allowed.end()));
  for (const auto& node : topology::numa_nodes()) {  // every node listed has CPUs
    EXPECT_GE(node.id, 0);
    EXPECT_FALSE(node.cpus.empty());
  }
}

TEST(Topology, ReadsAPciDevicesPlacement) {
  test::TempDir dir;
  const fs::path sys = dir.path();
  write(sys / "bus/pci/devices/0000:1b:00.0/local_cpulist", "4-7\n");
  write(sys / "bus/pci/devices/0000:1b:00.0/numa_node", "1\n");
  write(sys / "bus/pci/devices/0000:06:00.0/local_cpulist", "0-31\n");
  write(sys / "bus/pci/devices/0000:06:00.0/numa_node", "-1\n");  // a VM that does not say
  const auto a = topology::pci_placement("0000:1b:00.0", sys);
  EXPECT_EQ(a.bus, "0000:1b:00.0");
  EXPECT_EQ(a.cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(a.numa_node, 1);
  EXPECT_EQ(topology::pci_placement("0000:06:00.0", sys).numa_node, -1);
  const auto missing = topology::pci_placement("0000:ff:00.0", sys);
  EXPECT_EQ(missing.numa_node, -1);
  EXPECT_TRUE(missing.cpus.empty());
}

TEST(Topology, NearCpusAreTheGpusNodesAllowedCpus) {
  const std::vector<topology::NumaNode> two{{0, {0, 1, 2, 3}}, {1, {4, 5, 6, 7}}};
  const std::vector<int> allowed{0, 1, 2, 3, 4, 5};
  const topology::GpuPlacement on1{"x", {4, 5, 6, 7}, 1};
  EXPECT_EQ(topology::near_cpus(on1, two, allowed), (std::vector<int>{4, 5}));
  // One node, an unknown node, a node not listed, no allowed CPU there: anywhere.
  EXPECT_TRUE(topology::near_cpus(on1, std::span(two).first(1), allowed).empty());
  EXPECT_TRUE(topology::near_cpus({"x", {}, -1}, two, allowed).empty());
  EXPECT_TRUE(topology::near_cpus({"x", {}, 7}, two, allowed).empty());
  EXPECT_TRUE(topology::near_cpus(on1, two, std::vector<int>{0, 1}).empty());
}

TEST(Topology, BindsTheCallingThreadOnly) {
  const auto allowed = topology::allowed_cpus();
  const int cpu = allowed.back();
  std::vector<int> inside;
  std::thread t([&] {
    ASSERT_TRUE(topology::bind_this_thread(std::vector<int>{cpu}));
    inside = topology::allowed_cpus();
  });
  t.join();
  EXPECT_EQ(inside, (std::vector<int>{cpu}));
  EXPECT_EQ(topology::allowed_cpus(), allowed);  // this thread is untouched
  EXPECT_TRUE(topology::bind_this_thread({}));   // empty: nothing to do
  EXPECT_EQ(topology::allowed_cpus(), allowed);
}

TEST(Topology, PrefersANodeWhileInScope) {
  EXPECT_FALSE(topology::ScopedPreferredNode(-1).active());
  const int before = topology::preferred_node();
  {
    const topology::ScopedPreferredNode near(0);
    if (!near.active()) GTEST_SKIP() << "set_mempolicy is refused here (seccomp or no NUMA)";
    EXPECT_EQ(topology::preferred_node(), 0);
  }
  EXPECT_EQ(topology::preferred_node(), before);
}
