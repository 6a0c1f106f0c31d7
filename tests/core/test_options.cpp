#include <spillway/core/error.hpp>
#include <spillway/core/options.hpp>
#include <spillway/core/setting_by_name.hpp>
#include <spillway/core/topology.hpp>
#include <spillway/core/units.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

using namespace spillway;

namespace {
/// Sets environment variables for one test and restores the settings afterwards.
class EnvGuard {
 public:
  ~EnvGuard() {
    for (const auto& n : names_) ::unsetenv(n.c_str());
    options::reload_from_environment();
  }
  void set(const std::string& name, const std::string& value) {
    names_.push_back(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  std::vector<std::string> names_;
};
}  // namespace

TEST(Options, DefaultsAreSane) {
  OptionsGuard guard;
  options::reload_from_environment();
  const auto o = options::get();
  EXPECT_FALSE(o.spill_dir.empty());
  EXPECT_TRUE(o.host_limit.is_unlimited());
  EXPECT_TRUE(o.disk_limit.is_unlimited());
  EXPECT_EQ(o.device_allocator, DeviceAllocator::async);
  EXPECT_GE(o.io_threads, 1u);
  EXPECT_TRUE(o.io_numa);
  if (spillway::topology::numa_nodes().size() < 2) {  // one node: every allowed CPU counts
    EXPECT_EQ(o.io_threads,
              std::clamp<std::size_t>(spillway::topology::allowed_cpus().size(), 1, 16));
  }
  EXPECT_EQ(o.spill_task_size, 8 * MiB);
  EXPECT_EQ(o.io_gds, IoGds::automatic);
  EXPECT_EQ(o.mpi_ipc_window, 1024 * MiB);
  EXPECT_EQ(o.mpi_ipc_slot, 256 * MiB);
  EXPECT_EQ(o.shuffle_direct_piece, 4 * MiB);
  EXPECT_EQ(o.pinned_reserve, Limit::bytes(0));
}

TEST(Options, EnvironmentIsRead) {
  OptionsGuard guard;
  EnvGuard env;
  env.set("SPILLWAY_HOST_LIMIT", "64MiB");
  env.set("SPILLWAY_DEVICE_LIMIT", "80%");
  env.set("SPILLWAY_DEVICE_ALLOCATOR", "pool");
  env.set("SPILLWAY_SPILL_DIR", "/var/tmp");
  env.set("SPILLWAY_IO_THREADS", "3");
  env.set("SPILLWAY_PINNED_POOL", "0");
  env.set("SPILLWAY_PINNED_RESERVE", "2GiB");
  env.set("SPILLWAY_IO_TASK_SIZE", "16MiB");
  env.set("SPILLWAY_IO_DIRECT", "1");
  env.set("SPILLWAY_COMM_TIMEOUT", "2.5");
  env.set("SPILLWAY_IO_GDS", "on");
  env.set("SPILLWAY_IO_NUMA", "0");
  env.set("SPILLWAY_MPI_IPC_WINDOW", "0");
  env.set("SPILLWAY_MPI_IPC_SLOT", "1MiB");
  options::reload_from_environment();
  const auto o = options::get();
  EXPECT_EQ(o.host_limit, Limit::bytes(64 * MiB));
  EXPECT_EQ(o.device_limit, Limit::fraction(0.8));
  EXPECT_EQ(o.device_allocator, DeviceAllocator::pool);
  EXPECT_EQ(o.spill_dir, "/var/tmp");
  EXPECT_EQ(o.io_threads, 3u);
  EXPECT_FALSE(o.pinned_pool);
  EXPECT_EQ(o.pinned_reserve, Limit::bytes(2 * GiB));
  EXPECT_EQ(o.io_task_size, 16 * MiB);
  EXPECT_TRUE(o.io_direct);
  EXPECT_EQ(o.comm_timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(o.io_gds, IoGds::on);
  EXPECT_FALSE(o.io_numa);
  EXPECT_EQ(o.mpi_ipc_window, 0u);
  EXPECT_EQ(o.mpi_ipc_slot, MiB);
}

TEST(Options, BadEnvironmentNamesTheVariable) {
  OptionsGuard guard;
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"SPILLWAY_HOST_LIMIT", "lots"},    {"SPILLWAY_DEVICE_ALLOCATOR", "magic"},
           {"SPILLWAY_PINNED_POOL", "yes"},    {"SPILLWAY_PINNED_RESERVE", "some"},
           {"SPILLWAY_LOG_LEVEL", "loud"},     {"SPILLWAY_IO_THREADS", "0"},
           {"SPILLWAY_IO_TASK_SIZE", "0"},     {"SPILLWAY_IO_DIRECT", "maybe"},
           {"SPILLWAY_COMM_TIMEOUT", "-1"},    {"SPILLWAY_COMM_TIMEOUT", "0.0001"},
           {"SPILLWAY_SPILL_PERIOD_MS", "-1"}, {"SPILLWAY_SPILL_PERIOD_MS", "10ms"},
           {"SPILLWAY_MEMORY_WAIT_MS", "-1"},  {"SPILLWAY_MEMORY_WAIT_MS", "1s"},
           {"SPILLWAY_PROGRESS_SPIN_US", "x"}, {"SPILLWAY_PROGRESS_SPIN_US", "2.5"},
           {"SPILLWAY_IO_THREADS", "1.5"},     {"SPILLWAY_IO_THREADS", "4k"},
           {"SPILLWAY_IO_GDS", "yes"},         {"SPILLWAY_IO_NUMA", "auto"},
           {"SPILLWAY_MPI_IPC_WINDOW", "big"}, {"SPILLWAY_MPI_IPC_SLOT", "0"},
           {"SPILLWAY_MPI_IPC_SLOT", "2GiB"}}) {
    EnvGuard env;
    env.set(name, value);
    try {
      options::reload_from_environment();
      ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const logic_error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
      // A count or a time is not called a byte size.
      if (name == "SPILLWAY_SPILL_PERIOD_MS" || name == "SPILLWAY_IO_THREADS" ||
          name == "SPILLWAY_MEMORY_WAIT_MS" || name == "SPILLWAY_PROGRESS_SPIN_US") {
        EXPECT_EQ(std::string(e.what()).find("byte size"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("whole number"), std::string::npos) << e.what();
      }
    }
  }
}

TEST(Options, SettersAndGuardRestore) {
  const auto before = options::get();
  {
    OptionsGuard guard;
    options::set_host_limit(Limit::bytes(MiB));
    options::set_spill_dir("/somewhere");
    options::set_device_allocator(DeviceAllocator::cuda);
    EXPECT_EQ(options::get().host_limit, Limit::bytes(MiB));
    EXPECT_EQ(options::get().spill_dir, "/somewhere");
    EXPECT_THROW(options::set_io_threads(0), logic_error);
    EXPECT_THROW(options::set_spill_dir(""), logic_error);
  }
  EXPECT_EQ(options::get().host_limit, before.host_limit);
  EXPECT_EQ(options::get().spill_dir, before.spill_dir);
  EXPECT_EQ(options::get().device_allocator, before.device_allocator);
}

TEST(Options, ParseDeviceAllocator) {
  EXPECT_EQ(parse_device_allocator("cuda"), DeviceAllocator::cuda);
  EXPECT_EQ(parse_device_allocator("async"), DeviceAllocator::async);
  EXPECT_EQ(parse_device_allocator("pool"), DeviceAllocator::pool);
  EXPECT_THROW((void)parse_device_allocator("rmm"), logic_error);
  EXPECT_STREQ(to_string(DeviceAllocator::pool), "pool");
}

TEST(Options, ADefaultOptionValuesHoldsWhatTheEnvironmentlessSettingsSay) {
  OptionsGuard guard;
  // No SPILLWAY_* variable may be set for this comparison: take them away for its length.
  std::vector<std::pair<std::string, std::string>> saved;
  for (const auto& s : options::describe()) {
    if (const char* v = std::getenv(s.variable.c_str())) {
      saved.emplace_back(s.variable, v);
      ::unsetenv(s.variable.c_str());
    }
  }
  options::reload_from_environment();
  EXPECT_TRUE(options::get() == OptionValues{});
  for (const auto& [name, value] : saved) ::setenv(name.c_str(), value.c_str(), 1);
}

TEST(Options, EverySettingIsDescribedWithItsDefault) {
  const auto all = options::describe();
  EXPECT_GE(all.size(), 26u);
  std::set<std::string> names;
  for (const auto& s : all) {
    EXPECT_EQ(s.variable.rfind("SPILLWAY_", 0), 0u) << s.variable;
    EXPECT_FALSE(s.default_value.empty()) << s.variable;
    EXPECT_GT(s.description.size(), 10u) << s.variable;
    EXPECT_FALSE(s.current.empty()) << s.variable;
    EXPECT_TRUE(names.insert(s.variable).second) << s.variable << " twice";
  }
}

TEST(Options, SettersCheckWhatTheEnvironmentChecks) {
  OptionsGuard guard;
  EXPECT_THROW(options::set_io_task_size(0), logic_error);
  EXPECT_THROW(options::set_spill_task_size(0), logic_error);
  EXPECT_THROW(options::set_mpi_ipc_slot(2 * GiB), logic_error);
  EXPECT_THROW(options::set_spill_injection(1.5), logic_error);
  EXPECT_THROW(options::set_comm_timeout(std::chrono::milliseconds(0)), logic_error);
  try {
    options::set_io_threads(2000);
    ADD_FAILURE() << "accepted";
  } catch (const logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("SPILLWAY_IO_THREADS"), std::string::npos) << e.what();
  }
  options::set_memory_wait(std::chrono::milliseconds(7));
  EXPECT_EQ(options::get().memory_wait, std::chrono::milliseconds(7));
}

