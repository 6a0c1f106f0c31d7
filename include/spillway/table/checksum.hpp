#pragma once
/// @file checksum.hpp
/// An order-independent table checksum: proves that no row was lost, duplicated or changed.

#include <spillway/table/column_view.hpp>

#include <cstdint>

namespace spillway {

/// The row count and the sum (mod 2^64) of a 64-bit hash of every row's raw bytes and
/// validity. Summing makes it independent of row order and lets checksums of parts add up to
/// the checksum of the whole.
struct TableChecksum {
  std::uint64_t rows{0};
  std::uint64_t sum{0};
  TableChecksum& operator+=(const TableChecksum& o) noexcept {
    rows += o.rows;
    sum += o.sum;
    return *this;
  }
  friend bool operator==(const TableChecksum&, const TableChecksum&) = default;
};

/// The checksum of a host table. @param threads 0: all cores.
TableChecksum checksum(const TableView& table, std::size_t threads = 0);

}  // namespace spillway
