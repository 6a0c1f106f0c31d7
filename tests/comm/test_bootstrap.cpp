// The bootstrap spillway-run gives its ranks: the environment read and checked, values
// published and looked up through the launch directory, a missing value timing out with an
// error that names it, and the GPU a rank takes.
#include <spillway/comm/bootstrap.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>

#include "common.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>

using namespace spillway;

namespace {

/// Sets SPILLWAY_RUN_* for one test and clears them after.
class RunEnv {
 public:
  RunEnv(const std::string& rank, const std::string& nranks, const std::string& dir,
         const std::string& token) {
    set("SPILLWAY_RUN_RANK", rank);
    set("SPILLWAY_RUN_NRANKS", nranks);
    set("SPILLWAY_RUN_DIR", dir);
    set("SPILLWAY_RUN_TOKEN", token);
  }
  ~RunEnv() {
    for (const char* n : {"SPILLWAY_RUN_RANK", "SPILLWAY_RUN_NRANKS", "SPILLWAY_RUN_DIR",
                          "SPILLWAY_RUN_TOKEN", "SPILLWAY_RUN_DEVICE"}) {
      ::unsetenv(n);
    }
  }
  RunEnv(const RunEnv&) = delete;
  RunEnv& operator=(const RunEnv&) = delete;
  static void set(const char* name, const std::string& value) {
    if (value.empty()) {
      ::unsetenv(name);
    } else {
      ::setenv(name, value.c_str(), 1);
    }
  }
};

}  // namespace

TEST(Bootstrap, NotLaunchedMeansNoInfo) {
  ::unsetenv("SPILLWAY_RUN_RANK");
  EXPECT_FALSE(bootstrap::from_environment().has_value());
}

TEST(Bootstrap, ReadsTheLaunch) {
  test::TempDir dir;
  RunEnv env("2", "4", dir.path(), "abc123");
  const auto l = bootstrap::from_environment();
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->rank, 2);
  EXPECT_EQ(l->nranks, 4);
  EXPECT_EQ(l->device, -1);
  EXPECT_EQ(l->dir, dir.path());
  EXPECT_EQ(l->token, "abc123");
}

TEST(Bootstrap, BadValuesNameTheVariable) {
  test::TempDir dir;
  for (const auto& [rank, nranks, token, name] :
       std::vector<std::tuple<std::string, std::string, std::string, std::string>>{
           {"4", "4", "t", "SPILLWAY_RUN_RANK"},      // rank out of range
           {"x", "4", "t", "SPILLWAY_RUN_RANK"},      // not a number
           {"0", "0", "t", "SPILLWAY_RUN_NRANKS"},    // no ranks
           {"0", "", "t", "SPILLWAY_RUN_NRANKS"},     // missing
           {"0", "2", "a/b", "SPILLWAY_RUN_TOKEN"}})  // a path in the token
  {
    RunEnv env(rank, nranks, dir.path(), token);
    try {
      (void)bootstrap::from_environment();
      ADD_FAILURE() << name << " was accepted";
    } catch (const logic_error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

TEST(Bootstrap, PublishedValuesAreFoundWhole) {
  test::TempDir dir;
  const LaunchInfo writer{0, 2, -1, dir.path(), "tok"};
  const LaunchInfo reader{1, 2, -1, dir.path(), "tok"};
  const LaunchInfo other_launch{1, 2, -1, dir.path(), "different"};
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    bootstrap::publish(writer, "port", std::string(10000, 'p'));
  });
  EXPECT_EQ(bootstrap::lookup(reader, "port", 0, std::chrono::seconds(10)),
            std::string(10000, 'p'));
  late.join();
  // Another launch's token never sees it.
  EXPECT_THROW((void)bootstrap::lookup(other_launch, "port", 0, std::chrono::milliseconds(30)),
               comm_error);
}

TEST(Bootstrap, AMissingValueTimesOutNamingIt) {
  test::TempDir dir;
  const LaunchInfo l{1, 2, -1, dir.path(), "tok"};
  try {
    (void)bootstrap::lookup(l, "mpi-port", 0, std::chrono::milliseconds(20));
    ADD_FAILURE() << "no error";
  } catch (const comm_error& e) {
    EXPECT_NE(std::string(e.what()).find("mpi-port"), std::string::npos) << e.what();
  }
}

// The launcher's word that a rank exited ends a wait for what it would have published at once,
// not at the timeout (a rank that exits 0 without joining hung the others forever); a value it
// published before it exited is still found.
TEST(Bootstrap, ARankThatExitedEndsAWaitForItAtOnce) {
  test::TempDir dir;
  const LaunchInfo launcher{2, 2, -1, dir.path(), "tok"};
  const LaunchInfo l{1, 2, -1, dir.path(), "tok"};
  bootstrap::publish(launcher, "early", "value");
  bootstrap::announce_exit(launcher, 0, "with code 0");
  EXPECT_EQ(bootstrap::lookup(l, "early", 0, std::chrono::seconds(10)), "value");
  const auto start = std::chrono::steady_clock::now();
  try {
    (void)bootstrap::lookup(l, "mpi-port", 0, std::chrono::seconds(60));
    ADD_FAILURE() << "no error";
  } catch (const comm_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 exited with code 0 before it published"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(Bootstrap, TheRankTakesTheLaunchersGpu) {
  test::TempDir dir;
  RunEnv env("1", "2", dir.path(), "t");
  if (cuda::device_count() == 0) {
    EXPECT_EQ(bootstrap::device_for_rank(1), -1);
    return;
  }
  RunEnv::set("SPILLWAY_RUN_DEVICE", "0");
  EXPECT_EQ(bootstrap::device_for_rank(1), 0);
  RunEnv::set("SPILLWAY_RUN_DEVICE", std::to_string(cuda::device_count()));
  EXPECT_THROW((void)bootstrap::device_for_rank(1), logic_error);
}
