#pragma once
// Helpers for the table tests.

#include <spillway/table/column_view.hpp>
#include <spillway/table/generator.hpp>

#include <gtest/gtest.h>

#include <cstring>

namespace spillway::test {

inline const std::vector<DataType> all_types{TypeId::INT8,
                                             TypeId::INT16,
                                             TypeId::INT32,
                                             TypeId::INT64,
                                             TypeId::UINT8,
                                             TypeId::UINT16,
                                             TypeId::UINT32,
                                             TypeId::UINT64,
                                             TypeId::FLOAT32,
                                             TypeId::FLOAT64,
                                             TypeId::BOOL8,
                                             TypeId::STRING,
                                             TypeId::DATE32,
                                             TypeId::TIMESTAMP_SECONDS,
                                             TypeId::TIMESTAMP_MILLISECONDS,
                                             TypeId::TIMESTAMP_MICROSECONDS,
                                             TypeId::TIMESTAMP_NANOSECONDS,
                                             decimal128(20, 3)};

/// Row `ra` of `a` equals row `rb` of `b` in every column (validity, then bytes).
inline bool rows_equal(const TableView& a, std::size_t ra, const TableView& b, std::size_t rb) {
  for (std::size_t c = 0; c < a.num_columns(); ++c) {
    const ColumnView& x = a.columns[c];
    const ColumnView& y = b.columns[c];
    if (x.is_valid(ra) != y.is_valid(rb)) return false;
    if (!x.is_valid(ra)) continue;
    if (x.type == TypeId::STRING) {
      if (x.string(ra) != y.string(rb)) return false;
    } else {
      const std::size_t w = size_of(x.type);
      if (std::memcmp(static_cast<const std::byte*>(x.data) + ra * w,
                      static_cast<const std::byte*>(y.data) + rb * w, w) != 0) {
        return false;
      }
    }
  }
  return true;
}

/// Same schema and the same rows in the same order.
inline void expect_tables_equal(const TableView& a, const TableView& b) {
  ASSERT_EQ(a.num_columns(), b.num_columns());
  ASSERT_EQ(a.num_rows(), b.num_rows());
  for (std::size_t c = 0; c < a.num_columns(); ++c) {
    ASSERT_EQ(a.columns[c].type, b.columns[c].type) << "column " << c;
  }
  for (std::size_t r = 0; r < a.num_rows(); ++r) {
    ASSERT_TRUE(rows_equal(a, r, b, r)) << "row " << r << " differs";
  }
}

}  // namespace spillway::test
