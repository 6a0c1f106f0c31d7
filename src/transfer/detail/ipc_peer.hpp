#pragma once
// A peer of the cuda_ipc backend (internal): its process, and what of its memory is mapped
// here: device allocations through CUDA IPC handles, SharedHostMemory through its memfd.

#include "transfer/detail/ipc_export.hpp"
#include "transfer/detail/shared_host.hpp"

#include <cstdint>
#include <map>
#include <set>
#include <utility>

namespace spillway::transfer::detail {

class IpcPeer {
 public:
  /// The peer's process id, and this process's.
  IpcPeer(std::uint32_t pid, std::uint32_t self) : pid_{pid}, same_process_{pid == self} {}
  IpcPeer(const IpcPeer&) = delete;
  IpcPeer& operator=(const IpcPeer&) = delete;
  /// Unmaps what was mapped: no copy may still use it.
  ~IpcPeer();

  /// The first byte of the allocation `e` names, mapped here (on first use).
  /// @throws spillway::cuda_error when it has no handle or cannot be opened
  std::uint8_t* device_memory(const Exported& e);

  /// Where the GPU reaches byte `at` of the shared file `e` names, for a range of `length`
  /// bytes there, mapped and page-locked here on first use; null when this process cannot map
  /// it (tried once: the target then copies, as for other host memory).
  /// @throws spillway::corrupt_data_error when the range is outside the region `e` names
  std::uint8_t* shared_memory(const SharedExport& e, std::uint64_t at, std::uint64_t length);

 private:
  std::uint32_t pid_;
  bool same_process_;
  std::map<cuda::IpcHandle, void*> opened_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, MappedPeerFile> files_;  // by fd, inode
  std::set<std::pair<std::uint64_t, std::uint64_t>> unmappable_;
};

}  // namespace spillway::transfer::detail
