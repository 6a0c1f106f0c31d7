#pragma once
/// @file gather.hpp
/// Gather: a new table of chosen rows of a host table (cuDF's gather), a row index of -1
/// giving a row of nulls (the unmatched side of an outer join).

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/column_view.hpp>
#include <spillway/table/table.hpp>

#include <cstdint>
#include <span>

namespace spillway {

/// The rows `rows` of `table` (host memory), in that order, as a new HOST table with the same
/// names and types. A row of -1 is null in every column (so the output columns have validity
/// masks when any row is -1 or an input row is null).
/// @throws spillway::logic_error for a row outside the table; spillway::out_of_memory
Table gather(const TableView& table, std::span<const std::int64_t> rows, BufferResource& br);

}  // namespace spillway
