#include <spillway/table/pack.hpp>

#include <spillway/core/error.hpp>
#include <spillway/memory/memory_step.hpp>
#include <spillway/stats/memory_profiler.hpp>
#include <spillway/table/gpu.hpp>

#include "core/detail/nvtx.hpp"

#include <spillway/table/pack_format.hpp>
#include "table/detail/arguments.hpp"
#include "table/detail/cpu_threads.hpp"

#include <cstring>
#include <optional>

namespace spillway {

namespace {

/// Writes rows [a, b) of `t` into `payload` laid out as `layout`.
void write_part(const TableView& t, const detail::PackLayout& layout, std::size_t a, std::size_t b,
                std::byte* payload) {
  const std::size_t rows = b - a;
  for (std::size_t c = 0; c < t.num_columns(); ++c) {
    const ColumnView& col = t.columns[c];
    const detail::ColumnLayout& cl = layout.columns[c];
    if (cl.nullable) {
      auto* mask = reinterpret_cast<std::uint8_t*>(payload + cl.mask.offset);
      if (cl.mask.size > 0) std::memset(mask, 0, cl.mask.size);
      detail::copy_bits(mask, 0, col.null_mask, a, rows);
    }
    if (col.type == TypeId::STRING) {
      auto* off = reinterpret_cast<std::int32_t*>(payload + cl.offsets.offset);
      const std::int32_t base = col.offsets[a];
      for (std::size_t i = 0; i <= rows; ++i) off[i] = col.offsets[a + i] - base;
      if (cl.data.size > 0) {
        std::memcpy(payload + cl.data.offset, static_cast<const char*>(col.data) + base,
                    cl.data.size);
      }
    } else if (rows > 0) {
      const std::size_t w = size_of(col.type);
      std::memcpy(payload + cl.data.offset, static_cast<const std::byte*>(col.data) + a * w,
                  rows * w);
    }
  }
}

std::vector<std::size_t> string_chars(const TableView& t, std::size_t a, std::size_t b) {
  std::vector<std::size_t> chars(t.num_columns(), 0);
  for (std::size_t c = 0; c < t.num_columns(); ++c) {
    const ColumnView& col = t.columns[c];
    if (col.type == TypeId::STRING && col.size > 0) {
      chars[c] = static_cast<std::size_t>(col.offsets[b] - col.offsets[a]);
    }
  }
  return chars;
}

}  // namespace

std::vector<PackedData> split_and_pack(const TableView& table, std::span<const std::size_t> splits,
                                       BufferResource& br) {
  SPILLWAY_NVTX_RANGE("pack");
  SPILLWAY_MEMORY_PROFILE(br.statistics().memory_profiler(), "split_and_pack");
  const MemoryStep step("packing (split_and_pack)");
  const std::size_t rows = table.num_rows();
  const std::vector<std::size_t> bounds = detail::split_bounds(rows, splits);
  const std::size_t nparts = bounds.size() - 1;
  std::vector<detail::PackLayout> layouts;
  std::vector<PackedData> out(nparts);
  for (std::size_t p = 0; p < nparts; ++p) {
    layouts.push_back(detail::make_layout(table, bounds[p + 1] - bounds[p],
                                          string_chars(table, bounds[p], bounds[p + 1])));
    out[p].metadata = detail::encode(layouts[p]);
    out[p].payload = br.allocate(MemoryType::HOST, layouts[p].payload_size);
  }
  detail::cpu_pool().parallel_for(nparts, [&](std::size_t p) {
    write_part(table, layouts[p], bounds[p], bounds[p + 1], out[p].payload->data());
  });
  return out;
}

PackedData pack(const TableView& table, BufferResource& br) {
  SPILLWAY_NVTX_RANGE("pack");
  return std::move(split_and_pack(table, {}, br).front());
}

UnpackedTable unpack(PackedData packed) {
  SPILLWAY_NVTX_RANGE("unpack");
  SPILLWAY_EXPECTS(packed.payload != nullptr, "unpack: the packed data has no payload");
  const Buffer& payload = *packed.payload;
  if (payload.mem_type() == MemoryType::DEVICE) {
    const Stream stream = payload.stream();
    return gpu::unpack(std::move(packed), stream);
  }
  SPILLWAY_EXPECTS(is_host_accessible(payload.mem_type()),
                   "unpack: the payload is in " + std::string(to_string(payload.mem_type())) +
                       "; unpack reads host or device memory (move it off the disk first)");
  payload.wait();
  const detail::PackLayout layout = detail::decode(packed.metadata, payload.size());
  const std::byte* base = payload.size() > 0 ? payload.data() : nullptr;
  TableView view;
  for (std::size_t c = 0; c < layout.columns.size(); ++c) {
    const detail::ColumnLayout& cl = layout.columns[c];
    ColumnView col;
    col.type = cl.type;
    col.size = layout.num_rows;
    col.data = cl.data.size > 0 ? base + cl.data.offset : nullptr;
    if (cl.nullable) col.null_mask = reinterpret_cast<const std::uint8_t*>(base + cl.mask.offset);
    if (cl.type == TypeId::STRING) {
      const auto* off = reinterpret_cast<const std::int32_t*>(base + cl.offsets.offset);
      if (off[0] != 0) {
        SPILLWAY_FAIL("corrupt packed data: column " + std::to_string(c) +
                          " string offsets start at " + std::to_string(off[0]) + ", not 0",
                      corrupt_data_error);
      }
      for (std::size_t i = 0; i < layout.num_rows; ++i) {
        if (off[i + 1] < off[i]) {
          SPILLWAY_FAIL("corrupt packed data: column " + std::to_string(c) +
                            " string offsets decrease at row " + std::to_string(i),
                        corrupt_data_error);
        }
      }
      if (static_cast<std::uint64_t>(off[layout.num_rows]) != cl.data.size) {
        SPILLWAY_FAIL("corrupt packed data: column " + std::to_string(c) +
                          " string offsets end at " + std::to_string(off[layout.num_rows]) +
                          " but there are " + std::to_string(cl.data.size) + " characters",
                      corrupt_data_error);
      }
      col.offsets = off;
    }
    view.columns.push_back(col);
    view.names.push_back(cl.name);
  }
  return UnpackedTable(std::move(packed), std::move(view));
}

Table concat(std::span<const TableView> tables, BufferResource& br, MemoryType to, Stream stream) {
  SPILLWAY_NVTX_RANGE("concatenate");
  SPILLWAY_EXPECTS(to != MemoryType::DISK, "concat: into DEVICE, PINNED_HOST or HOST, not DISK");
  const std::size_t rows = detail::check_concat_args(tables);
  const TableView& first = tables.front();
  std::vector<Column> columns;
  for (std::size_t c = 0; c < first.num_columns(); ++c) {
    const DataType type = first.columns[c].type;
    bool nullable = false;
    std::size_t chars = 0;
    for (const TableView& t : tables) {
      nullable = nullable || t.columns[c].nullable();
      if (type == TypeId::STRING) chars += t.columns[c].data_bytes();
    }
    SPILLWAY_EXPECTS(chars <= static_cast<std::size_t>(INT32_MAX),
                     "concat: more characters than int32 offsets allow");
    auto data = br.allocate(to, type == TypeId::STRING ? chars : rows * size_of(type), stream);
    std::unique_ptr<Buffer> offsets;
    std::unique_ptr<Buffer> mask;
    if (type == TypeId::STRING) offsets = br.allocate(MemoryType::HOST, (rows + 1) * 4);
    if (nullable) {
      mask = br.allocate(MemoryType::HOST, mask_bytes(rows));
      if (mask->size() > 0) std::memset(mask->data(), 0, mask->size());
    }
    std::vector<BufferResource::HostBytes> parts;
    std::size_t row = 0;
    std::int32_t char_at = 0;
    auto* off = offsets ? reinterpret_cast<std::int32_t*>(offsets->data()) : nullptr;
    if (off != nullptr) off[0] = 0;
    for (const TableView& t : tables) {
      const ColumnView& col = t.columns[c];
      if (mask) {
        detail::copy_bits(reinterpret_cast<std::uint8_t*>(mask->data()), row, col.null_mask, 0,
                          col.size);
      }
      const std::size_t n = col.data_bytes();
      if (n > 0) parts.emplace_back(static_cast<const std::byte*>(col.data), n);
      if (type == TypeId::STRING) {
        for (std::size_t i = 0; i < col.size; ++i) off[row + i + 1] = char_at + col.offsets[i + 1];
        char_at += static_cast<std::int32_t>(n);
      }
      row += col.size;
    }
    br.write(*data, 0, parts, stream);  // one copy of the values of every table
    if (to != MemoryType::HOST) {       // made on the host, then moved (done before this returns)
      if (offsets) offsets = br.move(std::move(offsets), to, stream);
      if (mask) mask = br.move(std::move(mask), to, stream);
    }
    columns.emplace_back(type, rows, std::move(data), std::move(offsets), std::move(mask));
  }
  return Table(std::move(columns), first.names);
}

Table to_table(UnpackedTable unpacked) {
  const TableView v = unpacked.view();
  const std::shared_ptr<const Buffer> payload(std::move(unpacked).release().payload);
  // The bytes from `p` on (to the payload's end when `bytes` is not known on the host).
  auto part = [&](const void* p, std::optional<std::size_t> bytes) {
    if (p == nullptr) return BufferResource::view(*payload, 0, 0, payload);
    const auto at = static_cast<std::size_t>(static_cast<const std::byte*>(p) - payload->data());
    return BufferResource::view(*payload, at, bytes.value_or(payload->size() - at), payload);
  };
  std::vector<Column> columns;
  for (const ColumnView& c : v.columns) {
    const bool fixed = is_fixed_width(c.type);
    columns.emplace_back(
        c.type, c.size,
        part(c.data, fixed ? std::optional(c.size * size_of(c.type)) : std::nullopt),
        fixed ? nullptr : part(c.offsets, (c.size + 1) * sizeof(std::int32_t)),
        c.nullable() ? part(c.null_mask, mask_bytes(c.size)) : nullptr);
  }
  return Table(std::move(columns), v.names);
}

Table unpack_and_concat(std::vector<PackedData> packed, BufferResource& br) {
  SPILLWAY_NVTX_RANGE("unpack and concatenate");
  SPILLWAY_MEMORY_PROFILE(br.statistics().memory_profiler(), "unpack_and_concat");
  const MemoryStep step("unpacking (unpack_and_concat)");
  std::vector<UnpackedTable> parts;
  std::vector<TableView> views;
  for (auto& p : packed) {
    SPILLWAY_EXPECTS(p.payload != nullptr, "unpack_and_concat: a chunk without a payload");
    if (!is_host_accessible(p.payload->mem_type())) {
      p.payload = br.move(std::move(p.payload), MemoryType::HOST, br.stream());
      br.stream().synchronize();
    }
    parts.push_back(unpack(std::move(p)));
    views.push_back(parts.back().view());
  }
  if (parts.size() == 1) return to_table(std::move(parts.front()));
  return concat(views, br);
}

}  // namespace spillway
