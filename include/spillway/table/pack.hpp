#pragma once
/// @file pack.hpp
/// Packing tables into one contiguous payload and back (CPU implementation, host memory).

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/column_view.hpp>
#include <spillway/table/packed_data.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <span>
#include <vector>

namespace spillway {

/// A table unpacked without copying: views into the payload it keeps alive. Move-only.
class UnpackedTable {
 public:
  UnpackedTable(PackedData packed, TableView view)
      : packed_{std::move(packed)}, view_{std::move(view)} {}
  [[nodiscard]] const TableView& view() const noexcept { return view_; }
  [[nodiscard]] const PackedData& packed() const noexcept { return packed_; }
  /// Hands the packed data back (the view is then dangling).
  PackedData release() && { return std::move(packed_); }

 private:
  PackedData packed_;
  TableView view_;
};

/// Packs `table` (host memory) into a HOST payload. @throws spillway::out_of_memory
PackedData pack(const TableView& table, BufferResource& br);

/// Splits `table` at the row indices `splits` (ascending, each ≤ rows) into splits.size() + 1
/// parts and packs each into its own HOST payload, without an intermediate table.
/// @throws spillway::logic_error for bad split points.
std::vector<PackedData> split_and_pack(const TableView& table, std::span<const std::size_t> splits,
                                       BufferResource& br);

/// Views the payload as a table after checking every length and offset (the metadata and, for
/// strings, the offsets themselves). A DEVICE payload is checked on the GPU (gpu::unpack on the
/// payload's stream) and viewed in device memory.
/// @throws spillway::corrupt_data_error naming the problem; spillway::logic_error for a payload
///         on DISK.
UnpackedTable unpack(PackedData packed);

/// The unpacked table as a Table, without a copy: its columns are views of the payload, which
/// they hold until the last of them goes (the payload's memory stays counted until then).
Table to_table(UnpackedTable unpacked);

/// Concatenates tables of the same schema in host memory into one new table on tier `to`
/// (HOST, PINNED_HOST, or DEVICE: the values and characters are copied straight to the GPU,
/// through pinned staging when large; string offsets and validity are made on the host first).
/// One copy of an imported Arrow batch (or several) into spillway's memory. Done on return.
/// @throws spillway::logic_error when the schemas differ, or for DISK
Table concat(std::span<const TableView> tables, BufferResource& br,
             MemoryType to = MemoryType::HOST, Stream stream = {});

/// unpack() each, then concat(); the schemas must agree. A payload that is not in host memory
/// (on DISK after a spill, or on the GPU) is moved to HOST first. A single chunk is not copied
/// (to_table of its unpacked payload).
Table unpack_and_concat(std::vector<PackedData> packed, BufferResource& br);

}  // namespace spillway
