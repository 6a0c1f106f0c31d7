// SpillFiles on their own: extents written and read back piece by piece across files, the
// alignment rules, a corrupted file named in an io_error, the footprint, and a private
// directory that is gone with the object.
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/spill_files.hpp>

#include "common.hpp"

#include <sys/stat.h>

#include <filesystem>

using namespace spillway;

TEST(SpillFiles, ExtentsRoundTripAcrossPiecesAndFiles) {
  test::TempDir dir;
  SpillFiles files(dir.path(), 4 * MiB, 64 * KiB, 3);
  EXPECT_EQ(files.directory(), "");  // made at first use
  std::vector<DiskExtent> extents;
  for (std::size_t n : {std::size_t{1}, 64 * KiB, 64 * KiB + 1, 3 * MiB + 17}) {
    extents.push_back(files.allocate(n));
    std::vector<std::byte> in(n);
    test::fill_pattern(in.data(), n, n);
    files.write(extents.back(), 0, in.data(), n);
  }
  EXPECT_FALSE(files.directory().empty());
  struct stat st {};
  ASSERT_EQ(::stat(files.directory().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  for (auto& e : extents) {
    std::vector<std::byte> out(e.size);
    files.read(e, 0, out.data(), e.size);
    EXPECT_EQ(test::check_pattern(out.data(), e.size, e.size), e.size);
  }
  // A piece-aligned part of one, alone.
  auto& big = extents.back();
  std::vector<std::byte> part(64 * KiB);
  files.read(big, 128 * KiB, part.data(), part.size());
  std::vector<std::byte> want(big.size);
  test::fill_pattern(want.data(), big.size, big.size);
  EXPECT_EQ(std::memcmp(part.data(), want.data() + 128 * KiB, part.size()), 0);
  for (auto& e : extents) files.release(e);
}

TEST(SpillFiles, UnalignedAccessIsALogicError) {
  test::TempDir dir;
  SpillFiles files(dir.path(), 4 * MiB, 64 * KiB, 2);
  auto e = files.allocate(256 * KiB);
  std::vector<std::byte> buf(256 * KiB);
  EXPECT_THROW(files.write(e, 100, buf.data(), 64 * KiB), logic_error);        // position
  EXPECT_THROW(files.write(e, 0, buf.data(), 1000), logic_error);              // length
  EXPECT_THROW(files.read(e, 192 * KiB, buf.data(), 128 * KiB), logic_error);  // past the end
  files.release(e);
}

TEST(SpillFiles, ACorruptedPieceIsAnIoError) {
  test::TempDir dir;
  SpillFiles files(dir.path(), 4 * MiB, 64 * KiB, 1);
  auto e = files.allocate(128 * KiB);
  std::vector<std::byte> buf(128 * KiB);
  test::fill_pattern(buf.data(), buf.size(), 3);
  files.write(e, 0, buf.data(), buf.size());
  const auto [file, offset] = e.locate(1);
  const std::byte bad{0x5a};
  file->pwrite(&bad, 1, offset + 7);  // one byte of the second piece
  try {
    files.read(e, 0, buf.data(), buf.size());
    FAIL() << "a corrupted piece was read back";
  } catch (const io_error& err) {
    EXPECT_NE(std::string(err.what()).find("checksum"), std::string::npos) << err.what();
  }
  files.read(e, 0, buf.data(), 64 * KiB);  // the first piece is still good
  files.release(e);
}

TEST(SpillFiles, FootprintIsWholeBlocksAndTheDirectoryGoesWithTheObject) {
  EXPECT_EQ(SpillFiles::footprint(0), 0u);
  EXPECT_EQ(SpillFiles::footprint(1), 4096u);
  EXPECT_EQ(SpillFiles::footprint(4096), 4096u);
  EXPECT_EQ(SpillFiles::footprint(4097), 8192u);
  test::TempDir dir;
  std::string private_dir;
  {
    SpillFiles files(dir.path(), 4 * MiB, 64 * KiB, 2);
    auto e = files.allocate(1000);
    std::vector<std::byte> buf(1000);
    files.write(e, 0, buf.data(), buf.size());
    private_dir = files.directory();
    EXPECT_TRUE(std::filesystem::exists(private_dir));
    files.release(e);
  }
  EXPECT_FALSE(std::filesystem::exists(private_dir));
  EXPECT_THROW(SpillFiles("", 4 * MiB, 64 * KiB, 1), logic_error);
}