// The settings page is found where CTest says (SPILLWAY_SOURCE_DIR in the environment), else
// in the source tree this was built from, else under the working directory: a build carried to
// another machine and run from a checkout there finds the checkout's page.
TEST(Options, TheSettingsPageTableIsTheRegistrys) {
  const std::string page = "docs/SETTINGS.md";
  std::vector<std::string> roots;
  if (const char* env = std::getenv("SPILLWAY_SOURCE_DIR")) roots.emplace_back(env);
  roots.emplace_back(SPILLWAY_SOURCE_DIR);
  roots.emplace_back(".");
  std::ifstream in;
  std::string tried;
  for (const std::string& root : roots) {
    in = std::ifstream(root + "/" + page);
    if (in) break;
    tried += " " + root + "/" + page;
  }
  ASSERT_TRUE(in) << "no settings page; tried" << tried;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string begin = "<!-- settings-table: spillway-settings --markdown -->\n";
  const std::string end = "<!-- /settings-table -->";
  const auto a = text.find(begin);
  const auto b = text.find(end);
  ASSERT_TRUE(a != std::string::npos && b != std::string::npos && b > a)
      << page << " has no settings table between '" << begin << "' and '" << end << "'";
  EXPECT_EQ(text.substr(a + begin.size(), b - a - begin.size()), options::markdown_table())
      << "regenerate it: spillway-settings --markdown";
}

