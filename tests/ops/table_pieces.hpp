#pragma once
// An operator's input in pieces, for the ops tests.

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/ops/table_source.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/table.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace spillway::test {

/// A source of host table `t` in `n` pieces (some may be without rows), each copied into `to`
/// when it is asked for. `t` must outlive the source.
inline ops::TableSource pieces(const Table& t, std::size_t n, MemoryType to, BufferResource& br) {
  auto next = std::make_shared<std::size_t>(0);
  return [&t, n, to, &br, next]() -> std::optional<Table> {
    if (*next == n) return std::nullopt;
    const std::size_t p = (*next)++;
    std::vector<std::int64_t> rows;
    for (std::size_t i = t.num_rows() * p / n; i < t.num_rows() * (p + 1) / n; ++i) {
      rows.push_back(static_cast<std::int64_t>(i));
    }
    return copy_table(gather(t.view(), rows, br), to, br, br.stream());
  };
}

}  // namespace spillway::test
