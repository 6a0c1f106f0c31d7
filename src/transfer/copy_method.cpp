// Which copy the cuda_ipc backend takes for a batch: the names of the methods (the
// `ipc_copy` option) and what `auto` means, as measured.

#include <spillway/transfer/gpu_copies.hpp>
#include "core/detail/enum_names.hpp"

namespace spillway::transfer::detail {

namespace {
constexpr spillway::detail::EnumNames<CopyMethod, 5> kCopyMethods{
    {{"auto", CopyMethod::automatic},
     {"kernel", CopyMethod::kernel},
     {"batch", CopyMethod::batch},
     {"per_chunk", CopyMethod::per_chunk},
     {"mixed", CopyMethod::mixed}}};
}  // namespace

CopyMethod parse_copy_method(const std::string& name) {
  return spillway::detail::parse_enum(name, kCopyMethods, "ipc_copy");
}

const char* to_string(CopyMethod method) noexcept {
  return spillway::detail::enum_name(method, kCopyMethods);
}

CopyMethod choose(CopyMethod wanted, std::size_t mean_bytes, bool kernel_reachable,
                  bool over_pcie) noexcept {
  const bool needs_kernel = wanted == CopyMethod::kernel || wanted == CopyMethod::mixed;
  if (needs_kernel && !kernel_reachable) return CopyMethod::batch;
  if (wanted != CopyMethod::automatic) return wanted;
  if (!kernel_reachable) return CopyMethod::batch;
  // bench_ipc_copy: between device memory the kernel is 3-1000x the copy engines at every
  // chunk size. Over PCIe the kernel's stores reach 0.94 of a contiguous
  // copy and the copy engines lose time per chunk (0.70-0.74 at 64 KiB, 0.98 at 1 MiB); both
  // at once reach 0.96-0.97 from 64 KiB chunks in one process (0.91-0.94 between two) and
  // 0.98-0.99 from 256 KiB, and below 64 KiB the copy engines add nothing (16 KiB: 0.94
  // either way).
  constexpr std::size_t kMixedFrom = std::size_t{64} << 10;
  // Chunks of 16 MiB and more (the transfer communicator's whole buffers) go to the copy
  // engines alone: as fast as a contiguous copy (0.98-1.00 over PCIe, where mixed measured
  // 0.98-0.99); between device memory a cudaMemcpyAsync each, where the kernel reached 0.77
  // of it at 1 MiB, and its ~5 us per call is under 3% of such a chunk.
  constexpr std::size_t kWholeFrom = std::size_t{16} << 20;
  if (mean_bytes >= kWholeFrom) return over_pcie ? CopyMethod::batch : CopyMethod::per_chunk;
  return over_pcie && mean_bytes >= kMixedFrom ? CopyMethod::mixed : CopyMethod::kernel;
}

}  // namespace spillway::transfer::detail
