// Parallel reads into host memory: every size class and offset, buffered and O_DIRECT, contents
// verified; clear errors for missing and short files; the page-cache helpers.
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/page_cache.hpp>
#include <spillway/io/reader.hpp>

#include "common.hpp"

#include <fcntl.h>

#include <vector>

using namespace spillway;

namespace {

/// A file of `n` pattern bytes (seed 3).
std::string make_file(const test::TempDir& dir, std::size_t n, const char* name = "data") {
  const std::string path = dir.path() + "/" + name;
  std::vector<std::byte> bytes(n);
  test::fill_pattern(bytes.data(), n, 3);
  io::FileHandle f(path, O_CREAT | O_WRONLY | O_TRUNC);
  if (n > 0) f.pwrite(bytes.data(), n, 0);
  return path;
}

}  // namespace

TEST(Reader, EverySizeAndOffsetBufferedAndDirect) {
  test::TempDir dir;
  constexpr std::size_t task = 64 * KiB;
  const std::size_t file_size = 5 * task + 12345;
  const std::string path = make_file(dir, file_size);
  std::vector<std::byte> expected(file_size);
  test::fill_pattern(expected.data(), file_size, 3);
  io::ThreadPool pool(3);
  for (bool direct : {false, true}) {
    for (io::ThreadPool* p : {static_cast<io::ThreadPool*>(nullptr), &pool}) {
      for (std::uint64_t offset : {0UL, 1UL, 4095UL, 4096UL, 5000UL}) {
        for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, std::size_t{4096},
                              std::size_t{4097}, task - 1, task, task + 1, 3 * task + 7}) {
          if (offset + n > file_size) continue;
          SCOPED_TRACE("direct " + std::to_string(direct) + ", offset " + std::to_string(offset) +
                       ", " + std::to_string(n) + " bytes");
          // An unaligned destination too (through the bounce buffer on the direct path).
          std::vector<std::byte> dst(n + 1, std::byte{0xEE});
          io::read_file(path, dst.data() + 1, n, offset, p, io::ReadOptions{task, direct});
          ASSERT_EQ(n == 0 ? 0 : std::memcmp(dst.data() + 1, expected.data() + offset, n), 0);
          EXPECT_EQ(dst[0], std::byte{0xEE});  // nothing written before the destination
        }
      }
    }
  }
}

TEST(Reader, SaysWhichPathItTook) {
  test::TempDir dir;
  const std::string path = make_file(dir, 1 * MiB);
  std::vector<std::byte> dst(1 * MiB);
  EXPECT_EQ(io::read_file(path, dst.data(), dst.size(), 0, nullptr, {64 * KiB, false}),
            io::ReadPath::buffered);
  // ext4 and xfs take O_DIRECT; tmpfs does not, and then the read is buffered.
  const auto p = io::read_file(path, dst.data(), dst.size(), 0, nullptr, {64 * KiB, true});
  std::vector<std::byte> expected(dst.size());
  test::fill_pattern(expected.data(), expected.size(), 3);
  EXPECT_EQ(std::memcmp(dst.data(), expected.data(), dst.size()), 0);
  if (p == io::ReadPath::buffered) GTEST_SKIP() << "this file system refuses O_DIRECT";
}

TEST(Reader, ShortAndMissingFilesAreErrorsNamingTheFile) {
  test::TempDir dir;
  const std::string path = make_file(dir, 10000, "short");
  std::vector<std::byte> dst(20000);
  for (bool direct : {false, true}) {
    try {
      io::read_file(path, dst.data(), 20000, 0, nullptr, {4096, direct});
      ADD_FAILURE() << "no error for a read past the end";
    } catch (const io_error& e) {
      EXPECT_NE(std::string(e.what()).find("short"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(io::read_file(dir.path() + "/missing", dst.data(), 1, 0, nullptr), io_error);
  EXPECT_THROW(io::read_file(path, dst.data(), 8192, 0, nullptr, {1000, true}), logic_error);
}

TEST(Reader, AsyncReadsCompleteOrCarryTheirError) {
  test::TempDir dir;
  const std::string path = make_file(dir, 3 * MiB + 17);
  io::ThreadPool pool(2);
  std::vector<std::byte> a(3 * MiB + 17);
  std::vector<std::byte> b(1 * MiB);
  auto fa = io::read_file_async(path, a.data(), a.size(), 0, pool, {256 * KiB, false});
  auto fb = io::read_file_async(path, b.data(), b.size(), 4096, pool, {256 * KiB, true});
  std::vector<std::byte> c(1 * MiB);
  auto bad = io::read_file_async(path, c.data(), c.size(), 3 * MiB, pool);  // past the end
  EXPECT_EQ(fa.get(), io::ReadPath::buffered);
  fb.get();
  EXPECT_THROW(bad.get(), io_error);
  std::vector<std::byte> expected(a.size());
  test::fill_pattern(expected.data(), expected.size(), 3);
  EXPECT_EQ(std::memcmp(a.data(), expected.data(), a.size()), 0);
  EXPECT_EQ(std::memcmp(b.data(), expected.data() + 4096, b.size()), 0);
}

TEST(PageCache, ResidencyAndDropping) {
  test::TempDir dir;
  const std::string path = make_file(dir, 8 * MiB);
  std::vector<std::byte> dst(8 * MiB);
  io::read_file(path, dst.data(), dst.size(), 0, nullptr);  // now cached
  const double before = io::resident_fraction(path);
  EXPECT_GT(before, 0.9);
  io::drop_from_page_cache(path);
  const double after = io::resident_fraction(path);
  EXPECT_LT(after, 0.5) << "posix_fadvise(DONTNEED) kept the pages (before " << before << ")";
  EXPECT_EQ(io::resident_fraction(make_file(dir, 0, "empty")), 1.0);
  EXPECT_THROW(io::resident_fraction(dir.path() + "/missing"), io_error);
}