TEST(Options, ASettingIsSetAndReadByItsVariablesName) {
  OptionsGuard guard;
  options::set_by_name("SPILLWAY_MEMORY_WAIT_MS", "250");
  EXPECT_EQ(options::get().memory_wait, std::chrono::milliseconds(250));
  EXPECT_EQ(options::get_by_name("SPILLWAY_MEMORY_WAIT_MS"), "250");
  options::set_by_name("SPILLWAY_TRANSFER_PROVIDER", "shm");  // one of those without a setter
  EXPECT_EQ(options::get_by_name("SPILLWAY_TRANSFER_PROVIDER"), "shm");
  options::set_by_name("SPILLWAY_LOG_LEVEL", "error");
  EXPECT_EQ(options::log_level(), LogLevel::error);
}

TEST(Options, ABadNameOrValueByNameIsAnErrorThatChangesNothing) {
  OptionsGuard guard;
  const OptionValues before = options::get();
  try {
    options::set_by_name("SPILLWAY_NO_SUCH_THING", "1");
    ADD_FAILURE() << "accepted";
  } catch (const logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("SPILLWAY_NO_SUCH_THING"), std::string::npos) << e.what();
  }
  try {
    options::set_by_name("SPILLWAY_IO_THREADS", "lots");
    ADD_FAILURE() << "accepted";
  } catch (const logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("SPILLWAY_IO_THREADS"), std::string::npos) << e.what();
  }
  EXPECT_EQ(options::get().io_threads, before.io_threads);
  EXPECT_THROW(options::get_by_name("spill_dir"), logic_error);
}
