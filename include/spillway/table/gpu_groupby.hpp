#pragma once
/// @file gpu_groupby.hpp
/// The local hash group-by on the GPU, for a table whose columns are in device memory: the
/// same groups as groupby.hpp's (the same multiset of output rows, columns, types and names;
/// nulls form their own group, null values are skipped), made by kernels.
///
/// Each row finds its group's slot in an open-addressed table of (32-bit row hash, first row)
/// slots, claiming an empty one by compare-and-swap when its key is new; a scan of the claimed
/// slots numbers the groups; each aggregation is then accumulated by atomics, one thread per
/// row. The groups come in no particular order. Sums and means of floats are added in no
/// particular order either, so they can differ from the CPU's in the last bits; integer
/// results are exact. Every byte comes from the BufferResource's DEVICE tier on `stream`,
/// which is synchronized once (for the group count). In a build without CUDA it throws
/// spillway::logic_error.

#include <spillway/core/stream.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/groupby.hpp>
#include <spillway/table/table.hpp>

#include <span>

namespace spillway::gpu {

/// spillway::groupby on the GPU: a DEVICE table of the groups.
/// @throws spillway::logic_error as spillway::groupby, or for 2^31 rows or more;
///         spillway::out_of_memory
Table groupby(const TableView& table, std::span<const std::size_t> keys,
              std::span<const Aggregation> aggregations, BufferResource& br, Stream stream);

/// spillway::mean_of on the GPU: a DEVICE column.
Column mean_of(const ColumnView& sums, const ColumnView& counts, BufferResource& br, Stream stream);

}  // namespace spillway::gpu
