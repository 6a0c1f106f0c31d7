// place_partitions: a whole table placed in partition order column group by column group,
// each group's copy taking its input columns' place (gpu.hpp).
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/event.hpp>
#include <spillway/stats/memory_profiler.hpp>
#include <spillway/table/gpu.hpp>

#include <algorithm>

namespace spillway::gpu {

PlacedPartitions place_partitions(Table&& table, std::span<const std::size_t> keys,
                                  std::size_t num_partitions, BufferResource& br, Stream stream,
                                  std::uint32_t seed, std::uint32_t groups) {
  SPILLWAY_EXPECTS(groups > 0, "place_partitions: 0 column groups");
  const TableView v = table.view();
  for (std::size_t c = 0; c < v.num_columns(); ++c) {
    SPILLWAY_EXPECTS(table.column(c).data().mem_type() == MemoryType::DEVICE,
                     "place_partitions: column " + std::to_string(c) + " is not in device memory");
  }
  SPILLWAY_MEMORY_PROFILE(br.statistics().memory_profiler(), "partition_and_pack");
  PartitionPlan plan(v, keys, num_partitions, br, stream, seed);  // (checks the columns)
  PlacedPartitions out{plan.offsets(), {}, groups};
  const std::vector<std::size_t>& offsets = out.offsets;
  out.parts.resize(num_partitions);
  // The views of a group are on a stream of their own that waits for its placement alone.
  struct Placed {
    OwningStream ready;
    std::vector<std::unique_ptr<Buffer>> columns;  // freed on the resource's stream
  };
  const std::size_t rows = v.num_rows();
  std::vector<Column> inputs = std::move(table).release();
  const std::size_t ncols = inputs.size();
  groups = out.groups = static_cast<std::uint32_t>(std::min<std::size_t>(ncols, groups));
  for (std::size_t first = 0; first < ncols;) {
    std::size_t last = first;
    while (last < ncols && column_group(last, ncols, groups) == column_group(first, ncols, groups))
      ++last;
    auto placed = std::make_shared<Placed>();
    std::vector<std::byte*> outs;
    for (std::size_t c = first; c < last; ++c) {
      placed->columns.push_back(
          br.allocate(MemoryType::DEVICE, rows * size_of(v.columns[c].type), stream));
      outs.push_back(placed->columns.back()->data());
    }
    plan.place(first, last, outs, stream);
    Event done;
    done.record(stream);
    done.wait_on(placed->ready.view());
    for (std::size_t c = first; c < last; ++c) {
      // The input column is freed in order on its stream, after its placement.
      const Stream input_stream = inputs[c].data().stream();
      if (input_stream != stream) done.wait_on(input_stream);
      { Column consumed = std::move(inputs[c]); }
      const std::size_t width = size_of(v.columns[c].type);
      for (std::size_t p = 0; p < num_partitions; ++p) {
        out.parts[p].push_back(BufferResource::view(*placed->columns[c - first], offsets[p] * width,
                                                    (offsets[p + 1] - offsets[p]) * width, placed,
                                                    placed->ready.view()));
      }
    }
    first = last;
  }
  return out;
}

}  // namespace spillway::gpu
