#include "comm/detail/mpi_ipc.hpp"

#include "comm/detail/device_window.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/options.hpp>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

namespace spillway::detail {

namespace {

/// What each rank tells the others about its window.
struct WindowInfo {
  std::array<char, 64> host{};  // MPI_Get_processor_name, cut to fit
  std::uint64_t slots{0};       // 0: no window
  std::uint64_t slot_bytes{0};
  cuda::IpcHandle handle{};
};

}  // namespace

IpcWindows::IpcWindows(MPI_Comm comm, int rank, int size, BufferResource& br)
    : peers_(static_cast<std::size_t>(size)) {
  WindowInfo mine;
  {
    std::array<char, MPI_MAX_PROCESSOR_NAME> name{};
    int len = 0;
    MPI_Get_processor_name(name.data(), &len);
    std::memcpy(mine.host.data(), name.data(),
                std::min<std::size_t>(static_cast<std::size_t>(len), mine.host.size() - 1));
  }
  const OptionValues opts = options::get();
  const std::size_t want =
      detail::window_bytes(opts.mpi_ipc_window, br, opts.mpi_ipc_slot) / opts.mpi_ipc_slot;
  if (want > 0 && br.is_live(MemoryType::DEVICE) && size > 1) {
    try {
      charge_ = br.try_reserve(MemoryType::DEVICE, want * opts.mpi_ipc_slot);
      if (!charge_) SPILLWAY_FAIL("no room under the device limit", comm_error);
      window_ = static_cast<std::byte*>(cuda::malloc_device(want * opts.mpi_ipc_slot));
      mine.handle = cuda::ipc_handle(window_);
      push_stream_ = OwningStream(/*high_priority=*/true);
      mine.slots = want;
      mine.slot_bytes = slot_bytes_ = opts.mpi_ipc_slot;
    } catch (const std::exception& e) {
      SPILLWAY_LOG(warn, "[rank " << rank << "] no CUDA IPC window (" << e.what()
                                  << "): device buffers go through the host");
      if (window_ != nullptr) cuda::free_device(window_);
      window_ = nullptr;
      charge_.reset();
    }
  }
  std::vector<WindowInfo> all(static_cast<std::size_t>(size));
  MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, comm);
  std::vector<char> mapped(all.size(), 0);
  for (int p = 0; p < size; ++p) {
    const WindowInfo& theirs = all[idx(p)];
    if (p == rank || mine.slots == 0 || theirs.slots == 0 || theirs.host != mine.host) continue;
    try {
      peers_[idx(p)].mapped = static_cast<std::byte*>(cuda::ipc_open(theirs.handle));
      peers_[idx(p)].slots = theirs.slots;
      peers_[idx(p)].slot_bytes = theirs.slot_bytes;
      mapped[idx(p)] = 1;
    } catch (const std::exception& e) {
      SPILLWAY_LOG(warn, "[rank " << rank << "] cannot map rank " << p << "'s CUDA IPC window ("
                                  << e.what() << "): device buffers to it go through the host");
    }
  }
  std::vector<char> maps_mine(all.size(), 0);
  MPI_Alltoall(mapped.data(), 1, MPI_CHAR, maps_mine.data(), 1, MPI_CHAR, comm);
  for (std::size_t p = 0; p < peers_.size(); ++p) peers_[p].maps_mine = maps_mine[p] != 0;
  for (std::uint64_t s = mine.slots; s > 0; --s) free_.push_back(static_cast<std::uint32_t>(s - 1));
}

IpcWindows::~IpcWindows() {
  for (auto& p : peers_) {
    if (p.mapped != nullptr) cuda::ipc_close(p.mapped);
  }
  if (window_ != nullptr) cuda::free_device(window_);
}

std::byte* IpcWindows::peer_slot(Rank peer, std::uint32_t slot) const {
  const Peer& p = peers_[idx(peer)];
  if (p.mapped == nullptr || slot >= p.slots) {
    SPILLWAY_FAIL("rank " + std::to_string(peer) + " granted slot " + std::to_string(slot) +
                      " of its CUDA IPC window, which has " + std::to_string(p.slots),
                  comm_error);
  }
  return p.mapped + slot * p.slot_bytes;
}

std::optional<std::uint32_t> IpcWindows::acquire() {
  if (free_.empty()) return std::nullopt;
  const std::uint32_t s = free_.back();
  free_.pop_back();
  return s;
}

void IpcWindows::release(std::uint32_t slot) {
  free_.push_back(slot);
}

int IpcWindows::mapped_peers() const noexcept {
  return static_cast<int>(std::count_if(peers_.begin(), peers_.end(),
                                        [](const Peer& p) { return p.mapped != nullptr; }));
}

}  // namespace spillway::detail
