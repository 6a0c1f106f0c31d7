// gather (gather.hpp): fixed-width values, string characters and validity bits of chosen rows.
#include <spillway/table/gather.hpp>

#include <spillway/core/error.hpp>

#include "table/detail/cpu_threads.hpp"
#include "table/detail/type_dispatch.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace spillway {

namespace {

std::unique_ptr<Buffer> host_buffer(BufferResource& br, std::size_t bytes) {
  return br.allocate(MemoryType::HOST, bytes);
}

/// The validity of the gathered rows, or nullptr when every one is valid.
std::unique_ptr<Buffer> gather_mask(const ColumnView& col, std::span<const std::int64_t> rows,
                                    BufferResource& br) {
  const bool any_null = std::any_of(rows.begin(), rows.end(), [&](std::int64_t r) {
    return r < 0 || !col.is_valid(static_cast<std::size_t>(r));
  });
  if (!any_null) return nullptr;
  auto mask = host_buffer(br, mask_bytes(rows.size()));
  auto* m = reinterpret_cast<std::uint8_t*>(mask->data());
  if (mask->size() > 0) std::memset(m, 0, mask->size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] >= 0 && col.is_valid(static_cast<std::size_t>(rows[i]))) {
      m[i / 8] = static_cast<std::uint8_t>(m[i / 8] | (1U << (i % 8)));
    }
  }
  return mask;
}

Column gather_column(const ColumnView& col, std::span<const std::int64_t> rows,
                     BufferResource& br) {
  auto mask = gather_mask(col, rows, br);
  const std::size_t n = rows.size();
  if (col.type != TypeId::STRING) {
    const std::size_t w = size_of(col.type);
    auto data = host_buffer(br, n * w);
    detail::with_width(w, [&]<typename U>() {
      auto* out = reinterpret_cast<U*>(data->data());
      const auto* in = static_cast<const U*>(col.data);
      // Random reads: ranges of rows on all cores (a small gather on the calling thread).
      const std::size_t threads = std::min(detail::resolve_threads(0), n / 65536 + 1);
      detail::parallel_ranges(n, threads, [&](std::size_t, std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) out[i] = rows[i] >= 0 ? in[rows[i]] : U{};
      });
    });
    return Column(col.type, n, std::move(data), nullptr, std::move(mask));
  }
  auto offsets = host_buffer(br, (n + 1) * sizeof(std::int32_t));
  auto* o = reinterpret_cast<std::int32_t*>(offsets->data());
  std::int64_t total = 0;
  o[0] = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (rows[i] >= 0)
      total += static_cast<std::int64_t>(col.string(static_cast<std::size_t>(rows[i])).size());
    SPILLWAY_EXPECTS(total <= INT32_MAX,
                     "gather: more than 2 GiB of characters in one string column");
    o[i + 1] = static_cast<std::int32_t>(total);
  }
  auto chars = host_buffer(br, std::max<std::size_t>(static_cast<std::size_t>(total), 1));
  for (std::size_t i = 0; i < n; ++i) {
    if (rows[i] < 0) continue;
    const auto s = col.string(static_cast<std::size_t>(rows[i]));
    if (!s.empty()) std::memcpy(chars->data() + o[i], s.data(), s.size());
  }
  return Column(TypeId::STRING, n, std::move(chars), std::move(offsets), std::move(mask));
}

}  // namespace

Table gather(const TableView& table, std::span<const std::int64_t> rows, BufferResource& br) {
  const auto limit = static_cast<std::int64_t>(table.num_rows());
  for (std::int64_t r : rows) {
    SPILLWAY_EXPECTS(r >= -1 && r < limit, "gather: row " + std::to_string(r) + " of a table of " +
                                               std::to_string(limit) + " rows");
  }
  std::vector<Column> columns;
  for (const ColumnView& col : table.columns) columns.push_back(gather_column(col, rows, br));
  return Table(std::move(columns), table.names);
}

}  // namespace spillway
