// A cuda_ipc peer's memory, mapped here.

#include "transfer/detail/ipc_peer.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>

#include <algorithm>
#include <string>

namespace spillway::transfer::detail {

IpcPeer::~IpcPeer() {
  for (auto& [h, ptr] : opened_) cuda::ipc_close(ptr);
}

std::uint8_t* IpcPeer::device_memory(const Exported& e) {
  if (same_process_) return reinterpret_cast<std::uint8_t*>(e.base);  // cannot open its own
  SPILLWAY_EXPECTS(e.handle != cuda::IpcHandle{},
                   "cuda_ipc: the peer's device memory has no CUDA IPC handle (memory of a "
                   "stream-ordered pool); register memory of cudaMalloc for peers to map",
                   cuda_error);
  auto it = opened_.find(e.handle);
  if (it == opened_.end()) it = opened_.emplace(e.handle, cuda::ipc_open(e.handle)).first;
  return static_cast<std::uint8_t*>(it->second);
}

std::uint8_t* IpcPeer::shared_memory(const SharedExport& e, std::uint64_t at,
                                     std::uint64_t length) {
  if (at < e.region_offset || at - e.region_offset > e.region_bytes ||
      length > e.region_bytes - (at - e.region_offset)) {
    SPILLWAY_FAIL("cuda_ipc: the range of " + std::to_string(length) + " bytes at " +
                      std::to_string(at - std::min(at, e.region_offset)) +
                      " is outside the target's region of " + std::to_string(e.region_bytes) +
                      " (nothing was written)",
                  corrupt_data_error);
  }
  if (same_process_) {  // an engine of this process: the memory is here already
    auto* reach = static_cast<std::uint8_t*>(
        cuda::host_device_pointer(reinterpret_cast<void*>(static_cast<std::uintptr_t>(e.base))));
    return reach != nullptr ? reach + at : nullptr;
  }
  const std::pair key{e.fd, e.inode};
  if (unmappable_.contains(key)) return nullptr;
  auto it = files_.find(key);
  if (it == files_.end()) {
    try {
      it = files_
               .emplace(key, MappedPeerFile(static_cast<pid_t>(pid_), static_cast<int>(e.fd),
                                            e.inode, e.file_bytes))
               .first;
    } catch (const std::exception& ex) {
      SPILLWAY_LOG(debug, "cuda_ipc: the target copies instead: " << ex.what());
      unmappable_.insert(key);
      return nullptr;
    }
  }
  std::uint8_t* reach = it->second.device_pointer();
  return reach != nullptr ? reach + at : nullptr;
}

}  // namespace spillway::transfer::detail
