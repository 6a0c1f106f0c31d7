#pragma once
// What the CPU and GPU group-bys share (internal to table/): the check of the arguments, and
// each aggregation's output type and name.

#include <spillway/table/column_view.hpp>
#include <spillway/table/groupby.hpp>

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

namespace spillway::detail {

/// The key columns (with their names), after checking the keys and aggregations: at least
/// one key, columns in range, and an op each value column's type has.
/// @throws spillway::logic_error naming the problem
TableView groupby_keys(const TableView& table, std::span<const std::size_t> keys,
                       std::span<const Aggregation> aggregations);

/// The type of aggregation `op` of a column of type `t`: INT64 for count, the sum type for
/// sum (INT64 for signed integers, UINT64 for unsigned ones, FLOAT64 for floats,
/// decimal128(38, scale) for decimals), FLOAT64 for mean, `t` for min and max.
DataType aggregate_type(DataType t, AggOp op) noexcept;

/// The type a sum of values of T accumulates in (the C++ type of aggregate_type's sum).
template <typename T>
using sum_t = std::conditional_t<
    std::is_same_v<T, Int128>, Int128,
    std::conditional_t<std::is_floating_point_v<T>, double,
                       std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>>>;

/// The nearest double to a 128-bit value. A negative one is converted as its magnitude:
/// Int128::to_double's hi * 2^64 + lo rounds the low half (near 2^64 for a small negative
/// value) to a multiple of 2048 first, so that a decimal mean of -10537.83 over 68 rows came
/// out -155.1059 instead of -154.9681.
SPILLWAY_HOST_DEVICE inline double int128_as_double(Int128 v) {
  if (v.hi >= 0) return v.to_double();
  const std::uint64_t lo = ~v.lo + 1;  // -v, in two's complement
  const std::uint64_t hi = ~static_cast<std::uint64_t>(v.hi) + (lo == 0 ? 1 : 0);
  return -(static_cast<double>(hi) * 18446744073709551616.0 + static_cast<double>(lo));
}

/// A sum as a double, in the units of the column's values (a decimal's scale applied).
template <typename S>
SPILLWAY_HOST_DEVICE inline double sum_as_double(S sum, double unit) {
  if constexpr (std::is_same_v<S, Int128>) {
    return int128_as_double(sum) * unit;
  } else {
    return static_cast<double>(sum);
  }
}

/// What one unit of a column's stored integer is worth: 10^-scale for a decimal, else 1.
inline double value_unit(DataType t) {
  return t.id == TypeId::DECIMAL128 ? std::pow(10.0, -static_cast<double>(t.scale)) : 1.0;
}

/// The output column's name: "<column>_<op>".
std::string aggregate_name(const TableView& table, const Aggregation& a);

/// The checks of mean_of's arguments. @throws spillway::logic_error naming the problem
void check_mean_of(const ColumnView& sums, const ColumnView& counts);

}  // namespace spillway::detail
