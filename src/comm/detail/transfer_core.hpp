#pragma once
// The state of one rank of the `transfer` communicator (internal): its engines, the sends
// waiting for an offer, the offers waiting for a send, the receives waiting for their imm,
// small messages, the barrier, and which ranks are gone. Requests share it, so a future may
// outlive its communicator.
//
// Two paths move bytes. The host path is one engine (libfabric or loopback) for host memory;
// device buffers going by it are staged through pinned host memory. The device path, where
// the rank has a GPU, is an engine of the cuda_ipc backend and a DeviceWindow: a receive
// into device memory from a rank of this node takes a range of the window, the sender's GPU
// writes into it, and the receiver copies it out to the buffer (memory of a stream-ordered
// pool, which the caller's buffers are, cannot be mapped by another process).

#include <spillway/comm/communicator.hpp>
#include <spillway/core/event.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/transfer/engine.hpp>

#include "comm/detail/device_window.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace spillway::detail {

/// One engine, what is registered with it, and its peers by rank.
struct TransferPath {
  struct Registration {
    std::uintptr_t end{0};
    transfer::Region region;
    int users{0};
  };
  std::map<std::uintptr_t, Registration> registrations;  // by first byte; none overlap
  std::vector<transfer::PeerId> peer_of;                 // by rank; 0: none
  std::unordered_map<transfer::PeerId, Rank> rank_of;
  // Last: it goes first, since its worker's failure callback reads rank_of.
  std::unique_ptr<transfer::TransferEngine> engine;
};

/// Where a send's bytes come from, or a receive's land, while the transfer runs: `offset`
/// bytes into a registration with `path`'s engine (of the buffer, or of a host staging
/// buffer), or a range of the device window.
struct Landing {
  TransferPath* path{nullptr};
  std::unique_ptr<Buffer> staging;
  transfer::Region region;
  std::size_t offset{0};
  std::optional<std::size_t> window;  // the range's offset in the window
  std::size_t window_bytes{0};
};

class TransferCore;

/// The key of the queues of (rank, tag).
inline std::uint64_t transfer_key(Rank r, std::uint32_t tag) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(r)) << 32) | tag;
}

class TransferRecv final : public Request {
 public:
  TransferRecv(std::shared_ptr<TransferCore> core, Buffer* buffer, Rank src, Tag tag)
      : Request(false, src, tag, buffer->size()), buffer{buffer}, core_{std::move(core)} {}
  bool progress() override;
  bool cancel() noexcept override;

  /// copying: the bytes are in the landing and on their way into the buffer (`copied`).
  enum class State : std::uint8_t { offered, copying, done, failed };
  State state{State::offered};
  std::string error;
  std::uint32_t imm{0};
  Buffer* buffer;
  Landing landing;
  Event copied;

  void fail(const std::string& why) {
    error = why;
    state = State::failed;
  }

 private:
  std::shared_ptr<TransferCore> core_;
};

class TransferSend final : public Request {
 public:
  TransferSend(std::shared_ptr<TransferCore> core, Buffer* buffer, Rank dst, Tag tag)
      : Request(true, dst, tag, buffer->size()), buffer{buffer}, core_{std::move(core)} {}
  bool progress() override;
  bool cancel() noexcept override;

  enum class State : std::uint8_t { queued, writing, done, failed };
  State state{State::queued};
  std::string error;
  Buffer* buffer;
  Landing landing;
  transfer::Ticket ticket;

 private:
  std::shared_ptr<TransferCore> core_;
};

/// What a receiver offers its sender: a registered range to write into (of the host path, or
/// of the device window), or, for a receive from this rank itself, the receive.
struct Offer {
  std::uint64_t size{0};
  std::uint32_t imm{0};
  bool device{false};
  std::vector<std::uint8_t> region;
  std::shared_ptr<TransferRecv> local;
};

class TransferCore : public std::enable_shared_from_this<TransferCore> {
 public:
  /// `device`: the cuda_ipc engine's options, or nullopt for no device path; `window`: its
  /// window's bytes.
  TransferCore(BufferResource& br, Rank me, int nranks, std::string prefix,
               const transfer::EngineOptions& host,
               const std::optional<transfer::EngineOptions>& device, std::size_t window);

