// Spilling under tiny limits: everything comes back intact, limits hold, errors are clear, and
// no spill file outlives its owner.
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/memory/spillable_store.hpp>

#include "common.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <thread>

using namespace spillway;
using test::TempDir;

namespace {

/// Inserts `count` buffers of `size` bytes of tier `t` from `threads` threads, then extracts
/// all to `back` and checks every byte. Returns the keys' seeds check count.
void fill_and_check(BufferResource& br, SpillableStore& store, MemoryType t, int count,
                    std::size_t size, int threads, MemoryType back) {
  std::vector<std::pair<SpillableStore::Key, std::uint64_t>> keys(count);
  std::atomic<int> next{0};
  std::vector<std::thread> ts;
  for (int th = 0; th < threads; ++th) {
    ts.emplace_back([&] {
      OwningStream stream;
      for (int i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
        const auto seed = static_cast<std::uint64_t>(i) * 7919 + 1;
        auto host = test::make_host(br, size, seed);
        auto buf = (t == MemoryType::HOST) ? std::move(host) : br.move(std::move(host), t, stream);
        keys[i] = {store.insert(std::move(buf)), seed};
      }
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(store.size(), static_cast<std::size_t>(count));
  for (const auto& [key, seed] : keys) {
    auto buf = store.extract(key, back);
    ASSERT_EQ(buf->mem_type(), back);
    ASSERT_EQ(test::verify(br, *buf, seed), size) << "buffer " << key << " came back changed";
  }
}

}  // namespace

class HostSpill : public ::testing::TestWithParam<int> {};

TEST_P(HostSpill, HostLimitFarBelowTheDataSpillsToDiskAndBack) {
  TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.use_gpu = false;
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(3 * MiB);
  BufferResource br(cfg);
  SpillableStore store(br);
  // 48 MiB of data through a 3 MiB host limit.
  fill_and_check(br, store, MemoryType::HOST, 96, 512 * KiB, GetParam(), MemoryType::HOST);
  EXPECT_LE(br.peak(MemoryType::HOST), 3 * MiB);
  const auto spilled = br.statistics().get("spill-host-to-disk");
  ASSERT_TRUE(spilled.has_value());
  EXPECT_GE(spilled->bytes, 40.0 * MiB);
  EXPECT_EQ(br.used(MemoryType::HOST), 0u);
  EXPECT_EQ(br.used(MemoryType::DISK), 0u);
}

INSTANTIATE_TEST_SUITE_P(Threads, HostSpill, ::testing::Values(1, 2, 4));

TEST(Spilling, ZeroDiskLimitGivesTheDocumentedError) {
  TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.use_gpu = false;
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(2 * MiB);
  cfg.limits[index(MemoryType::DISK)] = Limit::bytes(0);
  BufferResource br(cfg);
  SpillableStore store(br);
  store.insert(test::make_host(br, MiB, 1));
  store.insert(test::make_host(br, MiB, 2));
  try {
    (void)test::make_host(br, MiB, 3);
    FAIL() << "reserved past the host limit with no disk";
  } catch (const out_of_memory& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cannot reserve 1.00 MiB of HOST even after spilling"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("HOST: 2.00 MiB of 2.00 MiB in use, none of it spillable"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("Not tried: DISK 0 B/0 B"), std::string::npos) << msg;
  }
  // Nothing was lost: both buffers are still there and intact.
  for (auto key : store.keys()) {
    auto buf = store.extract(key);
    EXPECT_EQ(test::verify(br, *buf, key + 1), MiB);
  }
}

TEST(Spilling, DiskLimitIsHardToo) {
  TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.use_gpu = false;
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(2 * MiB);
  cfg.limits[index(MemoryType::DISK)] = Limit::bytes(3 * MiB);
  BufferResource br(cfg);
  SpillableStore store(br);
  int inserted = 0;
  EXPECT_THROW(
      {
        for (; inserted < 20; ++inserted) store.insert(test::make_host(br, MiB, inserted));
      },
      out_of_memory);
  EXPECT_EQ(inserted, 5);  // 2 MiB host + 3 MiB disk
  EXPECT_LE(br.peak(MemoryType::DISK), 3 * MiB);
  EXPECT_LE(br.peak(MemoryType::HOST), 2 * MiB);
}

// The disk blocks (st_blocks) and apparent sizes of this process's open files in `dir`.
std::pair<std::size_t, std::size_t> disk_use_of_files_in(const std::string& dir) {
  std::size_t blocks = 0;
  std::size_t apparent = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (ec || target.rfind(dir + "/", 0) != 0) continue;
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0) {
      blocks += static_cast<std::size_t>(st.st_blocks) * 512;
      apparent += static_cast<std::size_t>(st.st_size);
    }
  }
  return {blocks, apparent};
}

// DISK charges whole 4 KiB blocks: 1-byte buffers under a 10 MB DISK limit fit as many as
// blocks do, and the blocks the spill files really take stay within the limit. Before: 20 000
// of them were charged 20 000 B and took 78 MiB of disk, in files of 155 GiB apparent size
// (a whole piece each) through 158 open files.
TEST(Spilling, DiskBlocksInUseStayWithinTheDiskLimit) {
  TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.use_gpu = false;
  constexpr std::size_t limit = 10'000'000;
  cfg.limits[index(MemoryType::DISK)] = Limit::bytes(limit);
  BufferResource br(cfg);
  std::vector<std::unique_ptr<Buffer>> on_disk;
  try {
    for (int i = 0; i < 20000; ++i) {
      on_disk.push_back(br.move(test::make_host(br, 1, i), MemoryType::DISK));
    }
  } catch (const out_of_memory&) {
  }
  EXPECT_EQ(on_disk.size(), limit / 4096);
  const auto [blocks, apparent] = disk_use_of_files_in(br.spill_files().directory());
  std::printf(
      "%zu one-byte buffers on disk: %.1f MiB of blocks, %.1f MiB apparent, limit %.1f MB\n",
      on_disk.size(), static_cast<double>(blocks) / MiB, static_cast<double>(apparent) / MiB,
      limit / 1e6);
  EXPECT_LE(blocks, limit);
  EXPECT_LE(apparent, limit + 64 * 4096);  // a block per buffer, a few per file of the group
  for (std::size_t i = 0; i < on_disk.size(); i += 97) {  // and they read back
    auto back = br.move(std::move(on_disk[i]), MemoryType::HOST);
    EXPECT_EQ(test::verify(br, *back, static_cast<int>(i)), 1U);
  }
}

TEST(Spilling, CorruptedSpillFileIsDetected) {
  TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.use_gpu = false;
  BufferResource br(cfg);
  auto buf = br.move(test::make_host(br, 300 * KiB, 5), MemoryType::DISK);
  const DiskExtent* e = buf->disk_extent();
  ASSERT_NE(e, nullptr);
  ASSERT_GE(e->num_pieces(), 4u);
  const auto [file, at] = e->locate(3);  // the piece holding bytes [192 KiB, 256 KiB)
  const char garbage[] = "not the spilled bytes";
  ASSERT_EQ(::pwrite(file->fd(), garbage, sizeof(garbage), static_cast<off_t>(at + 100)),
            static_cast<ssize_t>(sizeof(garbage)));
  try {
    (void)br.move(std::move(buf), MemoryType::HOST);
    FAIL() << "corruption went unnoticed";
  } catch (const io_error& err) {
    const std::string msg = err.what();
    EXPECT_NE(msg.find("checksum mismatch"), std::string::npos) << msg;
    EXPECT_NE(msg.find("offset " + std::to_string(at)), std::string::npos) << msg;
    EXPECT_NE(msg.find(file->name()), std::string::npos) << msg;
  }
}

TEST(Spilling, SpillDirectoryIsPrivateAndLeavesNothingBehind) {
  TempDir dir;
  {
    auto cfg = test::small_config(dir.path());
    cfg.use_gpu = false;
    BufferResource br(cfg);
    auto a = br.move(test::make_host(br, MiB, 1), MemoryType::DISK);
    auto b = br.move(test::make_host(br, 5 * MiB, 2), MemoryType::DISK);  // a second file
    const std::string priv = br.spill_files().directory();
    ASSERT_FALSE(priv.empty());
    struct stat st {};
    ASSERT_EQ(::stat(priv.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    // Spill files are unnamed (or unlinked at once): nobody can open them by name.
    EXPECT_EQ(dir.entries(), std::vector<std::string>({priv}));
    EXPECT_EQ(test::verify(br, *b, 2), 5 * MiB);
  }
  EXPECT_TRUE(dir.entries().empty()) << "left behind: " << dir.entries().front();
}

TEST(Spilling, NothingLeftAfterACrashingProcess) {
  TempDir dir;
  char self[PATH_MAX] = {};
  ASSERT_GT(::readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  std::string helper = self;
  helper = helper.substr(0, helper.rfind('/')) + "/spill_crash_helper";
  ASSERT_EQ(::access(helper.c_str(), X_OK), 0) << helper;
  for (const char* mode : {"throw", "exit"}) {
    const std::string cmd = "'" + helper + "' '" + dir.path() + "' " + mode + " 2>/dev/null";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status) || WIFSIGNALED(status));
    if (std::string(mode) == "throw") {
      EXPECT_TRUE(WIFSIGNALED(status) || WEXITSTATUS(status) != 0) << "the helper should die";
    } else {
      EXPECT_EQ(WEXITSTATUS(status), 3);
    }
    EXPECT_TRUE(dir.entries().empty()) << mode << ": left behind " << dir.entries().front();
  }
  // A killed process leaves an empty private directory; the next resource removes it when
  // it is made, whether or not it ever spills.
  const std::string cmd = "'" + helper + "' '" + dir.path() + "' kill 2>/dev/null";
  (void)std::system(cmd.c_str());
  ASSERT_EQ(dir.entries().size(), 1u) << "the killed helper left no directory to clear";
  auto cfg = test::small_config(dir.path());
  cfg.use_gpu = false;
  BufferResource br(cfg);
  EXPECT_TRUE(dir.entries().empty()) << "stale directory was not removed at start-up";
  auto buf = br.move(test::make_host(br, 10, 1), MemoryType::DISK);
  EXPECT_EQ(dir.entries().size(), 1u) << "this resource's own directory";
}

// Under spillway-run (SPILLWAY_RUN_DIR) the private spill directory is linked into the launch
// directory, for the launcher to remove should this process be killed.
TEST(Spilling, UnderTheLauncherTheSpillDirectoryIsLinkedForIt) {
  TempDir dir;
  TempDir launch;
  ::setenv("SPILLWAY_RUN_DIR", launch.path().c_str(), 1);
  auto cfg = test::small_config(dir.path());
  cfg.use_gpu = false;
  BufferResource br(cfg);
  auto buf = br.move(test::make_host(br, 10, 1), MemoryType::DISK);
  ::unsetenv("SPILLWAY_RUN_DIR");
  const std::string priv = br.spill_files().directory();
  const std::string name = priv.substr(priv.rfind('/') + 1);
  ASSERT_EQ(launch.entries(), std::vector<std::string>{launch.path() + "/spill-" + name});
  EXPECT_EQ(std::filesystem::read_symlink(launch.path() + "/spill-" + name).string(), priv);
}

TEST(Spilling, SpillFunctionsRunByPriority) {
  TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.use_gpu = false;
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(4 * MiB);
  BufferResource br(cfg);
  SpillableStore low(br, 0);
  SpillableStore high(br, 5);
  low.insert(test::make_host(br, MiB, 1));
  low.insert(test::make_host(br, MiB, 2));
  high.insert(test::make_host(br, MiB, 3));
  high.insert(test::make_host(br, MiB, 4));
  auto extra = test::make_host(br, MiB, 5);  // needs 1 MiB: taken from the high-priority store
  EXPECT_EQ(high.bytes_in(MemoryType::DISK), MiB);
  EXPECT_EQ(low.bytes_in(MemoryType::DISK), 0u);
}

TEST(Spilling, DeviceCascadesThroughEveryTier) {
  TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.limits[index(MemoryType::DEVICE)] = Limit::bytes(4 * MiB);
  cfg.limits[index(MemoryType::PINNED_HOST)] = Limit::bytes(4 * MiB);
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(8 * MiB);  // + room for the test's copies
  BufferResource br(cfg);
  SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE);
  SpillableStore store(br);
  fill_and_check(br, store, MemoryType::DEVICE, 40, 512 * KiB, 3, MemoryType::DEVICE);
  EXPECT_LE(br.peak(MemoryType::DEVICE), 4 * MiB);
  EXPECT_LE(br.peak(MemoryType::PINNED_HOST), 4 * MiB);
  EXPECT_LE(br.peak(MemoryType::HOST), 8 * MiB);
  EXPECT_TRUE(br.statistics().get("spill-device-to-pinned_host").has_value());
  EXPECT_TRUE(br.statistics().get("copy-disk-to-device").has_value() ||
              br.statistics().get("copy-host-to-device").has_value());
  for (MemoryType t : all_memory_types) EXPECT_EQ(br.used(t), 0u) << to_string(t);
}

TEST(Spilling, DeviceToDiskDirectlyAndBack) {
  TempDir dir;
  BufferResource br(test::small_config(dir.path()));
  SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE);
  auto dev = test::make_in(br, MemoryType::DEVICE, 5 * MiB + 3, 77);
  auto disk = br.move(std::move(dev), MemoryType::DISK);
  EXPECT_EQ(disk->mem_type(), MemoryType::DISK);
  auto back = br.move(std::move(disk), MemoryType::DEVICE);
  EXPECT_EQ(test::verify(br, *back, 77), 5 * MiB + 3);
}

