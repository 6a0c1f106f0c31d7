// The distributed group-by (groupby.hpp): partial aggregates per piece, one Shuffler of them
// by key, the final aggregation per local partition as each completes.
#include <spillway/ops/groupby.hpp>

#include <spillway/core/error.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/table/gpu_groupby.hpp>
#include <spillway/table/spillable_tables.hpp>

#include "ops/detail/pieces.hpp"

#include <array>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spillway::ops {

namespace {

/// The two steps of each aggregation: the partial aggregations of the input's columns, and
/// the final ones of the partial table's columns (the keys first, then the partials in
/// order; a mean's sum and count are two partials, divided at the end).
struct Plan {
  std::vector<Aggregation> partial;
  std::vector<Aggregation> final;
  std::vector<std::string> names;  // of the output's aggregation columns
};

Plan plan_of(const TableView& input, std::size_t nkeys, std::span<const Aggregation> aggs) {
  Plan p;
  for (const Aggregation& a : aggs) {
    const std::size_t at = nkeys + p.partial.size();
    if (a.op == AggOp::mean) {
      p.partial.push_back({a.column, AggOp::sum});
      p.partial.push_back({a.column, AggOp::count});
      p.final.push_back({at, AggOp::sum});
      p.final.push_back({at + 1, AggOp::sum});
    } else {
      p.partial.push_back(a);
      p.final.push_back({at, a.op == AggOp::count ? AggOp::sum : a.op});
    }
    p.names.push_back((input.names.empty() ? std::to_string(a.column) : input.names[a.column]) +
                      "_" + to_string(a.op));
  }
  return p;
}

Table aggregate(const TableView& t, std::span<const std::size_t> keys,
                std::span<const Aggregation> aggs, bool device, BufferResource& br) {
  return device ? gpu::groupby(t, keys, aggs, br, br.stream()) : groupby(t, keys, aggs, br);
}

/// One local partition's partials aggregated into its groups (the partial schema: keys, then
/// the partials). The chunks go in batches of at most `budget` bytes (at least one chunk),
/// each concatenated with the groups so far and aggregated again; the chunks not yet taken
/// wait in SpillableTables, so that the tiers can move them down meanwhile.
Table merged(Shuffler& s, PartID pid, const Table& partial_schema, std::size_t nkeys,
             const Plan& plan, bool device, std::size_t budget, BufferResource& br) {
  std::vector<std::size_t> keys(nkeys);
  std::iota(keys.begin(), keys.end(), std::size_t{0});
  SpillableTables waiting(br);
  for (PackedData& c : s.extract(pid)) waiting.push(std::move(c));
  std::optional<Table> groups;
  while (waiting.size() > 0) {
    std::vector<PackedData> batch;
    std::size_t taken = 0;
    for (auto next = waiting.front_bytes(); next; next = waiting.front_bytes()) {
      if (!batch.empty() && taken + *next > budget) break;
      taken += *next;
      batch.push_back(*waiting.pop_packed());
    }
    Table part = detail::unpacked(std::move(batch), device, br);
    if (groups) {
      const std::array<TableView, 2> both{groups->view(), part.view()};
      part = detail::concatenated(both, device, br);
      groups.reset();
    }
    groups = aggregate(part.view(), keys, plan.final, device, br);
  }
  // No rank had rows of it: the groups of none.
  return groups ? std::move(*groups)
                : aggregate(partial_schema.view(), keys, plan.final, device, br);
}

/// The final table of one partition from its merged partials: the keys, then each aggregation
/// (a mean from its sum and count), named as a local group-by names them.
Table finish(Table&& merged, std::size_t nkeys, std::span<const Aggregation> original,
             const Plan& plan, bool device, BufferResource& br) {
  const TableView mv = merged.view();
  std::vector<std::string> names(merged.names().begin(), merged.names().begin() + nkeys);
  std::vector<Column> all = std::move(merged).release();
  std::vector<Column> columns;
  for (std::size_t k = 0; k < nkeys; ++k) columns.push_back(std::move(all[k]));
  std::size_t at = nkeys;
  for (std::size_t i = 0; i < original.size(); ++i) {
    if (original[i].op == AggOp::mean) {
      const ColumnView& sums = mv.columns[at];
      const ColumnView& counts = mv.columns[at + 1];
      columns.push_back(device ? gpu::mean_of(sums, counts, br, br.stream())
                               : mean_of(sums, counts, br));
      at += 2;
    } else {
      columns.push_back(std::move(all[at]));
      ++at;
    }
    names.push_back(plan.names[i]);
  }
  return Table(std::move(columns), std::move(names));
}

}  // namespace

void groupby(Communicator& comm, BufferResource& br, const TableSource& input,
             std::span<const std::size_t> keys, std::span<const Aggregation> aggregations,
             const GroupByOptions& options,
             const std::function<void(std::uint32_t, Table&&)>& out) {
  Table first = detail::first_piece(input, "groupby's");
  const bool device = detail::in_device_memory(first);
  const Table schema = detail::empty_like(first.view(), device, br);
  // The arguments are checked before any rank has sent anything: a group-by of the schema.
  (void)groupby(schema.view(), keys, aggregations, br);
  const Plan plan = plan_of(first.view(), keys.size(), aggregations);
  std::vector<std::size_t> partial_keys(keys.size());
  std::iota(partial_keys.begin(), partial_keys.end(), std::size_t{0});
  const Table partial_schema = aggregate(schema.view(), keys, plan.partial, device, br);
  const std::uint32_t partitions =
      options.partitions != 0 ? options.partitions : static_cast<std::uint32_t>(comm.nranks());
  Shuffler s(comm, options.op, partitions, br);
  detail::naming_failed_peers(comm, {&s}, [&] {
    for (std::optional<Table> piece = std::move(first); piece; piece = input()) {
      detail::check_piece(*piece, schema, device);
      if (piece->num_rows() == 0) continue;
      const Table partial = aggregate(piece->view(), keys, plan.partial, device, br);
      piece.reset();
      auto chunks =
          detail::partitioned(partial.view(), partial_keys, partitions, device, br, options.seed);
      if (!chunks.empty()) s.insert(std::move(chunks));
    }
    s.insert_finished();
    const std::size_t limit = br.limit(device ? MemoryType::DEVICE : MemoryType::HOST);
    const std::size_t budget = options.merge_bytes != 0
                                   ? options.merge_bytes
                                   : (limit == unlimited_bytes ? unlimited_bytes : limit / 8);
    for (std::size_t done = 0; done < s.local_partitions().size(); ++done) {
      const PartID pid = s.wait_any(comm.timeout());
      Table groups = merged(s, pid, partial_schema, keys.size(), plan, device, budget, br);
      out(pid, finish(std::move(groups), keys.size(), aggregations, plan, device, br));
    }
  });
}

}  // namespace spillway::ops
