// Reads into GPU memory through pinned bounce buffers: every size class and offset, buffered
// and O_DIRECT, with and without a pool, contents copied back and verified; errors for short
// files; a clear error without a GPU.
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/device_reader.hpp>

#include "io/device_common.hpp"

#include <fcntl.h>

#include <cstring>
#include <thread>
#include <vector>

using namespace spillway;

namespace {

std::string make_file(const test::TempDir& dir, std::size_t n) {
  const std::string path = dir.path() + "/data";
  std::vector<std::byte> bytes(n);
  test::fill_pattern(bytes.data(), n, 5);
  io::FileHandle f(path, O_CREAT | O_WRONLY | O_TRUNC);
  if (n > 0) f.pwrite(bytes.data(), n, 0);
  return path;
}

}  // namespace

TEST(DeviceReader, EverySizeAndOffsetBufferedAndDirect) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  test::TempDir dir;
  constexpr std::size_t task = 64 * KiB;
  const std::size_t file_size = 9 * task + 12345;
  const std::string path = make_file(dir, file_size);
  std::vector<std::byte> expected(file_size);
  test::fill_pattern(expected.data(), file_size, 5);
  io::ThreadPool pool(3);
  test::DeviceBytes dst(file_size);
  for (bool direct : {false, true}) {
    for (io::ThreadPool* p : {static_cast<io::ThreadPool*>(nullptr), &pool}) {
      for (std::uint64_t offset : {0UL, 1UL, 4096UL, 5000UL}) {
        for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, task - 1, task,
                              task + 1, 2 * task, 7 * task + 5}) {
          if (offset + n > file_size) continue;
          SCOPED_TRACE("direct " + std::to_string(direct) + ", pool " +
                       std::to_string(p != nullptr) + ", offset " + std::to_string(offset) + ", " +
                       std::to_string(n) + " bytes");
          cuda::memset_device(dst.ptr, 0xEE, file_size);
          const auto how =
              io::read_file_to_device(path, dst.ptr, n, offset, p, io::ReadOptions{task, direct});
          EXPECT_EQ(how, cuda::reads_pageable_memory() ? io::DevicePath::pageable
                                                       : io::DevicePath::bounce);
          const auto got = test::to_host(dst.ptr, n + 1);
          ASSERT_EQ(n == 0 ? 0 : std::memcmp(got.data(), expected.data() + offset, n), 0);
          EXPECT_EQ(got[n], std::byte{0xEE});  // nothing written past the range
        }
      }
    }
  }
}

TEST(DeviceReader, ManyReadersAtOnce) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  test::TempDir dir;
  const std::size_t n = 8 * MiB + 3;
  const std::string path = make_file(dir, n);
  std::vector<std::byte> expected(n);
  test::fill_pattern(expected.data(), n, 5);
  io::ThreadPool pool(4);
  std::vector<std::unique_ptr<test::DeviceBytes>> dsts;
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i) dsts.push_back(std::make_unique<test::DeviceBytes>(n));
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&, i] {
      io::read_file_to_device(path, dsts[static_cast<std::size_t>(i)]->ptr, n, 0, &pool,
                              io::ReadOptions{MiB, false});
    });
  }
  for (auto& t : readers) t.join();
  for (const auto& d : dsts) EXPECT_EQ(test::to_host(d->ptr, n), expected);
}

TEST(DeviceReader, ReadingPastTheEndNamesFileOffsetAndSize) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  test::TempDir dir;
  const std::string path = make_file(dir, 100000);
  test::DeviceBytes dst(200000);
  io::ThreadPool pool(2);
  try {
    io::read_file_to_device(path, dst.ptr, 150000, 0, &pool, io::ReadOptions{16 * KiB, false});
    ADD_FAILURE() << "no error";
  } catch (const io_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(DeviceReader, WithoutAGpuItSaysSo) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is here";
  test::TempDir dir;
  const std::string path = make_file(dir, 10);
  std::vector<std::byte> host(10);
  EXPECT_THROW(io::read_file_to_device(path, host.data(), 10, 0, nullptr), logic_error);
}
