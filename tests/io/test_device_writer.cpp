// Writes from GPU memory through pinned bounce buffers: every size class and offset, buffered
// and O_DIRECT, with and without a pool, the file read back and checked (and nothing written
// outside the range); the async forms round trip; errors name the file; a clear error without
// a GPU.
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/device_reader.hpp>
#include <spillway/io/device_writer.hpp>

#include "io/device_common.hpp"

#include <fcntl.h>

#include <cstring>
#include <iostream>
#include <vector>

using namespace spillway;

namespace {

std::vector<std::byte> read_all(const std::string& path, std::size_t n) {
  std::vector<std::byte> out(n);
  io::FileHandle f(path, O_RDONLY);
  if (n > 0) f.pread(out.data(), n, 0);
  return out;
}

}  // namespace

TEST(DeviceWriter, EverySizeAndOffsetBufferedAndDirect) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  test::TempDir dir;
  constexpr std::size_t task = 64 * KiB;
  const std::size_t max = 7 * task + 5;
  test::DeviceBytes src(max, 9);
  std::vector<std::byte> pattern(max);
  test::fill_pattern(pattern.data(), max, 9);
  io::ThreadPool pool(3);
  const std::string path = dir.path() + "/out";
  for (bool direct : {false, true}) {
    for (io::ThreadPool* p : {static_cast<io::ThreadPool*>(nullptr), &pool}) {
      for (std::uint64_t offset : {0UL, 1UL, 4096UL, 5000UL}) {
        for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, task - 1, task,
                              task + 1, 2 * task, max}) {
          SCOPED_TRACE("direct " + std::to_string(direct) + ", pool " +
                       std::to_string(p != nullptr) + ", offset " + std::to_string(offset) + ", " +
                       std::to_string(n) + " bytes");
          const std::size_t file_size = offset + n + 100;
          {
            std::vector<std::byte> fill(file_size, std::byte{0xEE});
            io::FileHandle f(path, O_CREAT | O_WRONLY | O_TRUNC);
            f.pwrite(fill.data(), file_size, 0);
          }
          io::write_file_from_device(path, src.ptr, n, offset, p, io::ReadOptions{task, direct});
          const auto got = read_all(path, file_size);
          ASSERT_EQ(n == 0 ? 0 : std::memcmp(got.data() + offset, pattern.data(), n), 0);
          for (std::size_t i = 0; i < offset; ++i) ASSERT_EQ(got[i], std::byte{0xEE}) << i;
          for (std::size_t i = offset + n; i < file_size; ++i)
            ASSERT_EQ(got[i], std::byte{0xEE}) << i;
        }
      }
    }
  }
}

TEST(DeviceWriter, AsyncWriteThenAsyncReadRoundTrips) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  test::TempDir dir;
  const std::size_t n = 24 * MiB + 77;
  test::DeviceBytes src(n, 3);
  test::DeviceBytes back(n, 4);  // different contents until read
  io::ThreadPool pool(4);
  const std::string path = dir.path() + "/round";
  auto w =
      io::write_file_from_device_async(path, src.ptr, n, 4096, pool, io::ReadOptions{MiB, true});
  w.get();
  auto r =
      io::read_file_to_device_async(path, back.ptr, n, 4096, pool, io::ReadOptions{MiB, false});
  (void)r.get();
  const auto a = test::to_host(src.ptr, n);
  EXPECT_EQ(test::to_host(back.ptr, n), a);
}

TEST(DeviceWriter, GdsOnRoundTripsOnWhicheverPathItTakes) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  test::TempDir dir;
  const std::size_t n = 8 * MiB + 4096;
  test::DeviceBytes src(n, 11);
  test::DeviceBytes back(n, 12);
  const std::string path = dir.path() + "/gds";
  io::ReadOptions ro{MiB, false, IoGds::on};
  const auto wrote = io::write_file_from_device(path, src.ptr, n, 0, nullptr, ro);
  const auto read = io::read_file_to_device(path, back.ptr, n, 0, nullptr, ro);
  EXPECT_EQ(wrote, read);  // cuFile either loads for both or for neither
  std::cout << "path: " << (read == io::DevicePath::gds ? "GDS (cuFile)" : "bounce buffers")
            << "\n";
  const auto a = test::to_host(src.ptr, n);
  EXPECT_EQ(test::to_host(back.ptr, n), a);
  std::vector<std::byte> on_disk(n);
  io::FileHandle(path, O_RDONLY).pread(on_disk.data(), n, 0);
  EXPECT_EQ(on_disk, a);
}

TEST(DeviceWriter, AnUnwritablePathNamesTheFile) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  test::TempDir dir;
  test::DeviceBytes src(1000, 1);
  const std::string path = dir.path() + "/no/such/dir/file";
  io::ThreadPool pool(2);
  auto f = io::write_file_from_device_async(path, src.ptr, 1000, 0, pool);
  try {
    f.get();
    ADD_FAILURE() << "no error";
  } catch (const io_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(DeviceWriter, WithoutAGpuItSaysSo) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is here";
  test::TempDir dir;
  std::vector<std::byte> host(10);
  EXPECT_THROW(io::write_file_from_device(dir.path() + "/x", host.data(), 10, 0, nullptr),
               logic_error);
  io::ThreadPool pool(1);
  auto f = io::write_file_from_device_async(dir.path() + "/x", host.data(), 10, 0, pool);
  EXPECT_THROW(f.get(), logic_error);
}
