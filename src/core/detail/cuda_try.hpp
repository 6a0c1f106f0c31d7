#pragma once
// SPILLWAY_CUDA_TRY (internal, for .cu files): checks a CUDA runtime call and throws
// spillway::cuda_error naming the call, CUDA's error and the place.

#include <spillway/core/error.hpp>

#include <cuda_runtime_api.h>

#include <string>

namespace spillway::cuda::detail {

[[noreturn]] inline void fail(cudaError_t err, const char* call, const char* file, int line) {
  throw cuda_error(::spillway::detail::format_error(
      file, line,
      std::string(call) + " failed: " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err)));
}

}  // namespace spillway::cuda::detail

#define SPILLWAY_CUDA_TRY(call)                                                 \
  do {                                                                          \
    const cudaError_t spillway_err_ = (call);                                   \
    if (spillway_err_ != cudaSuccess) [[unlikely]] {                            \
      ::spillway::cuda::detail::fail(spillway_err_, #call, __FILE__, __LINE__); \
    }                                                                           \
  } while (0)
