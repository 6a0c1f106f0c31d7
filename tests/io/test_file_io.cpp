// io::pread / io::pwrite on an open FileHandle, returning futures: host memory in every size
// class and offset, device memory where there is a GPU (the same calls, also on a renamed file,
// reopened through /proc), errors carried by the future and naming the file.
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/file_io.hpp>

#include "io/device_common.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

using namespace spillway;

namespace {

constexpr std::size_t task = 64 * KiB;

io::ReadOptions small_tasks() {
  io::ReadOptions o;
  o.task_size = task;
  return o;
}

}  // namespace

TEST(FileIo, HostRoundTripsEverySizeAndOffset) {
  test::TempDir dir;
  io::FileHandle f(dir.path() + "/data", O_CREAT | O_RDWR | O_TRUNC);
  io::ThreadPool pool(3);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, task - 1, task, task + 1, 5 * task + 7}) {
    for (std::uint64_t offset : {0UL, 1UL, 4096UL, 70000UL}) {
      std::vector<std::byte> out(n);
      test::fill_pattern(out.data(), n, n + offset);
      ASSERT_EQ(io::pwrite(f, out.data(), n, offset, pool, small_tasks()).get(), n);
      std::vector<std::byte> in(n + 2, std::byte{0x5A});
      ASSERT_EQ(io::pread(f, in.data() + 1, n, offset, pool, small_tasks()).get(), n);
      EXPECT_EQ(test::check_pattern(in.data() + 1, n, n + offset), n) << n << " at " << offset;
      EXPECT_EQ(in.front(), std::byte{0x5A});  // nothing written around the range
      EXPECT_EQ(in.back(), std::byte{0x5A});
    }
  }
}

TEST(FileIo, ManyReadsInFlightOnOneHandle) {
  test::TempDir dir;
  const std::size_t n = 16 * task;
  io::FileHandle f(dir.path() + "/data", O_CREAT | O_RDWR | O_TRUNC);
  std::vector<std::byte> out(n);
  test::fill_pattern(out.data(), n, 4);
  f.pwrite(out.data(), n, 0);
  io::ThreadPool pool(2);
  std::vector<std::vector<std::byte>> in(8, std::vector<std::byte>(n / 8));
  std::vector<std::future<std::size_t>> reads;
  for (std::size_t i = 0; i < in.size(); ++i) {
    reads.push_back(io::pread(f, in[i].data(), n / 8, i * (n / 8), pool, small_tasks()));
  }
  for (std::size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(reads[i].get(), n / 8);
    EXPECT_EQ(std::memcmp(in[i].data(), out.data() + i * (n / 8), n / 8), 0) << i;
  }
}

TEST(FileIo, ErrorsTravelThroughTheFuture) {
  test::TempDir dir;
  const std::string path = dir.path() + "/short";
  io::FileHandle f(path, O_CREAT | O_RDWR | O_TRUNC);
  std::vector<std::byte> buf(3 * task);
  f.pwrite(buf.data(), task, 0);
  io::ThreadPool pool(2);
  auto past_end = io::pread(f, buf.data(), 2 * task, task / 2, pool, small_tasks());
  try {
    (void)past_end.get();
    ADD_FAILURE() << "a read past the end succeeded";
  } catch (const io_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  io::FileHandle read_only(path, O_RDONLY);
  EXPECT_THROW((void)io::pwrite(read_only, buf.data(), 10, 0, pool).get(), io_error);
  io::ReadOptions zero;
  zero.task_size = 0;
  EXPECT_THROW((void)io::pread(f, buf.data(), 10, 0, pool, zero), logic_error);
  io::FileHandle closed;
  EXPECT_EQ(io::pread(closed, buf.data(), 0, 0, pool).get(), 0u);  // nothing to read
}

TEST(FileIo, DeviceMemoryRoundTripsThroughTheSameCalls) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  test::TempDir dir;
  io::ThreadPool pool(3);
  for (bool renamed : {false, true}) {
    const std::string path = dir.path() + "/dev" + std::to_string(renamed);
    io::FileHandle f(path, O_CREAT | O_RDWR | O_TRUNC);
    if (renamed) {  // the handle's name no longer opens it: /proc/self/fd does
      ASSERT_EQ(std::rename(path.c_str(), (path + ".moved").c_str()), 0);
    }
    for (std::size_t n : {std::size_t{1}, task + 1, 5 * task + 7}) {
      for (std::uint64_t offset : {0UL, 1UL, 8192UL}) {
        test::DeviceBytes src(n, n * 3 + offset);
        EXPECT_FALSE(cuda::is_device_pointer(&n));
        ASSERT_TRUE(cuda::is_device_pointer(src.ptr));
        ASSERT_EQ(io::pwrite(f, src.ptr, n, offset, pool, small_tasks()).get(), n);
        std::vector<std::byte> host(n);  // the bytes on file, read through the host path
        ASSERT_EQ(io::pread(f, host.data(), n, offset, pool, small_tasks()).get(), n);
        EXPECT_EQ(test::check_pattern(host.data(), n, n * 3 + offset), n);
        test::DeviceBytes back(n);
        ASSERT_EQ(io::pread(f, back.ptr, n, offset, pool, small_tasks()).get(), n);
        const auto got = test::to_host(back.ptr, n);
        EXPECT_EQ(test::check_pattern(got.data(), n, n * 3 + offset), n)
            << n << " at " << offset << (renamed ? " (renamed)" : "");
      }
    }
  }
}