  /// This rank's metadata: the host engine's, then the device engine's (empty: none).
  [[nodiscard]] std::pair<std::vector<std::uint8_t>, std::vector<std::uint8_t>> metadata() const;
  /// Connects to every other rank's engines (their metadata by rank); a rank whose device
  /// engine cannot be reached (another node) gets no device path.
  void connect(const std::vector<std::vector<std::uint8_t>>& host,
               const std::vector<std::vector<std::uint8_t>>& device);

  std::shared_ptr<TransferSend> post_send(Buffer* buffer, Rank dst, Tag tag);
  std::shared_ptr<TransferRecv> post_recv(Buffer* buffer, Rank src, Tag tag);
  bool progress(TransferRecv& r);
  bool progress(TransferSend& s);
  /// @returns whether the engine is done with the send's bytes (see Request::cancel)
  bool cancel(TransferSend& s, std::chrono::milliseconds timeout) noexcept;
  void cancel(TransferRecv& r) noexcept;
  void send_message(std::vector<std::uint8_t> data, Rank dst, Tag tag);
  std::optional<Message> recv_any(Tag tag);
  /// Every rank tells rank 0 it has arrived; rank 0 then releases them all.
  void barrier(std::chrono::milliseconds timeout);
  /// Why rank `r` is gone (its engine reported it failed, or it sent a bad message); empty
  /// while it is not.
  std::string death_of(Rank r);
  /// Why rank `r` is gone, for a wait that `advance` moves on (it pumps, takes what arrived and
  /// returns whether the wait is over); empty while `r` is alive or once `advance` ends the wait.
  /// What a rank sent before its connection closed is delivered before the close is seen, so
  /// the wait is advanced once more after the death is seen and before it is reported.
  template <typename Advance>
  std::string gone_unless(Rank r, Advance&& advance) {
    std::string why = death_of(r);
    if (why.empty() || advance()) return {};
    return why;
  }

 private:
  void prepare(Landing& landing, Buffer& buffer, TransferPath& path);
  void release(Landing& landing) noexcept;
  void match(std::uint64_t key);
  void start(TransferSend& s, Offer& o);
  void finish(TransferRecv& r);
  void send_locked(Rank dst, const std::vector<std::uint8_t>& bytes);
  void pump();
  void handle(Rank from, std::span<const std::uint8_t> bytes);
  void watch(TransferPath& path);
  template <typename Pred>
  void unqueue_offer(std::uint64_t key, Pred&& which);
  void unqueue_send(const TransferSend& s);

  BufferResource& br_;
  const Rank me_;
  const int nranks_;
  const std::string prefix_;

  std::mutex mutex_;  // what follows, and the order control messages are taken in
  std::unordered_map<std::uint64_t, std::deque<std::shared_ptr<TransferSend>>> sends_;
  std::unordered_map<std::uint64_t, std::deque<Offer>> offers_;
  std::unordered_map<std::uint32_t, std::shared_ptr<TransferRecv>> recvs_;  // by imm
  std::unordered_map<std::uint32_t, std::deque<Message>> messages_;         // by tag
  std::vector<std::vector<std::uint8_t>> partial_;  // by rank: a message still in pieces
  std::uint32_t next_imm_{1};
  std::uint64_t barrier_generation_{0};
  std::map<std::uint64_t, int> arrivals_;  // rank 0: ranks at each barrier
  std::uint64_t released_{0};
  std::size_t window_lost_{0};  // ranges of dropped receives a late write might still reach

  std::mutex dead_mutex_;          // the engines' failure callbacks take only this one; also guards
                                   // the paths' peer maps
  std::vector<std::string> dead_;  // by rank: why it is gone
  std::atomic<bool> any_dead_{false};

  // Last: the engines go first, so that their failure callbacks and workers never outlive the
  // above, and before the window they may write into.
  std::optional<MemoryReservation> window_charge_;  // the window's bytes, under the device limit
  std::unique_ptr<DeviceWindow> window_;
  transfer::Region window_region_;
  TransferPath host_;
  TransferPath device_;  // engine null: no device path
};

template <typename Pred>
inline void TransferCore::unqueue_offer(std::uint64_t key, Pred&& which) {
  const auto it = offers_.find(key);
  if (it == offers_.end()) return;
  auto& q = it->second;
  q.erase(std::remove_if(q.begin(), q.end(), which), q.end());
  if (q.empty()) offers_.erase(it);
}

}  // namespace spillway::detail
