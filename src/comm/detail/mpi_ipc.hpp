#pragma once
// CUDA IPC windows of the MPI communicator (internal). Every rank with a GPU sets aside a
// window of device memory in slots (options mpi_ipc_window and mpi_ipc_slot) and maps the windows
// of the other ranks of its node. A device buffer travels to such a peer piece by piece: the
// receiver grants a free slot of its window, the sender's GPU copies the piece into it (NVLink, or
// within the GPU), says so, and the receiver copies it out to wherever it wants the bytes. Slots
// are granted only to receives that have matched a send, so a transfer never waits for a slot held
// by a transfer that cannot move.

#include <spillway/comm/tag.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/stream.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace spillway::detail {

/// The first message of a transfer between ranks that use the window protocol: how the bytes
/// come. Checked on receipt (it comes from another process).
struct TransferHeader {
  static constexpr std::uint32_t expected_magic = 0x53505748;  // "SPWH"
  enum Mode : std::uint32_t { pieces = 1, window = 2 };
  std::uint32_t magic{expected_magic};
  std::uint32_t mode{pieces};
  std::uint64_t bytes{0};
};

/// A grant (receiver -> sender: copy piece `index` into slot `slot` of my window) or a notice
/// (sender -> receiver: piece `index` is in slot `slot`).
struct SlotMessage {
  static constexpr std::uint32_t expected_magic = 0x53505753;  // "SPWS"
  std::uint64_t index{0};
  std::uint32_t slot{0};
  std::uint32_t magic{expected_magic};
};

/// This rank's window and its mappings of its node's peers' windows. Not thread-safe: used
/// under the communicator's progress mutex.
class IpcWindows {
 public:
  /// Collective over `comm` (every rank must call it). Sets up a window of options
  /// mpi_ipc_window bytes when `br`'s DEVICE tier is live, charged to it, and maps the
  /// windows of the ranks of this node that could do the same. Failures to set up or map a
  /// window are logged and leave that pair on the staged path.
  IpcWindows(MPI_Comm comm, int rank, int size, BufferResource& br);
  ~IpcWindows();
  IpcWindows(const IpcWindows&) = delete;
  IpcWindows& operator=(const IpcWindows&) = delete;

  /// Whether this rank copies its device buffers into `peer`'s window.
  [[nodiscard]] bool pushes_to(Rank peer) const { return peers_[idx(peer)].mapped != nullptr; }
  /// Whether `peer` copies into this rank's window (then it sends a header first).
  [[nodiscard]] bool pushed_by(Rank peer) const { return peers_[idx(peer)].maps_mine; }
  /// Where piece bytes go in `peer`'s slot. @throws spillway::comm_error for a slot out of range
  [[nodiscard]] std::byte* peer_slot(Rank peer, std::uint32_t slot) const;
  /// A free slot of this rank's window, if any.
  std::optional<std::uint32_t> acquire();
  void release(std::uint32_t slot);
  [[nodiscard]] std::byte* slot(std::uint32_t s) const { return window_ + s * slot_bytes_; }
  /// The slot size of this rank's window, or of `peer`'s (the piece size of transfers to it).
  [[nodiscard]] std::size_t slot_bytes() const noexcept { return slot_bytes_; }
  [[nodiscard]] std::size_t slot_bytes(Rank peer) const { return peers_[idx(peer)].slot_bytes; }
  /// The stream of the copies into peers' windows.
  [[nodiscard]] Stream push_stream() const noexcept { return push_stream_.view(); }
  /// How many peers this rank pushes to (for the log).
  [[nodiscard]] int mapped_peers() const noexcept;

 private:
  struct Peer {
    std::byte* mapped{nullptr};
    std::size_t slots{0};
    std::size_t slot_bytes{0};
    bool maps_mine{false};
  };
  [[nodiscard]] std::size_t idx(Rank r) const { return static_cast<std::size_t>(r); }

  std::optional<MemoryReservation> charge_;
  std::byte* window_{nullptr};
  std::size_t slot_bytes_{0};
  std::vector<std::uint32_t> free_;
  std::vector<Peer> peers_;
  OwningStream push_stream_{nullptr};
};

}  // namespace spillway::detail
