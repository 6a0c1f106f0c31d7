// The distributed hash join (hash_join.hpp): the plan (ops/detail/join_plan.hpp), then either
// two Shufflers and a chunked local join per partition pair as soon as both sides are in, or
// the right side allgathered and each rank's left rows joined against it; on the CPU or, for
// tables in device memory, the GPU.
#include <spillway/ops/hash_join.hpp>

#include <spillway/comm/collectives.hpp>
#include <spillway/core/error.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/gpu_join.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/partition.hpp>

#include "ops/detail/join_plan.hpp"
#include "ops/detail/pieces.hpp"

#include <array>
#include <chrono>
#include <optional>
#include <set>
#include <unordered_map>

namespace spillway::ops {

namespace {

using Out = std::function<void(std::uint32_t, Table&&)>;

/// Checks the keys before any rank has sent anything: an empty join of the schemas (the same
/// checks as every partition's).
void check_keys(const Table& left, std::span<const std::size_t> left_keys, const Table& right,
                std::span<const std::size_t> right_keys, JoinType type) {
  (void)join_maps(left.view(), left_keys, right.view(), right_keys, type);
}

/// The chunked local join of one pair, each chunk to out(partition, chunk).
void join_pair(const TableView& l, std::span<const std::size_t> left_keys, const TableView& r,
               std::span<const std::size_t> right_keys, const JoinPlan& plan, JoinType type,
               BufferResource& br, std::uint32_t partition, const Out& out) {
  const auto chunk = [&](Table&& t) { out(partition, std::move(t)); };
  if (plan.device) {
    gpu::hash_join(l, left_keys, r, right_keys, type, br, br.stream(), plan.chunk_rows, chunk);
  } else {
    spillway::hash_join(l, left_keys, r, right_keys, type, br, plan.chunk_rows, chunk);
  }
}

/// Joins each local partition pair of the two shuffles as soon as both of its sides are in.
void join_partitions(Communicator& comm, BufferResource& br, Shuffler& ls, const Table& lschema,
                     std::span<const std::size_t> left_keys, Shuffler& rs, const Table& rschema,
                     std::span<const std::size_t> right_keys, JoinType type, const JoinPlan& plan,
                     const Out& out) {
  const std::size_t local = ls.local_partitions().size();
  std::array<Shuffler*, 2> sides{&ls, &rs};
  std::array<std::set<PartID>, 2> arrived;  // handed out by wait, not yet joined
  std::array<std::size_t, 2> handed{0, 0};
  for (std::size_t joined = 0; joined < local;) {
    auto deadline = std::chrono::steady_clock::now() + comm.timeout();
    PartID ready = 0;
    for (;;) {
      bool found = false;
      for (PartID p : arrived[0]) {
        if (arrived[1].count(p) != 0) {
          ready = p;
          found = true;
          break;
        }
      }
      if (found) break;
      bool progressed = false;
      for (std::size_t i = 0; i < 2; ++i) {
        if (handed[i] == local) continue;
        if (const auto got = sides[i]->try_wait_any(std::chrono::milliseconds(1))) {
          arrived[i].insert(*got);
          ++handed[i];
          progressed = true;
        }
      }
      if (progressed) {
        deadline = std::chrono::steady_clock::now() + comm.timeout();
      } else if (std::chrono::steady_clock::now() > deadline) {
        SPILLWAY_FAIL(comm.logger().prefix() +
                          "hash_join: no partition of either side arrived in " +
                          std::to_string(comm.timeout().count()) + " ms; left side " + ls.status() +
                          "; right side " + rs.status(),
                      comm_error);
      }
    }
    arrived[0].erase(ready);
    arrived[1].erase(ready);
    const Table l = detail::extract_table(ls, ready, lschema, plan.device, br);
    const Table r = detail::extract_table(rs, ready, rschema, plan.device, br);
    join_pair(l.view(), left_keys, r.view(), right_keys, plan, type, br, ready, out);
    ++joined;
  }
}

/// Both sides in the same kind of memory. @returns whether that is device memory
bool same_memory(const Table& left, const Table& right) {
  const bool device = detail::in_device_memory(left);
  SPILLWAY_EXPECTS(device == detail::in_device_memory(right),
                   std::string("hash_join: the left side is ") +
                       (device ? "in device memory and the right side is not"
                               : "not in device memory and the right side is"));
  return device;
}

/// How one side's pieces are partitioned and inserted into its Shuffler.
struct Side {
  Shuffler& s;
  const Table& schema;
  std::span<const std::size_t> keys;
  std::uint32_t partitions;
  bool device;
  BufferResource& br;
  std::uint32_t seed;