TEST(Spilling, InjectedSpillsAtRandomPointsLoseNothing) {
  TempDir dir;
  for (int threads : {1, 3}) {
    // No limit at all: every spill here is forced.
    auto cfg = test::with_spill_injection(test::small_config(dir.path()), 0.5);
    BufferResource br(cfg);
    SpillableStore store(br);
    const MemoryType top = br.top_tier();
    fill_and_check(br, store, top, 40, 200 * KiB + 3, threads, top);
    const auto injected = br.statistics().get("spill-injected");
    ASSERT_TRUE(injected.has_value());
    EXPECT_GT(injected->count, 10u);
    EXPECT_TRUE(br.statistics().get("spill-host-to-disk").has_value() ||
                br.statistics().get("spill-device-to-pinned_host").has_value());
  }
}

TEST(Spilling, FullFileSystemIsAClearErrorAndKeepsTheData) {
  TempDir dir;
  const std::string mnt = dir.path() + "/small";
  ASSERT_EQ(::mkdir(mnt.c_str(), 0700), 0);
  const std::string mount = "mount -t tmpfs -o size=1m tmpfs '" + mnt + "' 2>/dev/null";
  if (std::system(mount.c_str()) != 0) GTEST_SKIP() << "cannot mount a small tmpfs here";
  struct Unmount {
    std::string m;
    ~Unmount() { (void)std::system(("umount '" + m + "'").c_str()); }
  } unmount{mnt};
  {
    auto cfg = test::small_config(mnt);
    cfg.use_gpu = false;
    BufferResource br(cfg);
    auto buf = test::make_host(br, 4 * MiB, 21);
    try {
      auto disk = br.move(std::move(buf), MemoryType::DISK);
      FAIL() << "wrote 4 MiB into a 1 MiB file system";
    } catch (const io_error& e) {
      EXPECT_NE(std::string(e.what()).find("the file system is full"), std::string::npos)
          << e.what();
    }
    ASSERT_NE(buf, nullptr)
        << "the failed move lost the buffer";  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(test::verify(br, *buf, 21), 4 * MiB);
    EXPECT_EQ(br.used(MemoryType::DISK), 0u);
  }
  // Through a store: the failed spill leaves the buffer in the store, intact.
  auto cfg = test::small_config(mnt);
  cfg.use_gpu = false;
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(5 * MiB);
  BufferResource br(cfg);
  SpillableStore store(br);
  const auto key = store.insert(test::make_host(br, 4 * MiB, 22));
  EXPECT_THROW((void)test::make_host(br, 2 * MiB, 23), io_error);
  auto back = store.extract(key);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(test::verify(br, *back, 22), 4 * MiB);
}

TEST(Spilling, FailedExtractKeepsTheBufferInTheStore) {
  TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.use_gpu = false;
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(MiB);
  BufferResource br(cfg);
  SpillableStore store(br);
  const auto key = store.insert(br.move(test::make_host(br, 512 * KiB, 8), MemoryType::DISK));
  auto hog = br.reserve(MemoryType::HOST, MiB);  // HOST full and nothing spillable
  EXPECT_THROW((void)store.extract(key, MemoryType::HOST), out_of_memory);
  EXPECT_EQ(store.size(), 1u);
  hog.release();
  auto buf = store.extract(key, MemoryType::HOST);
  EXPECT_EQ(test::verify(br, *buf, 8), 512 * KiB);
}
