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

/// A column of `type` (DECIMAL128, DATE32 or a TIMESTAMP) whose values are a function of each
/// int32 value of `ints` (nulls kept): equal ints give equal values, so it keys as `ints` does.
/// Decimals have a high half of -1 or 0 and a low half spread over 64 bits.
inline Column derived_of(const ColumnView& ints, DataType type, BufferResource& br) {
  const std::size_t w = size_of(type);
  auto data = br.allocate(MemoryType::HOST, std::max<std::size_t>(ints.size * w, 1));
  for (std::size_t i = 0; i < ints.size; ++i) {
    const std::int64_t v = ints.value<std::int32_t>(i);
    std::byte* at = data->data() + i * w;
    if (type == TypeId::DECIMAL128) {
      const Int128 d{static_cast<std::uint64_t>(v) * 0x9E3779B97F4A7C15ULL, v % 2 == 0 ? -1 : 0};
      std::memcpy(at, &d, w);
    } else if (type == TypeId::DATE32) {
      const auto d = static_cast<std::int32_t>(18000 + v);  // days: 2019 onwards
      std::memcpy(at, &d, w);
    } else {
      const std::int64_t t = (18000 + v) * 86400000000LL + v * 1000003;  // microseconds
      std::memcpy(at, &t, w);
    }
  }
  std::unique_ptr<Buffer> mask;
  if (ints.nullable()) {
    mask = br.allocate(MemoryType::HOST, mask_bytes(ints.size));
    std::memcpy(mask->data(), ints.null_mask, mask_bytes(ints.size));
  }
  return Column(type, ints.size, std::move(data), nullptr, std::move(mask));
}

/// A random side: key columns INT64 and INT32 (low cardinality, nulls), a STRING key made from
/// the INT32 one, a FLOAT64 payload, then DECIMAL128(30, 2), TIMESTAMP_MICROSECONDS and DATE32
/// keys made from the INT32 one.
inline Table side(std::size_t rows, std::uint64_t seed, BufferResource& br) {
  RandomTableOptions o;
  o.rows = rows;
  o.types = {TypeId::INT64, TypeId::INT32, TypeId::FLOAT64};
  o.key_cardinality = 37;
  o.null_fraction = 0.05;
  o.seed = seed;
  Table t = random_table(o, br);
  const ColumnView ints = t.view().columns[1];
  Column s = strings_of(ints, br);
  Column d = derived_of(ints, decimal128(30, 2), br);
  Column ts = derived_of(ints, TypeId::TIMESTAMP_MICROSECONDS, br);
  Column day = derived_of(ints, TypeId::DATE32, br);
  std::vector<Column> cols = std::move(t).release();
  cols.push_back(std::move(s));
  cols.push_back(std::move(d));
  cols.push_back(std::move(ts));
  cols.push_back(std::move(day));
  return Table(std::move(cols), {"a", "b", "v", "s", "d", "t", "day"});
}

}  // namespace spillway::test
