// The operators as actors (actors.hpp). Results of co_await go into named variables and
// lambdas given to co_await are named first: GCC 12 miscompiles temporaries in coroutines.
#include <spillway/comm/communicator.hpp>
#include <spillway/ops/actors.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/streaming/actors.hpp>

#include "ops/detail/pieces.hpp"

#include <memory>
#include <optional>
#include <utility>

namespace spillway::ops {

namespace {

using streaming::Actor;
using streaming::Context;
using streaming::Message;

/// A complete local partition, waited for in slices so that a stopped network is noticed.
/// @throws spillway::comm_error when none completes within the communicator's timeout
PartID next_partition(Shuffler& s, const Context& ctx, const Communicator& comm) {
  const auto deadline = std::chrono::steady_clock::now() + comm.timeout();
  for (;;) {
    ctx.throw_if_stopped();
    if (const auto pid = s.try_wait_any(std::chrono::milliseconds(100))) return *pid;
    if (std::chrono::steady_clock::now() > deadline) {
      throw comm_error("actor '" + ctx.name() + "': no partition of its shuffle completed in " +
                       std::to_string(comm.timeout().count()) + " ms: " + s.status());
    }
  }
}

/// Owns a shuffler and destroys it on a blocking thread: its destructor waits for the last
/// sends, which must not hold a thread of the executor.
struct OffThreadShuffler {
  streaming::Executor& ex;
  std::shared_ptr<Shuffler> s;
  OffThreadShuffler(streaming::Executor& e, std::shared_ptr<Shuffler> sh)
      : ex{e}, s{std::move(sh)} {}
  OffThreadShuffler(const OffThreadShuffler&) = delete;
  OffThreadShuffler& operator=(const OffThreadShuffler&) = delete;
  ~OffThreadShuffler() {
    ex.run_blocking([s = std::move(s)]() mutable { s.reset(); });
  }
};

Actor run_shuffle(Context& ctx, std::vector<std::size_t> keys, std::uint32_t partitions, OpID op,
                  MemoryType tier, std::uint32_t seed) {
  Communicator& comm = ctx.communicator();
  BufferResource& br = ctx.br();
  const bool device = tier == MemoryType::DEVICE;
  const PartID total = partitions == 0 ? static_cast<PartID>(comm.nranks()) : partitions;
  const OffThreadShuffler owner{ctx.executor(), std::make_shared<Shuffler>(comm, op, total, br)};
  Shuffler* shuffler = owner.s.get();
  Table schema;  // no columns until the first message
  bool first = true;
  for (;;) {
    std::optional<Message> in = co_await ctx.receive(0, tier);
    if (!in) break;
    if (first) {
      schema = detail::empty_like(in->table.view(), device, br);
      first = false;
    } else {
      detail::check_piece(in->table, schema, device);
    }
    shuffler->insert(detail::partitioned(in->table.view(), keys, total, device, br, seed));
  }
  shuffler->insert_finished();
  for (std::uint64_t seq = 0; !shuffler->finished(); ++seq) {
    auto wait = [&] { return next_partition(*shuffler, ctx, comm); };
    const PartID pid = co_await ctx.blocking(wait);
    auto extract = [&] { return detail::extract_table(*shuffler, pid, schema, device, br); };
    Table t = co_await ctx.blocking(extract);
    Message m{pid, seq, std::move(t)};
    const bool sent = co_await ctx.send(0, std::move(m));
    if (!sent) break;
  }
}

/// Input i's messages as a TableSource, from a blocking call of the actor.
TableSource input_source(Context& ctx, std::size_t i, MemoryType tier) {
  return [&ctx, i, tier]() -> std::optional<Table> {
    std::optional<Message> m = ctx.receive_sync(i, tier);
    if (!m) return std::nullopt;
    return std::move(m->table);
  };
}

/// An operator's output callback: each table sent on output 0 (dropped once the consumer
/// stopped: the operator still finishes its collective part).
std::function<void(std::uint32_t, Table&&)> output_sink(Context& ctx) {
  auto seq = std::make_shared<std::uint64_t>(0);
  return [&ctx, seq](std::uint32_t part, Table&& t) {
    (void)ctx.send_sync(0, Message{part, (*seq)++, std::move(t)});
  };
}

Actor run_join(Context& ctx, std::vector<std::size_t> left_keys,
               std::vector<std::size_t> right_keys, HashJoinOptions options, MemoryType tier) {
  auto join = [&] {
    hash_join(ctx.communicator(), ctx.br(), input_source(ctx, 0, tier), left_keys,
              input_source(ctx, 1, tier), right_keys, options, output_sink(ctx));
  };
  co_await ctx.blocking(join);
}

Actor run_groupby(Context& ctx, std::vector<std::size_t> keys,
                  std::vector<Aggregation> aggregations, GroupByOptions options, MemoryType tier) {
  auto group = [&] {
    groupby(ctx.communicator(), ctx.br(), input_source(ctx, 0, tier), keys, aggregations, options,
            output_sink(ctx));
  };
  co_await ctx.blocking(group);
}

Actor run_sort(Context& ctx, std::vector<SortKey> keys, SortOptions options) {
  auto sorted = [&] {
    Communicator& comm = ctx.communicator();
    sort(comm, ctx.br(), input_source(ctx, 0, MemoryType::HOST), keys, options, [&](Table&& t) {
      (void)ctx.send_sync(0, Message{static_cast<std::uint32_t>(comm.rank()), 0, std::move(t)});
    });
  };
  co_await ctx.blocking(sorted);
}

}  // namespace

streaming::ActorBody shuffle_actor(std::vector<std::size_t> keys, std::uint32_t partitions, OpID op,
                                   MemoryType tier, std::uint32_t seed) {
  return [=](Context& ctx) { return run_shuffle(ctx, keys, partitions, op, tier, seed); };
}

streaming::ActorBody hash_join_actor(std::vector<std::size_t> left_keys,
                                     std::vector<std::size_t> right_keys, HashJoinOptions options,
                                     MemoryType tier) {
  return [=](Context& ctx) { return run_join(ctx, left_keys, right_keys, options, tier); };
}

streaming::ActorBody groupby_actor(std::vector<std::size_t> keys,
                                   std::vector<Aggregation> aggregations, GroupByOptions options,
                                   MemoryType tier) {
  return [=](Context& ctx) { return run_groupby(ctx, keys, aggregations, options, tier); };
}

streaming::ActorBody sort_actor(std::vector<SortKey> keys, SortOptions options) {
  return [=](Context& ctx) { return run_sort(ctx, keys, options); };
}

}  // namespace spillway::ops
