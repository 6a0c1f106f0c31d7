#pragma once
/// @file sort.hpp
/// The distributed sort: each rank samples its rows, the samples are allgathered and give
/// nranks - 1 splitters, every row goes through a Shuffler to the rank whose range holds it,
/// and each rank sorts its range locally. Rank r ends with the r-th range of the global order.
/// Ties are broken by where a row came from (its rank, then its place in that rank's input),
/// in the splitters too: the sort is stable over the ranks, and many equal keys are spread over
/// the ranks like any others instead of landing on one. With a limit (top-k) no shuffle runs:
/// each rank keeps its own first `limit` rows, those are allgathered, and rank 0 keeps the
/// first `limit` of them.

#include <spillway/comm/communicator.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/ops/table_source.hpp>
#include <spillway/table/sort.hpp>
#include <spillway/table/table.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>

namespace spillway::ops {

struct SortOptions {
  /// Rows sampled per rank (in proportion to the rank's share of all rows) for the splitters.
  std::size_t samples_per_rank{1024};
  /// Keep only the first `limit` rows of the global order, all on rank 0 (top-k).
  std::optional<std::uint64_t> limit;
  /// The shuffle uses `op`, the collectives (row counts, samples) op + 1.
  OpID op{0};
};

/// Sorts the distributed `input` (each rank its pieces, host tables of one schema) on `keys`
/// and calls `out` once with this rank's range of the global order, sorted (HOST; without rows
/// when the range is empty). Pieces wait spillable until the splitters are known; a rank's
/// range must fit its HOST tier to be sorted. Collective: every rank calls it with the same
/// keys and options.
/// @throws spillway::logic_error for bad keys, a source without pieces, pieces of another
///         schema, or tables in device memory; spillway::comm_error for a dead or stuck peer;
///         spillway::out_of_memory when a range cannot be sorted within the limits
void sort(Communicator& comm, BufferResource& br, const TableSource& input,
          std::span<const SortKey> keys, const SortOptions& options,
          const std::function<void(Table&&)>& out);

}  // namespace spillway::ops
