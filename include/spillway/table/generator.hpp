#pragma once
/// @file generator.hpp
/// Seeded random tables for tests and benchmarks.

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spillway {

struct RandomTableOptions {
  std::size_t rows{0};
  std::vector<DataType> types{TypeId::INT32};
  /// Values are drawn from [0, key_cardinality) (0: the type's full range; strings: any).
  std::uint64_t key_cardinality{0};
  /// This fraction of rows takes the value 0 (one hot key).
  double skew{0};
  /// Above 0: values follow a Zipf law with this exponent, value v (from 0) drawn with weight
  /// 1 / (v + 1)^zipf over [0, key_cardinality) (over [0, 2^20) when key_cardinality is 0).
  double zipf{0};
  /// This fraction of rows is null (0: no null mask at all).
  double null_fraction{0};
  std::size_t min_string{0};
  std::size_t max_string{16};
  std::uint64_t seed{42};
};

/// A HOST table of random values; the same options always give the same table.
Table random_table(const RandomTableOptions& options, BufferResource& br);

/// A HOST table of `columns` INT32 columns without nulls, values uniform in [min, max], made
/// in parallel on all cores: the benchmark input. Counter-based: row i of column c depends only
/// on (seed, c, i), so gpu::random_int32_table gives the same bytes on the GPU.
/// @throws spillway::logic_error when min > max
Table random_int32_table(std::size_t rows, std::size_t columns, std::int32_t min, std::int32_t max,
                         std::uint64_t seed, BufferResource& br);

}  // namespace spillway
