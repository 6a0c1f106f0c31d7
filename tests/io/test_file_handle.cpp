#include <spillway/core/error.hpp>
#include <spillway/io/file_handle.hpp>
#include <spillway/io/thread_pool.hpp>

#include "common.hpp"

#include <fcntl.h>

using namespace spillway;
using spillway::io::FileHandle;

TEST(FileHandle, ParallelWriteThenReadRoundTrips) {
  test::TempDir dir;
  io::ThreadPool pool(4);
  const std::string path = dir.path() + "/data";
  FileHandle f(path, O_CREAT | O_RDWR, 0600);
  const std::size_t n = 3 * MiB + 123;
  std::vector<std::byte> src(n), dst(n);
  test::fill_pattern(src.data(), n, 42);
  f.pwrite(src.data(), n, 4096, pool, 256 * KiB);
  EXPECT_EQ(f.size(), n + 4096);
  f.pread(dst.data(), n, 4096, pool, 100 * KiB);
  EXPECT_EQ(test::check_pattern(dst.data(), n, 42), n);
}

TEST(FileHandle, MissingFileNamesThePath) {
  try {
    FileHandle f("/nonexistent/dir/file", O_RDONLY);
    FAIL() << "opened a missing file";
  } catch (const io_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/file"), std::string::npos);
  }
}

TEST(FileHandle, ShortReadIsAnErrorWithOffsetAndSize) {
  test::TempDir dir;
  FileHandle f(dir.path() + "/small", O_CREAT | O_RDWR, 0600);
  std::vector<std::byte> buf(100);
  f.pwrite(buf.data(), 100, 0);
  try {
    f.pread(buf.data(), 100, 50);
    FAIL() << "read past the end succeeded";
  } catch (const io_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("short read"), std::string::npos) << msg;
    EXPECT_NE(msg.find("offset 50"), std::string::npos) << msg;
    EXPECT_NE(msg.find("size 100"), std::string::npos) << msg;
  }
}

TEST(FileHandle, WriteErrorIsReported) {
  test::TempDir dir;
  const std::string path = dir.path() + "/ro";
  { FileHandle(path, O_CREAT | O_RDWR, 0600); }
  FileHandle f(path, O_RDONLY);
  std::vector<std::byte> buf(10);
  EXPECT_THROW(f.pwrite(buf.data(), 10, 0), io_error);
}

TEST(FileHandle, MoveTransfersOwnership) {
  test::TempDir dir;
  FileHandle a(dir.path() + "/m", O_CREAT | O_RDWR, 0600);
  const int fd = a.fd();
  FileHandle b(std::move(a));
  EXPECT_EQ(b.fd(), fd);
  EXPECT_FALSE(a.is_open());  // NOLINT(bugprone-use-after-move)
  b.close();
  EXPECT_FALSE(b.is_open());
}
