#pragma once
// Calls a generic lambda with the C++ type of a fixed-width column, or the unsigned integer
// of its width (internal).

#include <spillway/core/host_device.hpp>
#include <spillway/table/data_type.hpp>

#include <cstddef>
#include <cstdint>

// A host-device template that calls a host-only functor on the host is fine; nvcc's check
// of such calls is turned off for these two, as Thrust does for its algorithms.
#if defined(__CUDACC__)
#define SPILLWAY_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
#else
#define SPILLWAY_EXEC_CHECK_DISABLE
#endif

namespace spillway::detail {

/// f.template operator()<T>() with T the storage type of `t` (BOOL8 as uint8_t, DATE32 as int32_t,
/// timestamps as int64_t, DECIMAL128 as Int128); `t` must be fixed-width. Usable in device code.
SPILLWAY_EXEC_CHECK_DISABLE
template <typename F>
SPILLWAY_HOST_DEVICE decltype(auto) dispatch_fixed(TypeId t, F&& f) {
  switch (t) {
    case TypeId::INT8:
      return f.template operator()<std::int8_t>();
    case TypeId::INT16:
      return f.template operator()<std::int16_t>();
    case TypeId::INT32:
    case TypeId::DATE32:
      return f.template operator()<std::int32_t>();
    case TypeId::INT64:
    case TypeId::TIMESTAMP_SECONDS:
    case TypeId::TIMESTAMP_MILLISECONDS:
    case TypeId::TIMESTAMP_MICROSECONDS:
    case TypeId::TIMESTAMP_NANOSECONDS:
      return f.template operator()<std::int64_t>();
    case TypeId::DECIMAL128:
      return f.template operator()<Int128>();
    case TypeId::UINT16:
      return f.template operator()<std::uint16_t>();
    case TypeId::UINT32:
      return f.template operator()<std::uint32_t>();
    case TypeId::UINT64:
      return f.template operator()<std::uint64_t>();
    case TypeId::FLOAT32:
      return f.template operator()<float>();
    case TypeId::FLOAT64:
      return f.template operator()<double>();
    case TypeId::UINT8:
    case TypeId::BOOL8:
    case TypeId::STRING:
      break;
  }
  return f.template operator()<std::uint8_t>();
}

/// Calls `f.template operator()<U>()` with U the unsigned integer of `width` bytes (1, 2, 4,
/// 8; Int128 for 16; `width` must be one of those), for code that moves fixed-width values as
/// raw bits. Usable in device code.
SPILLWAY_EXEC_CHECK_DISABLE
template <typename F>
SPILLWAY_HOST_DEVICE decltype(auto) with_width(std::size_t width, F&& f) {
  switch (width) {
    case 1:
      return f.template operator()<std::uint8_t>();
    case 2:
      return f.template operator()<std::uint16_t>();
    case 4:
      return f.template operator()<std::uint32_t>();
    case 16:
      return f.template operator()<Int128>();
    default:
      return f.template operator()<std::uint64_t>();
  }
}

}  // namespace spillway::detail
