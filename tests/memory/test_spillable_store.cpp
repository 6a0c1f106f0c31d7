// SpillableStore on its own: keys, sizes and tiers; the oldest buffers spill first and only
// as many as asked; extract moves a buffer back up only into the tier asked for; a failed move
// keeps the buffer in the store; misuse is a clear error.
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/memory/spillable_store.hpp>

#include "common.hpp"

using namespace spillway;

namespace {

BufferResourceConfig host_and_disk(const std::string& dir, std::size_t host_limit) {
  auto c = test::host_config(dir);
  c.limits[index(MemoryType::HOST)] = Limit::bytes(host_limit);
  c.host_cache = Limit::bytes(0);
  return c;
}

}  // namespace

TEST(SpillableStore, KeepsBuffersUnderTheirKeys) {
  test::TempDir dir;
  BufferResource br(host_and_disk(dir.path(), 64 * MiB));
  SpillableStore store(br);
  const auto a = store.insert(test::make_host(br, 1000, 1));
  const auto b = store.insert(test::make_host(br, 3000, 2));
  EXPECT_NE(a, b);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.keys(), (std::vector<SpillableStore::Key>{a, b}));
  EXPECT_EQ(store.bytes_in(MemoryType::HOST), 4000u);
  EXPECT_EQ(store.bytes_in(MemoryType::DISK), 0u);
  auto back = store.extract(b);
  EXPECT_EQ(test::verify(br, *back, 2), 3000u);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_THROW((void)store.extract(b), logic_error);  // gone
  EXPECT_THROW((void)store.insert(nullptr), logic_error);
}

TEST(SpillableStore, SpillsTheOldestFirstAndNoMoreThanAsked) {
  test::TempDir dir;
  BufferResource br(host_and_disk(dir.path(), 64 * MiB));
  SpillableStore store(br);
  std::vector<SpillableStore::Key> keys;
  for (int i = 0; i < 4; ++i) keys.push_back(store.insert(test::make_host(br, MiB, 10 + i)));
  // Asking for a bit more than one buffer moves the two oldest.
  const std::size_t freed = store.spill(MemoryType::HOST, MiB + 1);
  EXPECT_EQ(freed, 2 * MiB);
  EXPECT_EQ(store.bytes_in(MemoryType::DISK), 2 * MiB);
  EXPECT_EQ(store.bytes_in(MemoryType::HOST), 2 * MiB);
  auto first = store.extract(keys[0]);
  EXPECT_EQ(first->mem_type(), MemoryType::DISK);  // no target: it stays where it is
  auto last = store.extract(keys[3]);
  EXPECT_EQ(last->mem_type(), MemoryType::HOST);
  // Into a target tier: moved back up, contents intact.
  auto second = store.extract(keys[1], MemoryType::HOST);
  EXPECT_EQ(second->mem_type(), MemoryType::HOST);
  EXPECT_EQ(test::verify(br, *second, 11), MiB);
  EXPECT_EQ(test::verify(br, *first, 10), MiB);
  EXPECT_EQ(store.spill(MemoryType::DISK, MiB), 0u);  // DISK has no lower tier
}

TEST(SpillableStore, IsSpilledWhenItsTierIsShort) {
  test::TempDir dir;
  BufferResource br(host_and_disk(dir.path(), 4 * MiB));
  SpillableStore store(br);
  const auto k = store.insert(test::make_host(br, 3 * MiB, 5));
  // The resource's reservation finds HOST short and spills the store to make room.
  auto more = br.allocate(MemoryType::HOST, 3 * MiB);
  EXPECT_EQ(store.bytes_in(MemoryType::DISK), 3 * MiB);
  more.reset();
  EXPECT_EQ(test::verify(br, *store.extract(k, MemoryType::HOST), 5), 3 * MiB);
}

TEST(SpillableStore, AMoveThatFailsKeepsTheBufferInTheStore) {
  test::TempDir dir;
  BufferResourceConfig c = host_and_disk(dir.path(), 2 * MiB);
  c.memory_wait = std::chrono::milliseconds(0);
  BufferResource br(c);
  SpillableStore store(br);
  const auto k = store.insert(test::make_host(br, 3 * MiB / 2, 6));
  ASSERT_EQ(store.spill(MemoryType::HOST, 1), 3 * MiB / 2);
  auto hog = br.allocate(MemoryType::HOST, 2 * MiB - 4096);  // HOST now full, nothing spillable
  EXPECT_THROW((void)store.extract(k, MemoryType::HOST), out_of_memory);
  EXPECT_EQ(store.size(), 1u);  // still there, under its key
  hog.reset();
  EXPECT_EQ(test::verify(br, *store.extract(k, MemoryType::HOST), 6), 3 * MiB / 2);
}
