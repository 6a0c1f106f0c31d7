// The distributed hash join (hash_join.hpp): two Shufflers, then a local join per partition
// pair as soon as both sides are in.
#include <spillway/ops/hash_join.hpp>

#include <spillway/core/error.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/partition.hpp>

#include <array>
#include <chrono>
#include <set>
#include <unordered_map>

namespace spillway::ops {

namespace {

/// Partitions `side` and inserts all of it into `s`.
void insert_side(Shuffler& s, const TableView& side, std::span<const std::size_t> keys,
                 std::uint32_t partitions, BufferResource& br, std::uint32_t seed) {
  auto packed = partition_and_pack(side, keys, partitions, br, seed);
  std::unordered_map<PartID, PackedData> chunks;
  for (PartID p = 0; p < partitions; ++p) {
    if (packed[p].payload != nullptr && packed[p].payload->size() > 0) {
      chunks.emplace(p, std::move(packed[p]));
    }
  }
  s.insert_finished(std::move(chunks));
}

/// One side of a partition: its chunks unpacked into one table, or the side's schema with no
/// rows when no rank had any.
Table side_of(Shuffler& s, PartID pid, const TableView& schema, BufferResource& br) {
  std::vector<PackedData> chunks = s.extract(pid);
  if (chunks.empty()) return gather(schema, {}, br);
  return unpack_and_concat(std::move(chunks), br);
}

}  // namespace

void hash_join(Communicator& comm, BufferResource& br, const TableView& left,
               std::span<const std::size_t> left_keys, const TableView& right,
               std::span<const std::size_t> right_keys, const HashJoinOptions& options,
               const std::function<void(std::uint32_t, Table&&)>& out) {
  // The keys are checked here, before any rank has sent anything (an empty join of the
  // schemas: the same checks as every partition's).
  (void)join_maps(gather(left, {}, br).view(), left_keys, gather(right, {}, br).view(), right_keys,
                  options.type);
  const std::uint32_t partitions =
      options.partitions != 0 ? options.partitions : static_cast<std::uint32_t>(comm.nranks());
  Shuffler ls(comm, options.op, partitions, br);
  Shuffler rs(comm, static_cast<OpID>(options.op + 1), partitions, br);
  insert_side(ls, left, left_keys, partitions, br, options.seed);
  insert_side(rs, right, right_keys, partitions, br, options.seed);
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
        const bool late = std::chrono::steady_clock::now() > deadline;
        // Past the timeout, wait_any says what is missing (a comm_error).
        const auto got = late ? std::optional(sides[i]->wait_any(std::chrono::milliseconds(1)))
                              : sides[i]->try_wait_any(std::chrono::milliseconds(1));
        if (got) {
          arrived[i].insert(*got);
          ++handed[i];
          progressed = true;
        }
      }
      if (progressed) deadline = std::chrono::steady_clock::now() + comm.timeout();
    }
    arrived[0].erase(ready);
    arrived[1].erase(ready);
    const Table l = side_of(ls, ready, left, br);
    const Table r = side_of(rs, ready, right, br);
    out(ready, spillway::hash_join(l.view(), left_keys, r.view(), right_keys, options.type, br));
    ++joined;
  }
}

}  // namespace spillway::ops
