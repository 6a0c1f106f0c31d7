// The actor network on one rank: a pipeline delivers every table in order; a slow consumer's
// queue spills to disk under a small host limit and nothing is lost; a full channel stops its
// producer (backpressure); the first error stops every actor and is what run() throws; a
// consumer that stops early releases its producer; a cycle that can never move is reported as
// a deadlock; a bad graph is refused before anything runs.
#include <spillway/core/error.hpp>
#include <spillway/streaming/actors.hpp>
#include <spillway/streaming/network.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/generator.hpp>

#include "common.hpp"

#include <atomic>
#include <filesystem>
#include <stdexcept>
#include <thread>

using namespace spillway;
using namespace spillway::streaming;

namespace {

constexpr MemoryType H = MemoryType::HOST;

Table table_of(std::size_t rows, std::uint64_t seed, BufferResource& br) {
  RandomTableOptions o;
  o.rows = rows;
  o.types = {TypeId::INT64, TypeId::INT32};
  o.seed = seed;
  return random_table(o, br);
}

/// `n` tables (n = 0: without end) of 1000 + i rows, seed i.
TableSource tables(BufferResource& br, std::uint64_t n, std::size_t rows = 1000) {
  auto i = std::make_shared<std::uint64_t>(0);
  return [&br, n, rows, i]() -> std::optional<Table> {
    if (n != 0 && *i == n) return std::nullopt;
    const std::uint64_t k = (*i)++;
    return table_of(rows + k, k, br);
  };
}

const NetworkReport::Entry& entry(const NetworkReport& r, const std::string& name) {
  for (const auto& e : r.actors) {
    if (e.name == name) return e;
  }
  throw std::runtime_error("no actor " + name);
}

}  // namespace

TEST(Network, APipelineDeliversEveryTableInOrderAndCountsIt) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Network net(br);
  Channel& a = net.channel("a");
  Channel& b = net.channel("b");
  net.add("source", {}, {&a}, source(tables(br, 50)));
  // Tables of an odd row count are dropped.
  net.add("filter", {&a}, {&b},
          map(
              [](Table&& t) -> std::optional<Table> {
                if (t.num_rows() % 2 == 1) return std::nullopt;
                return std::move(t);
              },
              H));
  std::vector<std::uint64_t> seen;
  std::vector<TableChecksum> sums;
  net.add("sink", {&b}, {},
          sink(
              [&](Message&& m) {
                seen.push_back(m.sequence);
                sums.push_back(checksum(m.table.view()));
              },
              H));
  EXPECT_EQ(net.plan(), "source: - -> a\nfilter: a -> b\nsink: b -> -\n");
  const NetworkReport r = net.run();
  ASSERT_EQ(seen.size(), 25u);
  for (std::size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i], 2 * i);  // the source's sequence numbers, kept by the filter
    EXPECT_EQ(sums[i], checksum(table_of(1000 + 2 * i, 2 * i, br).view()));
  }
  EXPECT_EQ(entry(r, "source").stats.messages_out, 50u);
  EXPECT_EQ(entry(r, "filter").stats.messages_in, 50u);
  EXPECT_EQ(entry(r, "filter").stats.messages_out, 25u);
  EXPECT_EQ(entry(r, "sink").stats.messages_in, 25u);
  EXPECT_EQ(entry(r, "sink").stats.rows_in, entry(r, "filter").stats.rows_out);
  EXPECT_GT(entry(r, "sink").stats.bytes_in, 25u * 1000 * 12);
  const std::string tl = r.timeline();
  EXPECT_NE(tl.find("filter"), std::string::npos) << tl;
  EXPECT_NE(tl.find("wall"), std::string::npos) << tl;
  EXPECT_EQ(br.used(H), 0u);
}

// 40 tables of about 120 KiB (4.7 MiB) under a 1 MiB host limit: while the consumer is stalled
// the producer keeps going (the channel takes 64 messages), the queue goes to disk, and every
// table comes back, in order and intact. The spill files go with the network.
TEST(Network, ASlowConsumersQueueSpillsAndNothingIsLost) {
  test::TempDir dir;
  auto cfg = test::host_config(dir.path());
  cfg.limits[index(H)] = Limit::bytes(1 * MiB);
  BufferResource br(cfg);
  std::vector<TableChecksum> got;
  std::size_t on_disk = 0;
  {
    Network net(br);
    Channel& a = net.channel("a", ChannelOptions{.max_messages = 64});
    net.add("source", {}, {&a}, source(tables(br, 40, 10000)));
    net.add("sink", {&a}, {},
            sink(
                [&](Message&& m) {
                  if (got.empty()) {
                    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
                    while (a.queued() < 39 && std::chrono::steady_clock::now() < until) {
                      std::this_thread::sleep_for(std::chrono::milliseconds(2));
                    }
                    on_disk = a.bytes_in(MemoryType::DISK);
                  }
                  got.push_back(checksum(m.table.view()));
                },
                H));
    net.run();
  }
  ASSERT_EQ(got.size(), 40u);
  for (std::uint64_t i = 0; i < 40; ++i) {
    EXPECT_EQ(got[i], checksum(table_of(10000 + i, i, br).view())) << "table " << i;
  }
  EXPECT_GT(on_disk, 3 * MiB);
  // The same tables collected into a spillable collection: they wait there, on disk too.
  {
    SpillableTables kept(br);
    Network net(br);
    Channel& a = net.channel("a");
    net.add("source", {}, {&a}, source(tables(br, 40, 10000)));
    net.add("collect", {&a}, {}, collect(kept, H));
    net.run();
    EXPECT_EQ(kept.size(), 40u);
    EXPECT_GT(kept.bytes_in(MemoryType::DISK), 3 * MiB);
    for (std::uint64_t i = 0; i < 40; ++i) {
      EXPECT_EQ(checksum(kept.pop(H)->view()), got[i]) << "table " << i;
    }
  }
  EXPECT_LE(br.peak(H), 1 * MiB);
  EXPECT_EQ(br.used(H), 0u);
  EXPECT_EQ(br.used(MemoryType::DISK), 0u);
  EXPECT_EQ(test::files_in(dir.path()), 0u);
}

