// Small chunks for the same peer travel together: inserted at once, their payloads are
// gathered into one message (the shuffle-gathered statistic), and each arrives as its own
// chunk, whole and at its owner (order-independent checksums per partition), in host memory,
// on the GPU and in pinned host memory, and under a device limit. A table hashed by the
// Shuffler on the CPU has each peer's chunks placed one after another: they travel joined, with
// no gather.
#include <spillway/comm/launch.hpp>
#include <spillway/comm/local.hpp>
#include <spillway/core/error.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/partition.hpp>

#include "common.hpp"

#include <mutex>
#include <thread>

using namespace spillway;

namespace {

struct Case {
  bool gpu;
  std::size_t device_limit{0};  // 0: none
  bool pinned{false};           // the chunks moved into pinned host memory before insert()
};

/// The checksum of a chunk's rows, where the chunk is.
TableChecksum checksum_of(PackedData p, BufferResource& br) {
  if (p.payload->mem_type() == MemoryType::DEVICE) {
    return gpu::checksum(gpu::unpack(std::move(p), br.stream()).view(), br, br.stream());
  }
  return checksum(unpack(std::move(p)).view());
}

/// Two ranks, each inserting `tables` tables of 4 int32 columns packed into `total`
/// partitions, one insert() a table. Checks each partition's rows against what was inserted
/// and returns each rank's statistics: payload messages sent, bytes gathered.
std::vector<std::pair<double, double>> shuffle_small_chunks(const Case& c, const std::string& dir) {
  constexpr PartID total = 16;
  constexpr int tables = 6;
  constexpr std::size_t rows = 20000;  // ~20 KiB chunks
  auto comms = LocalCommunicator::create(2);
  for (auto& comm : comms) comm->set_timeout(std::chrono::seconds(30));
  std::mutex m;
  std::vector<TableChecksum> expected(total);
  std::vector<TableChecksum> got(total);
  std::vector<std::pair<double, double>> stats(2);
  std::vector<std::thread> threads;
  for (Rank r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto cfg = c.gpu ? test::small_config(dir) : test::host_config(dir);
        if (c.device_limit > 0)
          cfg.limits[index(MemoryType::DEVICE)] = Limit::bytes(c.device_limit);
        BufferResource br(cfg);
        Communicator& comm = *comms[static_cast<std::size_t>(r)];
        Shuffler s(comm, 1, total, br);
        const std::size_t keys[] = {0};
        for (int i = 0; i < tables; ++i) {
          const std::uint64_t seed = 100 * static_cast<std::uint64_t>(r) + i;
          std::vector<PackedData> packed;
          if (c.gpu) {
            Table t = gpu::random_int32_table(rows, 4, -1000, 1000, seed, br, br.stream());
            packed = gpu::partition_and_pack(t.view(), keys, total, br, br.stream(), 3);
          } else {
            const Table t = random_int32_table(rows, 4, -1000, 1000, seed, br);
            packed = partition_and_pack(t.view(), keys, total, br, 3);
          }
          std::unordered_map<PartID, PackedData> chunks;
          for (PartID p = 0; p < total; ++p) {
            const TableChecksum sum = checksum_of(
                PackedData{packed[p].metadata,
                           BufferResource::view(*packed[p].payload, 0, packed[p].payload->size())},
                br);
            {
              std::lock_guard lock(m);
              expected[p] += sum;
            }
            if (c.pinned) {
              packed[p].payload =
                  br.move(std::move(packed[p].payload), MemoryType::PINNED_HOST, br.stream());
            }
            chunks.emplace(p, std::move(packed[p]));
          }
          s.insert(std::move(chunks));
        }
        s.insert_finished();
        while (!s.finished()) {
          const PartID pid = s.wait_any(std::chrono::seconds(30));
          auto parts = s.extract(pid);
          EXPECT_EQ(parts.size(), 2U * tables) << "partition " << pid;
          for (auto& p : parts) {
            const TableChecksum sum = checksum_of(std::move(p), br);
            std::lock_guard lock(m);
            got[pid] += sum;
          }
        }
        comm.barrier();
        const auto sent = br.statistics().get("shuffle-payload-send");
        const auto gathered = br.statistics().get("shuffle-gathered");
        stats[static_cast<std::size_t>(r)] = {sent ? static_cast<double>(sent->count) : 0,
                                              gathered ? gathered->bytes : 0};
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (PartID p = 0; p < total; ++p) {
    EXPECT_GT(expected[p].rows, 0U);
    EXPECT_EQ(expected[p], got[p]) << "partition " << p << ": rows " << expected[p].rows
                                   << " inserted, " << got[p].rows << " extracted";
  }
  return stats;
}

/// Each rank sent its 6 x 8 chunks for the peer in fewer messages, the bytes gathered.
void expect_batched(const Case& c, const std::string& dir) {
  for (const auto& [messages, gathered] : shuffle_small_chunks(c, dir)) {
    EXPECT_GT(messages, 0);
    EXPECT_LT(messages, 6 * 8);
    EXPECT_GT(gathered, 0);
  }
}

}  // namespace

// Host memory, device memory, pinned host memory.
TEST(ShufflerBatches, SmallChunksForAPeerGoTogetherInHostMemory) {
  test::TempDir dir;
  expect_batched({.gpu = false}, dir.path());
}

TEST(ShufflerBatches, SmallChunksForAPeerGoTogetherOnTheGpu) {
  test::TempDir dir;
  {
    BufferResource probe(test::small_config(dir.path()));
    SPILLWAY_SKIP_UNLESS_LIVE(probe, MemoryType::DEVICE);
  }
  expect_batched({.gpu = true}, dir.path());
}

// Chunks in pinned host memory are gathered there (by the copy engines).
TEST(ShufflerBatches, SmallChunksInPinnedMemoryGoTogether) {
  test::TempDir dir;
  {
    BufferResource probe(test::small_config(dir.path()));
    SPILLWAY_SKIP_UNLESS_LIVE(probe, MemoryType::PINNED_HOST);
  }
  expect_batched({.gpu = true, .pinned = true}, dir.path());
}

// Under a device limit of about three times a rank's input, waiting chunks spill and incoming
// ones land on the host: every chunk still arrives once, whole.
TEST(ShufflerBatches, UnderATightDeviceLimitEveryChunkStillArrives) {
  test::TempDir dir;
  {
    BufferResource probe(test::small_config(dir.path()));
    SPILLWAY_SKIP_UNLESS_LIVE(probe, MemoryType::DEVICE);
  }
  for (const auto& stats :
       shuffle_small_chunks({.gpu = true, .device_limit = 1 << 20}, dir.path())) {
    EXPECT_GT(stats.first, 0);  // payload messages sent
  }
}

// insert_finished(table, keys) on the CPU places each peer's partitions one after another, so
// that its chunks go without being gathered (shuffle-joined, no shuffle-gathered), and every
// row still arrives at its owner.
TEST(ShufflerBatches, ChunksOfATableHashedOnTheCpuTravelJoined) {
  test::TempDir dir;
  constexpr PartID total = 64;
  std::mutex m;
  std::vector<TableChecksum> expected(total);
  std::vector<TableChecksum> got(total);
  std::vector<std::pair<double, double>> stats(2);  // bytes joined, gathered
  LaunchOptions launch;
  launch.on_error = [](Rank r, const std::string& what) {
    ADD_FAILURE() << "rank " << r << ": " << what;
  };
  // A rank that throws is reported through on_error (run_ranks then returns 1).
  (void)run_ranks(
      RankKind::local, 2, test::host_config(dir.path()),
      [&](Communicator& comm, BufferResource& br) {
        comm.set_timeout(std::chrono::seconds(30));
        Shuffler s(comm, 1, total, br);
        const std::size_t keys[] = {0};
        Table t = random_int32_table(50000, 4, -100000, 100000, 7 + comm.rank(), br);
        auto mine = partition_and_pack(t.view(), keys, total, br, 11);
        for (PartID p = 0; p < total; ++p) {
          const TableChecksum sum = checksum(unpack(std::move(mine[p])).view());
          std::lock_guard lock(m);
          expected[p] += sum;
        }
        s.insert_finished(std::move(t), keys, 11);
        while (!s.finished()) {
          const PartID pid = s.wait_any(std::chrono::seconds(30));
          for (auto& p : s.extract(pid)) {
            const TableChecksum sum = checksum(unpack(std::move(p)).view());
            std::lock_guard lock(m);
            got[pid] += sum;
          }
        }
        comm.barrier();
        const auto joined = br.statistics().get("shuffle-joined");
        const auto gathered = br.statistics().get("shuffle-gathered");
        stats[static_cast<std::size_t>(comm.rank())] = {joined ? joined->bytes : 0,
                                                        gathered ? gathered->bytes : 0};
        return 0;
      },
      launch);
  for (PartID p = 0; p < total; ++p) {
    EXPECT_GT(expected[p].rows, 0U);
    EXPECT_EQ(expected[p], got[p]) << "partition " << p;
  }
  for (const auto& [joined, gathered] : stats) {
    EXPECT_GT(joined, 0);
    EXPECT_EQ(gathered, 0);
  }
}
