// SharedHostMemory: zeroed memory of a memfd that the process registry finds by address, that a
// second mapping through /proc/<pid>/fd shares byte for byte, and that ends with its object;
// sizes, stale descriptors and corrupt export blobs are clear errors.

#include <spillway/core/error.hpp>
#include <spillway/transfer/shared_host_memory.hpp>

#include "transfer/detail/ipc_export.hpp"
#include "transfer/detail/shared_host.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace spillway::transfer {
namespace {

using detail::MappedPeerFile;
using detail::shared_file_of;

constexpr std::size_t kBytes = std::size_t{1} << 20;

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SharedHostMemory, ZeroBytesIsAnError) {
  const std::string e = error_of([] { (void)SharedHostMemory::allocate(0); });
  EXPECT_NE(e.find("SharedHostMemory::allocate of 0 bytes"), std::string::npos) << e;
}

TEST(SharedHostMemory, TheRegistryFindsRangesInsideItOnly) {
  auto m = SharedHostMemory::allocate(kBytes);
  ASSERT_NE(m.data(), nullptr);
  ASSERT_EQ(m.size(), kBytes);
  auto* p = static_cast<std::uint8_t*>(m.data());
  EXPECT_EQ(std::vector<std::uint8_t>(p, p + kBytes), std::vector<std::uint8_t>(kBytes, 0));
  const auto f = shared_file_of(p + 100, 1000);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->offset, 100u);
  EXPECT_EQ(f->bytes, kBytes);
  EXPECT_EQ(f->base, reinterpret_cast<std::uintptr_t>(p));
  EXPECT_TRUE(shared_file_of(p, kBytes).has_value());
  EXPECT_FALSE(shared_file_of(p + kBytes - 10, 20).has_value()) << "a range past its end";
  EXPECT_FALSE(shared_file_of(p - 1, 10).has_value()) << "a range before it";
  std::vector<std::uint8_t> other(64);
  EXPECT_FALSE(shared_file_of(other.data(), other.size()).has_value()) << "other memory";

  SharedHostMemory moved = std::move(m);
  EXPECT_EQ(m.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(moved.data(), p);
  EXPECT_TRUE(shared_file_of(p, kBytes).has_value()) << "the move kept it registered";
  moved = SharedHostMemory::allocate(4096);  // the first one ends here
  EXPECT_FALSE(shared_file_of(p, kBytes).has_value()) << "an ended one is still registered";
}

// What a peer does, through this process's own /proc entry: a second mapping of the same
// file, whose bytes are the same pages.
TEST(SharedHostMemory, ASecondMappingSharesEveryByte) {
  auto m = SharedHostMemory::allocate(kBytes);
  const auto f = shared_file_of(m.data(), m.size());
  ASSERT_TRUE(f.has_value());
  MappedPeerFile peer(::getpid(), f->fd, f->inode, f->bytes);
  auto* mine = static_cast<std::uint8_t*>(m.data());
  for (std::size_t i = 0; i < kBytes; i += 4096) mine[i] = static_cast<std::uint8_t>(i / 4096 + 1);
  for (std::size_t i = 0; i < kBytes; i += 4096) {
    ASSERT_EQ(peer.data()[i], static_cast<std::uint8_t>(i / 4096 + 1)) << i;
  }
  std::memset(peer.data() + 8192, 0xab, 100);
  EXPECT_EQ(mine[8192 + 99], 0xab);
  EXPECT_EQ(peer.device_pointer() != nullptr, m.pinned()) << "registered for the GPU iff here";
}

TEST(SharedHostMemory, AStaleOrMissingDescriptorIsRefused) {
  auto m = SharedHostMemory::allocate(kBytes);
  const auto f = shared_file_of(m.data(), m.size());
  ASSERT_TRUE(f.has_value());
  std::string e = error_of([&] { MappedPeerFile(::getpid(), f->fd, f->inode + 1, f->bytes); });
  EXPECT_NE(e.find("is no longer the peer's shared memory"), std::string::npos) << e;
  e = error_of([&] { MappedPeerFile(::getpid(), f->fd, f->inode, f->bytes * 2); });
  EXPECT_NE(e.find("is no longer the peer's shared memory"), std::string::npos) << e;
  e = error_of([&] { MappedPeerFile(::getpid(), 1 << 20, f->inode, f->bytes); });
  EXPECT_NE(e.find("opening the peer's shared memory /proc/"), std::string::npos) << e;
}

TEST(SharedHostMemory, ACorruptExportIsRefused) {
  const detail::SharedExport good{7, 42, kBytes, 0x1000, 4096, kBytes - 4096};
  const auto blob = detail::to_blob(good);
  const auto back = detail::shared_from_blob(blob);
  EXPECT_EQ(back.fd, 7u);
  EXPECT_EQ(back.inode, 42u);
  EXPECT_EQ(back.region_offset, 4096u);
  EXPECT_EQ(back.region_bytes, kBytes - 4096);
  std::string e =
      error_of([&] { (void)detail::shared_from_blob(std::span(blob).first(blob.size() - 1)); });
  EXPECT_NE(e.find("a blob of 47 bytes (48 expected)"), std::string::npos) << e;
  detail::SharedExport outside = good;
  outside.region_bytes = kBytes;  // runs past the file
  e = error_of([&] { (void)detail::shared_from_blob(detail::to_blob(outside)); });
  EXPECT_NE(e.find("in a file of"), std::string::npos) << e;
}

}  // namespace
}  // namespace spillway::transfer
