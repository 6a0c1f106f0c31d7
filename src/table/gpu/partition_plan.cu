// gpu::PartitionPlan: pass 1 of the GPU partitioning once, then pass 3 a group of columns at
// a time (the passes: partition.cu and detail/partition_passes.cuh).
#include <spillway/table/gpu.hpp>

#include "table/gpu/detail/partition_passes.cuh"

#include <variant>

namespace spillway::gpu {

struct PartitionPlan::Impl {
  TableView table;
  BufferResource& br;
  std::variant<Counted<std::uint16_t>, Counted<std::uint32_t>> counted;
  std::unique_ptr<Buffer> columns;  // the table's DeviceColumns
  std::vector<std::size_t> offsets;
  // Many partitions: each row's place, or its rank in its tile with the tiles' offsets
  // (staged), found by the first place().
  std::unique_ptr<Buffer> pos;
  std::unique_ptr<Buffer> tile_offsets;
};

PartitionPlan::PartitionPlan(const TableView& table, std::span<const std::size_t> keys,
                             std::size_t num_partitions, BufferResource& br, Stream stream,
                             std::uint32_t seed) {
  check_args(table, keys, num_partitions);
  for (std::size_t c = 0; c < table.num_columns(); ++c) {
    const ColumnView& col = table.columns[c];
    SPILLWAY_EXPECTS(is_fixed_width(col.type) && !col.nullable(),
                     "PartitionPlan: column " + std::to_string(c) +
                         " is not fixed-width without a mask (use partition_and_pack)");
  }
  using Counts = decltype(Impl::counted);
  Counts counted =
      num_partitions <= 0xFFFF
          ? Counts{count_rows<std::uint16_t>(table, keys, num_partitions, seed, br, stream)}
          : Counts{count_rows<std::uint32_t>(table, keys, num_partitions, seed, br, stream)};
  auto columns = detail::to_device(device_columns(table), br, stream);
  impl_.reset(new Impl{table, br, std::move(counted), std::move(columns), {}, nullptr, nullptr});
  std::visit(
      [&](auto& c) {
        std::vector<std::uint32_t> starts(num_partitions + 1);
        detail::to_host(starts, c.starts->data(), stream);  // synchronizes
        impl_->offsets.assign(starts.begin(), starts.end());
      },
      impl_->counted);
}

PartitionPlan::~PartitionPlan() = default;
PartitionPlan::PartitionPlan(PartitionPlan&&) noexcept = default;
PartitionPlan& PartitionPlan::operator=(PartitionPlan&&) noexcept = default;

const std::vector<std::size_t>& PartitionPlan::offsets() const noexcept {
  return impl_->offsets;
}

void PartitionPlan::place(std::size_t first, std::size_t last, std::span<std::byte* const> outs,
                          Stream stream) {
  Impl& s = *impl_;
  const std::size_t parts = s.offsets.size() - 1;
  SPILLWAY_EXPECTS(first <= last && last <= s.table.num_columns(),
                   "PartitionPlan::place: columns [" + std::to_string(first) + ", " +
                       std::to_string(last) + ") of " + std::to_string(s.table.num_columns()));
  SPILLWAY_EXPECTS(outs.size() == last - first,
                   "PartitionPlan::place: " + std::to_string(outs.size()) + " outputs for " +
                       std::to_string(last - first) + " columns");
  if (first == last || s.table.num_rows() == 0) return;
  DestStaging staging((last - first) * parts, s.br, stream);
  const std::span<Dest> dest = staging.dests();
  for (std::size_t c = first; c < last; ++c) {
    const std::size_t width = size_of(s.table.columns[c].type);
    for (std::size_t p = 0; p < parts; ++p) {
      dest[(c - first) * parts + p] =
          Dest{outs[c - first] + s.offsets[p] * width, nullptr, nullptr, 0, 0};
    }
  }
  const DeviceDests d_dest = staging.upload();
  std::visit(
      [&](const auto& c) {
        const auto* cols = as<const DeviceColumn>(*s.columns) + first;
        if (parts >= wide_partitions) {  // the rows' places once, then scatters per call
          // (staged for the table's widest column, so that every call may stage)
          const std::size_t widest = max_width(s.table, 0, s.table.num_columns());
          const bool staged = stages(c.tl, widest);
          const auto* cursors = as<const std::uint32_t>(*c.hist);
          if (!s.pos) {
            if (staged) s.tile_offsets = tile_offsets(c, cursors, s.br, stream);
            s.pos = s.br.allocate(MemoryType::DEVICE, c.tl.rows * place_width(staged), stream);
            find_places(c, 0, c.tl.tiles, as<std::uint32_t>(*c.hist), *s.pos, s.tile_offsets.get(),
                        stream);
          }
          scatter_places(c, cursors, *s.pos, s.tile_offsets.get(), 0, c.tl.tiles, cols,
                         last - first, widest, d_dest.dest, /*contiguous=*/true, stream);
          return;
        }
        // Where the place pass advances its cursors in place, each call works on a copy.
        std::unique_ptr<Buffer> copy;
        if (advances(c, /*wide_split=*/true)) {
          copy = s.br.allocate(MemoryType::DEVICE, c.hist->size(), stream);
          cuda::memcpy_async(copy->data(), c.hist->data(), c.hist->size(), stream);
        }
        place_rows(c, as<std::uint32_t>(copy ? *copy : *c.hist),
                   as<const DeviceColumn>(*s.columns) + first, last - first, d_dest, stream,
                   /*wide_split=*/true);
      },
      s.counted);
}

}  // namespace spillway::gpu
