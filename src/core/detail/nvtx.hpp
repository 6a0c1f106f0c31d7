#pragma once
// NVTX ranges (internal): SPILLWAY_NVTX_RANGE("spill") marks the enclosing scope in the
// "spillway" domain, so that an Nsight Systems timeline shows each phase of a run (partition,
// pack, send, receive, spill, unspill, unpack, concatenation). NVTX v3 is header-only (the
// CUDA toolkit's nvtx3/nvtx3.hpp): without a tool attached a range costs a branch. A build
// without CUDA marks nothing.

#include <cstdint>
#include <string>

#if defined(SPILLWAY_HAS_CUDA) && SPILLWAY_HAS_CUDA && __has_include(<nvtx3/nvtx3.hpp>)
#include <nvtx3/nvtx3.hpp>

namespace spillway::detail {
struct nvtx_domain {
  static constexpr const char* name{"spillway"};
};
}  // namespace spillway::detail

#define SPILLWAY_NVTX_CONCAT_(a, b) a##b
#define SPILLWAY_NVTX_CONCAT(a, b) SPILLWAY_NVTX_CONCAT_(a, b)
/// Marks the rest of the scope as a range named `name` (a string literal).
#define SPILLWAY_NVTX_RANGE(name)                                                       \
  const ::nvtx3::scoped_range_in<::spillway::detail::nvtx_domain> SPILLWAY_NVTX_CONCAT( \
      spillway_nvtx_range_, __LINE__) {                                                 \
    name                                                                                \
  }

namespace spillway::detail {
/// A range that starts on one thread and may end on another (an actor that moves between the
/// executor's threads): nvtx_start's value goes to nvtx_end.
inline std::uint64_t nvtx_start(const std::string& name) {
  return ::nvtx3::start_range_in<nvtx_domain>(name.c_str()).get_value();
}
inline void nvtx_end(std::uint64_t range) {
  ::nvtx3::end_range_in<nvtx_domain>(::nvtx3::range_handle{range});
}
}  // namespace spillway::detail
#else
#define SPILLWAY_NVTX_RANGE(name) static_cast<void>(0)
namespace spillway::detail {
inline std::uint64_t nvtx_start(const std::string& /*name*/) {
  return 0;
}
inline void nvtx_end(std::uint64_t /*range*/) {}
}  // namespace spillway::detail
#endif
