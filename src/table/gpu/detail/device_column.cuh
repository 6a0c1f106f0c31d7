#pragma once
// Columns as the kernels see them, and the row hash on the GPU (internal).

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/column_view.hpp>
#include <spillway/table/hashing.hpp>

#include "table/detail/type_dispatch.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

namespace spillway::gpu::detail {

/// One column in device memory.
struct DeviceColumn {
  TypeId type;
  std::uint32_t width;  // bytes per row; 0 for STRING
  const std::byte* data;
  const std::int32_t* offsets;
  const std::uint8_t* mask;
};

__device__ inline bool is_valid(const DeviceColumn& c, std::size_t row) {
  return c.mask == nullptr || ((c.mask[row >> 3] >> (row & 7)) & 1U) != 0;
}

using spillway::detail::with_width;

/// The hash of element `row`, as spillway::hash_element on the host.
__device__ inline std::uint32_t hash_element(const DeviceColumn& c, std::size_t row,
                                             std::uint32_t seed) {
  if (!is_valid(c, row)) return null_hash;
  if (c.type == TypeId::STRING) {
    const std::int32_t a = c.offsets[row];
    return murmur3_32(reinterpret_cast<const char*>(c.data) + a,
                      static_cast<std::size_t>(c.offsets[row + 1] - a), seed);
  }
  return spillway::detail::dispatch_fixed(c.type, [&]<typename T>() {
    return hash_value(reinterpret_cast<const T*>(c.data)[row], seed);
  });
}

/// The row hash over `keys`, as spillway::hash_row on the host.
__device__ inline std::uint32_t hash_row(const DeviceColumn* keys, std::uint32_t nkeys,
                                         std::size_t row, std::uint32_t seed) {
  std::uint32_t h = 0;
  for (std::uint32_t k = 0; k < nkeys; ++k) {
    h = hash_combine(h, hash_element(keys[k], row, k == 0 ? seed : default_hash_seed));
  }
  return h;
}

/// Whether value i of `x` and value j of `y` (the same type, both valid) are equal, floats
/// as SQL compares them (NaN = NaN, -0.0 = 0.0), as spillway::detail::keys_equal on the host.
__device__ inline bool values_equal(const DeviceColumn& x, std::size_t i, const DeviceColumn& y,
                                    std::size_t j) {
  if (x.type == TypeId::STRING) {
    const std::int32_t xa = x.offsets[i];
    const std::int32_t ya = y.offsets[j];
    const std::int32_t n = x.offsets[i + 1] - xa;
    if (n != y.offsets[j + 1] - ya) return false;
    for (std::int32_t c = 0; c < n; ++c) {
      if (x.data[xa + c] != y.data[ya + c]) return false;
    }
    return true;
  }
  return spillway::detail::dispatch_fixed(x.type, [&]<typename T>() {
    const T u = reinterpret_cast<const T*>(x.data)[i];
    const T v = reinterpret_cast<const T*>(y.data)[j];
    if constexpr (std::is_floating_point_v<T>) {
      return u == v || (u != u && v != v);
    } else {
      return u == v;
    }
  });
}

/// Whether row i of keys `a` and row j of keys `b` (the same types) hold equal values: two
/// nulls are equal when `nulls_equal` (a GROUP BY's groups), never otherwise (a join's
/// matches).
__device__ inline bool keys_equal(const DeviceColumn* a, std::size_t i, const DeviceColumn* b,
                                  std::size_t j, std::uint32_t nkeys, bool nulls_equal) {
  for (std::uint32_t k = 0; k < nkeys; ++k) {
    const bool vx = is_valid(a[k], i);
    const bool vy = is_valid(b[k], j);
    if (!vx || !vy) {
      if (nulls_equal && !vx && !vy) continue;
      return false;
    }
    if (!values_equal(a[k], i, b[k], j)) return false;
  }
  return true;
}

/// The index of the last of `n` ascending values `starts` that is ≤ x (starts[0] ≤ x): which
/// of several concatenated ranges holds item x.
template <typename T>
__device__ inline std::size_t last_at_or_below(const T* starts, std::size_t n, T x) {
  std::size_t lo = 0;
  std::size_t hi = n;
  while (hi - lo > 1) {
    const std::size_t mid = (lo + hi) / 2;
    if (starts[mid] <= x) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

inline DeviceColumn to_device_column(const ColumnView& c) {
  return {c.type, static_cast<std::uint32_t>(size_of(c.type)),
          static_cast<const std::byte*>(c.data), c.offsets, c.null_mask};
}

/// A DEVICE buffer holding `values`, copied on `stream` (the host vector may go right after:
/// pageable copies are staged before the call returns).
template <typename T>
std::unique_ptr<Buffer> to_device(const std::vector<T>& values, BufferResource& br, Stream stream) {
  auto buf = br.allocate(MemoryType::DEVICE, values.size() * sizeof(T), stream);
  if (!values.empty()) cuda::memcpy_async(buf->data(), values.data(), buf->size(), stream);
  return buf;
}

/// `values.size()` values of a device buffer, copied to the host (synchronizes `stream`).
template <typename T>
void to_host(std::vector<T>& values, const void* device, Stream stream) {
  if (!values.empty()) cuda::memcpy_async(values.data(), device, values.size() * sizeof(T), stream);
  cuda::stream_synchronize(stream);
}

template <typename T>
T* as(Buffer& b) {
  return reinterpret_cast<T*>(b.data());
}

inline cudaStream_t raw(Stream s) {
  return static_cast<cudaStream_t>(s.handle());
}

/// Blocks of `threads` threads to cover `n` items.
inline unsigned blocks_for(std::size_t n, unsigned threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace spillway::gpu::detail
