#pragma once
// What the cuda_ipc backend hands its peers (internal): this node's name, and for each region a
// peer may map, how to map it: a device region's CUDA IPC handle, or a shared host region's
// memfd.

#include <spillway/core/cuda.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace spillway::transfer::detail {

/// The host name and boot id: processes that share it share the GPUs and /proc.
std::string this_node();

/// What a device region's peers get: the IPC handle of its allocation, the region's offset
/// in that allocation, and the allocation's address (used by engines of the same process,
/// which cannot open their own handles).
struct Exported {
  cuda::IpcHandle handle{};
  std::uint64_t offset{0};
  std::uint64_t base{0};
};
constexpr std::size_t kBlob = sizeof(cuda::IpcHandle) + 2 * sizeof(std::uint64_t);

std::vector<std::uint8_t> to_blob(const Exported& e);
/// @throws spillway::corrupt_data_error for a blob of the wrong size (`what` names it)
Exported from_blob(std::span<const std::uint8_t> blob, const char* what);

/// What a host region in a SharedHostMemory gives its peers: the memfd (its number in the
/// exporting process, its inode and size), its first byte there, and the region's place in it.
struct SharedExport {
  std::uint64_t fd{0};
  std::uint64_t inode{0};
  std::uint64_t file_bytes{0};
  std::uint64_t base{0};
  std::uint64_t region_offset{0};
  std::uint64_t region_bytes{0};
};
constexpr std::size_t kSharedBlob = 6 * sizeof(std::uint64_t);

std::vector<std::uint8_t> to_blob(const SharedExport& e);
/// @throws spillway::corrupt_data_error for a blob of the wrong size or a region outside its
/// file
SharedExport shared_from_blob(std::span<const std::uint8_t> blob);

}  // namespace spillway::transfer::detail
