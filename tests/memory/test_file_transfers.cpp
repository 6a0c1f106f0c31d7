// Copies between the GPU and files stay within the tiers' limits, bounce buffers included: a
// read into device memory (read_file_into) and a DEVICE -> DISK spill and back, under small
// PINNED_HOST and HOST limits, never take either past its limit, pay for their staging there,
// and allocate no pinned memory of their own (the process's resident memory stays flat).
// Without a GPU: host reads, and the errors.
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/file_handle.hpp>
#include <spillway/memory/file_transfers.hpp>

#include "io/device_common.hpp"

#include <fcntl.h>

#include <vector>

using namespace spillway;

namespace {

std::string make_file(const test::TempDir& dir, std::size_t n, std::uint64_t seed) {
  const std::string path = dir.path() + "/data";
  std::vector<std::byte> bytes(n);
  test::fill_pattern(bytes.data(), n, seed);
  io::FileHandle f(path, O_CREAT | O_WRONLY | O_TRUNC);
  f.pwrite(bytes.data(), n, 0);
  return path;
}

/// small_config with PINNED_HOST and HOST each limited to `limit` bytes.
BufferResourceConfig tight(const std::string& dir, std::size_t limit) {
  auto c = test::small_config(dir);
  c.limits[index(MemoryType::PINNED_HOST)] = Limit::bytes(limit);
  c.limits[index(MemoryType::HOST)] = Limit::bytes(limit);
  c.host_cache = Limit::bytes(0);
  return c;
}

void expect_within_limits(const BufferResource& br, std::size_t limit) {
  for (MemoryType t : {MemoryType::PINNED_HOST, MemoryType::HOST}) {
    EXPECT_LE(br.peak(t), limit) << to_string(t);
  }
  // The staging was paid for: it shows in the peaks.
  EXPECT_GT(br.peak(MemoryType::PINNED_HOST) + br.peak(MemoryType::HOST), 0u);
}

}  // namespace

TEST(FileTransfers, DeviceReadStaysWithinSmallPinnedAndHostLimits) {
  test::TempDir dir;
  constexpr std::size_t limit = 1 * MiB;
  BufferResource br(tight(dir.path(), limit));
  SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE);
  constexpr std::size_t n = 48 * MiB + 12345;  // (an odd tail)
  const std::string path = make_file(dir, n, 21);
  io::ThreadPool pool(4);
  // 4 MiB tasks on 5 threads would stage 40 MiB: the limits leave one lane of two 512 KiB
  // pieces.
  const io::ReadOptions options{4 * MiB, false, IoGds::off};
  auto dst = br.allocate(MemoryType::DEVICE, n);
  read_file_into(br, path, 0, *dst, &pool, options);  // once: CUDA's own first-use memory
  for (MemoryType t : {MemoryType::PINNED_HOST, MemoryType::HOST}) br.reset_peak(t);
  const std::size_t before = test::resident_bytes();
  for (int i = 0; i < 3; ++i) read_file_into(br, path, 0, *dst, &pool, options);
  const std::size_t grew = test::resident_bytes() - std::min(before, test::resident_bytes());
  expect_within_limits(br, limit);
  EXPECT_LT(grew, 8 * MiB) << "pinned memory outside the tiers (the old lanes: 40 MiB)";
  EXPECT_EQ(br.used(MemoryType::PINNED_HOST), 0u);
  const auto back = test::to_host(dst->data(), n);
  EXPECT_EQ(test::check_pattern(back.data(), n, 21), n);
}

TEST(FileTransfers, DeviceToDiskSpillAndBackStaysWithinSmallPinnedAndHostLimits) {
  test::TempDir dir;
  constexpr std::size_t limit = 256 * KiB;  // below the default staging (2 x 3 x 64 KiB)
  BufferResource br(tight(dir.path(), limit));
  SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE);
  constexpr std::size_t n = 8 * MiB + 777;
  auto buf = br.allocate(MemoryType::DEVICE, n);
  {
    std::vector<std::byte> host(n);
    test::fill_pattern(host.data(), n, 22);
    cuda::memcpy_async(buf->data(), host.data(), n, br.stream());
    br.stream().synchronize();
  }
  auto on_disk = br.move(std::move(buf), MemoryType::DISK);
  EXPECT_EQ(on_disk->mem_type(), MemoryType::DISK);
  auto back = br.move(std::move(on_disk), MemoryType::DEVICE);
  back->wait();
  expect_within_limits(br, limit);
  const auto bytes = test::to_host(back->data(), n);
  EXPECT_EQ(test::check_pattern(bytes.data(), n, 22), n);
}

TEST(FileTransfers, AnEmptyDeviceBufferGoesToDiskAndBackWithoutStaging) {
  test::TempDir dir;
  BufferResource br(tight(dir.path(), 64 * KiB));  // no room for any staging
  SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE);
  auto on_disk = br.move(br.allocate(MemoryType::DEVICE, 0), MemoryType::DISK);
  EXPECT_EQ(on_disk->size(), 0u);
  auto back = br.move(std::move(on_disk), MemoryType::DEVICE);
  EXPECT_EQ(back->mem_type(), MemoryType::DEVICE);
  EXPECT_EQ(back->size(), 0u);
}

TEST(FileTransfers, StagingThatCannotFitNamesTheStep) {
  test::TempDir dir;
  BufferResource br(tight(dir.path(), 64 * KiB));  // below two 64 KiB spill pieces
  SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE);
  auto buf = br.allocate(MemoryType::DEVICE, 1 * MiB);
  try {
    (void)br.move(std::move(buf), MemoryType::DISK);
    FAIL() << "no error";
  } catch (const out_of_memory& e) {
    EXPECT_NE(std::string(e.what()).find("staging for a copy between the GPU and a file"),
              std::string::npos)
        << e.what();
  }
  ASSERT_NE(buf, nullptr);  // the failed move left it with the caller
  EXPECT_EQ(buf->mem_type(), MemoryType::DEVICE);
}

TEST(FileTransfers, HostReadsNeedNoStagingAndDiskBuffersAreRefused) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  constexpr std::size_t n = 3 * MiB + 5;
  const std::string path = make_file(dir, n, 23);
  auto dst = br.allocate(MemoryType::HOST, n);
  io::ThreadPool pool(2);
  const std::size_t used = br.used(MemoryType::HOST);
  read_file_into(br, path, 0, *dst, &pool, io::ReadOptions{1 * MiB, false, IoGds::off});
  EXPECT_EQ(br.peak(MemoryType::HOST), used);
  EXPECT_EQ(test::check_pattern(dst->data(), n, 23), n);
  auto disk = br.move(std::move(dst), MemoryType::DISK);
  EXPECT_THROW(read_file_into(br, path, 0, *disk, &pool), logic_error);
  auto small = br.allocate(MemoryType::HOST, 16);
  EXPECT_THROW(read_file_into(br, path, n, *small, &pool), io_error);  // past the end
}
