// random_int32_table on the GPU: the CPU's counter-based values (random_values.hpp).
#include <spillway/table/gpu.hpp>

#include "core/detail/cuda_try.hpp"
#include "table/detail/random_values.hpp"
#include "table/gpu/detail/device_column.cuh"

#include <string>

namespace spillway::gpu {

namespace {

__global__ void fill_kernel(std::int32_t* out, std::size_t rows, std::uint64_t seed,
                            std::size_t col, std::int32_t min, std::uint64_t range) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < rows; i += stride) {
    out[i] = spillway::detail::random_int32(seed, col, i, min, range);
  }
}

}  // namespace

Table random_int32_table(std::size_t rows, std::size_t columns, std::int32_t min, std::int32_t max,
                         std::uint64_t seed, BufferResource& br, Stream stream) {
  const std::uint64_t range = spillway::detail::random_int32_range(min, max);
  std::vector<Column> cols;
  std::vector<std::string> names;
  for (std::size_t c = 0; c < columns; ++c) {
    auto data = br.allocate(MemoryType::DEVICE, rows * sizeof(std::int32_t), stream);
    if (rows > 0) {
      const unsigned blocks = std::min(detail::blocks_for(rows, 256), 65535U * 16);
      fill_kernel<<<blocks, 256, 0, detail::raw(stream)>>>(detail::as<std::int32_t>(*data), rows,
                                                           seed, c, min, range);
      SPILLWAY_CUDA_TRY(cudaGetLastError());
    }
    cols.emplace_back(TypeId::INT32, rows, std::move(data));
    std::string name = "c";  // not "c" + to_string: GCC 12 warns falsely (-Wrestrict) there
    name += std::to_string(c);
    names.push_back(std::move(name));
  }
  return Table(std::move(cols), std::move(names));
}

}  // namespace spillway::gpu