// A channel of 2 messages and a slow consumer: the producer waits (its time blocked on output
// grows) and the queue never holds more than the bound and the message that went over it.
TEST(Network, AFullChannelStopsItsProducer) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Network net(br, nullptr, NetworkOptions{.threads = 2});
  Channel& a = net.channel("a", ChannelOptions{.max_messages = 2});
  net.add("source", {}, {&a}, source(tables(br, 20)));
  std::size_t most = 0;
  std::size_t n = 0;
  net.add("sink", {&a}, {},
          sink(
              [&](Message&&) {
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
                most = std::max(most, a.queued());
                ++n;
              },
              H));
  const NetworkReport r = net.run();
  EXPECT_EQ(n, 20u);
  EXPECT_LE(most, 3u);
  EXPECT_GE(most, 1u);
  EXPECT_GT(entry(r, "source").stats.blocked_output, std::chrono::milliseconds(20));
  EXPECT_EQ(a.delivered(), 20u);
}

// An endless source, a map that fails on its sixth message, and an unrelated endless chain:
// run() throws the map's error (not a cancellation), and every actor has ended.
TEST(Network, TheFirstErrorStopsEveryActorAndIsWhatRunThrows) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Network net(br);
  Channel& a = net.channel("a");
  Channel& b = net.channel("b");
  Channel& c = net.channel("c");
  net.add("source", {}, {&a}, source(tables(br, 0)));
  int calls = 0;
  net.add("failing", {&a}, {&b},
          map(
              [&](Table&& t) -> std::optional<Table> {
                if (++calls == 6) throw std::runtime_error("boom in the map");
                return std::move(t);
              },
              H));
  net.add("sink", {&b}, {}, sink([](Message&&) {}, H));
  net.add("other source", {}, {&c}, source(tables(br, 0)));
  net.add("slow sink", {&c}, {},
          sink([](Message&&) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); }, H));
  try {
    net.run();
    FAIL() << "run() returned";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom in the map");
  }
  EXPECT_EQ(calls, 6);
  EXPECT_EQ(br.used(H), 0u);
}

namespace {
/// Receives three messages, then ends (a LIMIT).
Actor take_three(Context& ctx, std::vector<std::uint64_t>& seen) {
  for (int i = 0; i < 3; ++i) {
    std::optional<Message> m = co_await ctx.receive(0, H);
    if (!m) co_return;
    seen.push_back(m->sequence);
  }
}

/// Waits for a message on input 0 before it sends anything on output 0.
Actor echo(Context& ctx) {
  for (;;) {
    std::optional<Message> m = co_await ctx.receive(0, H);
    if (!m) break;
    const bool sent = co_await ctx.send(0, std::move(*m));
    if (!sent) break;
  }
}
}  // namespace

TEST(Network, AConsumerThatStopsEarlyReleasesItsProducer) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Network net(br);
  Channel& a = net.channel("a", ChannelOptions{.max_messages = 1});
  net.add("endless", {}, {&a}, source(tables(br, 0)));
  std::vector<std::uint64_t> seen;
  net.add("limit", {&a}, {}, [&](Context& ctx) { return take_three(ctx, seen); });
  const NetworkReport r = net.run();
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{0, 1, 2}));
  EXPECT_EQ(br.used(H), 0u);
}

TEST(Network, ACycleThatCannotMoveIsADeadlockNotAHang) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Network net(br);
  Channel& a = net.channel("a");
  Channel& b = net.channel("b");
  net.add("ping", {&a}, {&b}, echo);
  net.add("pong", {&b}, {&a}, echo);
  try {
    net.run();
    FAIL() << "run() returned";
  } catch (const logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ping"), std::string::npos) << e.what();
  }
}

TEST(Network, ABadGraphIsRefusedBeforeAnythingRuns) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  {
    Network net(br);
    Channel& a = net.channel("orphan");
    std::atomic<bool> ran{false};
    net.add("source", {}, {&a}, source([&]() -> std::optional<Table> {
              ran = true;
              return std::nullopt;
            }));
    EXPECT_THROW(
        {
          try {
            net.run();
          } catch (const logic_error& e) {
            EXPECT_NE(std::string(e.what()).find("'orphan' has 1 producers and 0 consumers"),
                      std::string::npos)
                << e.what();
            throw;
          }
        },
        logic_error);
    EXPECT_FALSE(ran);
    EXPECT_THROW(net.run(), logic_error);  // once only
  }
  Network net(br);
  Network other(br);
  Channel& foreign = other.channel("x");
  Channel& a = net.channel("a");
  EXPECT_THROW(net.add("s", {}, {&foreign}, source(tables(br, 1))), logic_error);
  EXPECT_THROW(net.add("s", {}, {&a, &a}, source(tables(br, 1))), logic_error);
  EXPECT_THROW(net.add("s", {}, {&a}, ActorBody{}), logic_error);
  EXPECT_THROW(Channel("zero", br, ChannelOptions{.max_messages = 0}), logic_error);
}
