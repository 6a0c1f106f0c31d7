#include <spillway/streaming/actors.hpp>

#include <utility>

namespace spillway::streaming {

namespace {

// Each actor is a coroutine function whose parameters are copied into its frame, so that
// nothing it uses lives in the ActorBody that made it. Results of co_await go into named
// variables, not conditions or temporaries: GCC 12 miscompiles those in coroutines.

Actor run_source(Context& ctx, TableSource next) {
  for (std::uint64_t seq = 0;; ++seq) {
    std::optional<Table> t = co_await ctx.blocking(std::ref(next));
    if (!t) break;
    Message m{0, seq, std::move(*t)};
    const bool sent = co_await ctx.send(0, std::move(m));
    if (!sent) break;  // the consumer stopped
  }
}

Actor run_map(Context& ctx, std::function<std::optional<Table>(Table&&)> fn, MemoryType tier) {
  for (;;) {
    std::optional<Message> in = co_await ctx.receive(0, tier);
    if (!in) break;
    std::optional<Table> t = fn(std::move(in->table));
    if (!t) continue;
    Message out{in->partition, in->sequence, std::move(*t)};
    const bool sent = co_await ctx.send(0, std::move(out));
    if (!sent) break;
  }
}

Actor run_concat(Context& ctx, MemoryType tier) {
  std::uint64_t seq = 0;
  for (std::size_t i = 0; i < ctx.inputs(); ++i) {
    for (;;) {
      std::optional<Message> in = co_await ctx.receive(i, tier);
      if (!in) break;
      in->sequence = seq++;
      const bool sent = co_await ctx.send(0, std::move(*in));
      if (!sent) co_return;
    }
  }
}

Actor run_sink(Context& ctx, std::function<void(Message&&)> fn, MemoryType tier) {
  for (;;) {
    std::optional<Message> in = co_await ctx.receive(0, tier);
    if (!in) break;
    fn(std::move(*in));
  }
}

}  // namespace

ActorBody source(TableSource next) {
  return [next = std::move(next)](Context& ctx) { return run_source(ctx, next); };
}

ActorBody map(std::function<std::optional<Table>(Table&&)> fn, MemoryType tier) {
  return [fn = std::move(fn), tier](Context& ctx) { return run_map(ctx, fn, tier); };
}

ActorBody concat(MemoryType tier) {
  return [tier](Context& ctx) { return run_concat(ctx, tier); };
}

ActorBody sink(std::function<void(Message&&)> fn, MemoryType tier) {
  return [fn = std::move(fn), tier](Context& ctx) { return run_sink(ctx, fn, tier); };
}

ActorBody collect(SpillableTables& into, MemoryType tier) {
  return sink([&into](Message&& m) { into.push(std::move(m.table)); }, tier);
}

}  // namespace spillway::streaming
