#pragma once
// The random join inputs of the CPU and GPU join tests: several key types, duplicate keys,
// nulls and strings.

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/table.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace spillway::test {

/// A STRING column of "k<value>" for each int32 value of `ints` (nulls kept).
inline Column strings_of(const ColumnView& ints, BufferResource& br) {
  std::vector<std::string> s(ints.size);
  std::size_t total = 0;
  for (std::size_t i = 0; i < ints.size; ++i) {
    char text[16];
    std::snprintf(text, sizeof text, "k%d", ints.value<std::int32_t>(i));
    s[i] = text;
    total += s[i].size();
  }
  auto offsets = br.allocate(MemoryType::HOST, (ints.size + 1) * 4);
  auto chars = br.allocate(MemoryType::HOST, std::max<std::size_t>(total, 1));
  auto* o = reinterpret_cast<std::int32_t*>(offsets->data());
  o[0] = 0;
  for (std::size_t i = 0; i < ints.size; ++i) {
    std::memcpy(chars->data() + o[i], s[i].data(), s[i].size());
    o[i + 1] = o[i] + static_cast<std::int32_t>(s[i].size());
  }
  std::unique_ptr<Buffer> mask;
  if (ints.nullable()) {
    mask = br.allocate(MemoryType::HOST, mask_bytes(ints.size));
    std::memcpy(mask->data(), ints.null_mask, mask_bytes(ints.size));
  }
  return Column(TypeId::STRING, ints.size, std::move(chars), std::move(offsets), std::move(mask));
}

/// A random side: key columns INT64 and INT32 (low cardinality, nulls), a STRING key made from
/// the INT32 one, and a FLOAT64 payload.
inline Table side(std::size_t rows, std::uint64_t seed, BufferResource& br) {
  RandomTableOptions o;
  o.rows = rows;
  o.types = {TypeId::INT64, TypeId::INT32, TypeId::FLOAT64};
  o.key_cardinality = 37;
  o.null_fraction = 0.05;
  o.seed = seed;
  Table t = random_table(o, br);
  Column s = strings_of(t.view().columns[1], br);
  std::vector<Column> cols = std::move(t).release();
  cols.push_back(std::move(s));
  return Table(std::move(cols), {"a", "b", "v", "s"});
}

}  // namespace spillway::test