  /// Partitions `piece` and inserts its chunks; the piece is freed once packed.
  void insert(Table piece) const {
    detail::check_piece(piece, schema, device);
    if (piece.num_rows() == 0) return;
    auto chunks = detail::partitioned(piece.view(), keys, partitions, device, br, seed);
    piece = Table();
    if (!chunks.empty()) s.insert(std::move(chunks));
  }
  /// insert() of every further piece of `next`, one at a time, then insert_finished().
  void insert_rest(const TableSource& next) const {
    while (std::optional<Table> piece = next()) insert(std::move(*piece));
    s.insert_finished();
  }
};

/// `first` and every further piece of `next`, concatenated (on the GPU for device memory).
Table whole(Table first, const TableSource& next, const Table& schema, bool device,
            BufferResource& br) {
  std::vector<Table> pieces;
  for (std::optional<Table> piece = std::move(first); piece; piece = next()) {
    detail::check_piece(*piece, schema, device);
    pieces.push_back(std::move(*piece));
  }
  if (pieces.size() == 1) return std::move(pieces.front());
  std::vector<TableView> views;
  for (const Table& t : pieces) views.push_back(t.view());
  return detail::concatenated(views, device, br);
}

/// The broadcast plan: the whole right side on every rank, this rank's left rows against it.
void broadcast_join(Communicator& comm, BufferResource& br, const TableView& left,
                    std::span<const std::size_t> left_keys, const TableView& right,
                    std::span<const std::size_t> right_keys, const HashJoinOptions& options,
                    const JoinPlan& plan, const Out& out) {
  const Table all =
      detail::allgather_table(comm, br, right, plan.device, static_cast<OpID>(options.op + 2));
  join_pair(left, left_keys, all.view(), right_keys, plan, options.type, br,
            static_cast<std::uint32_t>(comm.rank()), out);
}

}  // namespace

JoinPlan hash_join(Communicator& comm, BufferResource& br, const TableView& left,
                   std::span<const std::size_t> left_keys, const TableView& right,
                   std::span<const std::size_t> right_keys, const HashJoinOptions& options,
                   const Out& out) {
  const Table lschema = gather(left, {}, br);
  const Table rschema = gather(right, {}, br);
  check_keys(lschema, left_keys, rschema, right_keys, options.type);
  const JoinPlan plan =
      detail::choose_plan(comm, br, options, lschema, rschema, false,
                          detail::SideBytes{left.total_bytes(), right.total_bytes()});
  if (plan.kind == JoinPlan::Kind::broadcast) {
    broadcast_join(comm, br, left, left_keys, right, right_keys, options, plan, out);
    return plan;
  }
  Shuffler ls(comm, options.op, plan.partitions, br);
  Shuffler rs(comm, static_cast<OpID>(options.op + 1), plan.partitions, br);
  detail::naming_failed_peers(comm, {&ls, &rs}, [&] {
    ls.insert_finished(
        detail::partitioned(left, left_keys, plan.partitions, false, br, options.seed));
    rs.insert_finished(
        detail::partitioned(right, right_keys, plan.partitions, false, br, options.seed));
    join_partitions(comm, br, ls, lschema, left_keys, rs, rschema, right_keys, options.type, plan,
                    out);
  });
  return plan;
}

JoinPlan hash_join(Communicator& comm, BufferResource& br, Table&& left,
                   std::span<const std::size_t> left_keys, Table&& right,
                   std::span<const std::size_t> right_keys, const HashJoinOptions& options,
                   const Out& out) {
  const bool device = same_memory(left, right);
  if (!device) {
    return hash_join(comm, br, left.view(), left_keys, right.view(), right_keys, options, out);
  }
  const Table lschema = detail::empty_like(left.view(), true, br);
  const Table rschema = detail::empty_like(right.view(), true, br);
  check_keys(lschema, left_keys, rschema, right_keys, options.type);
  const JoinPlan plan =
      detail::choose_plan(comm, br, options, lschema, rschema, true,
                          detail::SideBytes{left.total_bytes(), right.total_bytes()});
  if (plan.kind == JoinPlan::Kind::broadcast) {
    broadcast_join(comm, br, left.view(), left_keys, right.view(), right_keys, options, plan, out);
    return plan;
  }
  Shuffler ls(comm, options.op, plan.partitions, br);
  Shuffler rs(comm, static_cast<OpID>(options.op + 1), plan.partitions, br);
  detail::naming_failed_peers(comm, {&ls, &rs}, [&] {
    ls.insert_finished(std::move(left), left_keys, options.seed);
    rs.insert_finished(std::move(right), right_keys, options.seed);
    join_partitions(comm, br, ls, lschema, left_keys, rs, rschema, right_keys, options.type, plan,
                    out);
  });
  return plan;
}

JoinPlan hash_join(Communicator& comm, BufferResource& br, const TableSource& left,
                   std::span<const std::size_t> left_keys, const TableSource& right,
                   std::span<const std::size_t> right_keys, const HashJoinOptions& options,
                   const Out& out) {
  Table l = detail::first_piece(left, "hash_join's left");
  Table r = detail::first_piece(right, "hash_join's right");
  const bool device = same_memory(l, r);
  const Table lschema = detail::empty_like(l.view(), device, br);
  const Table rschema = detail::empty_like(r.view(), device, br);
  check_keys(lschema, left_keys, rschema, right_keys, options.type);
  const JoinPlan plan =
      detail::choose_plan(comm, br, options, lschema, rschema, device, std::nullopt);
  if (plan.kind == JoinPlan::Kind::broadcast) {
    const Table all =
        detail::allgather_table(comm, br, whole(std::move(r), right, rschema, device, br).view(),
                                device, static_cast<OpID>(options.op + 2));
    for (std::optional<Table> piece = std::move(l); piece; piece = left()) {
      detail::check_piece(*piece, lschema, device);
      join_pair(piece->view(), left_keys, all.view(), right_keys, plan, options.type, br,
                static_cast<std::uint32_t>(comm.rank()), out);
    }
    return plan;
  }
  Shuffler ls(comm, options.op, plan.partitions, br);
  Shuffler rs(comm, static_cast<OpID>(options.op + 1), plan.partitions, br);
  detail::naming_failed_peers(comm, {&ls, &rs}, [&] {
    const Side lside{ls, lschema, left_keys, plan.partitions, device, br, options.seed};
    const Side rside{rs, rschema, right_keys, plan.partitions, device, br, options.seed};
    // The right side's first piece goes in first: it then waits for its turn spillable (in the
    // Shuffler), not whole in this frame while the left side is inserted.
    rside.insert(std::move(r));
    lside.insert(std::move(l));
    lside.insert_rest(left);
    rside.insert_rest(right);
    join_partitions(comm, br, ls, lschema, left_keys, rs, rschema, right_keys, options.type, plan,
                    out);
  });
  return plan;
}

}  // namespace spillway::ops
