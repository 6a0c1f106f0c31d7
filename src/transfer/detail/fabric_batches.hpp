#pragma once
// The batches a lane has on the wire (internal): the ops posted to it, taken a message at a
// time (fi_writemsg / fi_readmsg of up to four chunks) as the transmit queue has room, and the
// completions that end them. Used by the lane's thread alone, under its lock.

#include "transfer/detail/backend.hpp"
#include "transfer/detail/fabric_endpoint.hpp"

#include <rdma/fi_eq.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace spillway::transfer::detail {

class FabricBatches {
 public:
  /// `deliver_imm` takes the imms of peers' batches that landed here. With `one_peer` every op
  /// goes to the address set_peer() gives, whatever its backend_peer.
  FabricBatches(FabricEndpoint& endpoint, std::function<void(std::uint32_t)> deliver_imm,
                bool one_peer);

  /// Queues an op to post.
  void push(std::shared_ptr<Op> op) { queue_.push_back(std::move(op)); }
  /// The address of a lane of one peer.
  void set_peer(std::uint64_t address) noexcept { only_peer_ = address; }
  /// Reads completions (and imms): whether there were any. @throws spillway::comm_error
  bool poll_completions();
  /// Posts from the queue, oldest first, until the provider says -FI_EAGAIN: whether any was.
  bool post_queued();
  [[nodiscard]] bool queued() const noexcept { return !queue_.empty(); }
  /// Messages posted and not completed.
  [[nodiscard]] std::size_t inflight() const noexcept { return all_.size() - free_.size(); }
  /// Ends every op queued or in flight as an error.
  void fail_all(const std::string& why);
  void add_counters(EngineCounters& c) const;

 private:
  /// The context of one posted write or read; fi_context2 first, as the provider expects.
  struct Context {
    fi_context2 fi{};
    std::shared_ptr<Op> op;
    std::size_t chunks{0};  // the chunks this message ends
  };

  void read_error();
  int post_some(const std::shared_ptr<Op>& sp);
  Context* acquire(std::shared_ptr<Op> op);
  void release(Context* c);
  /// Where `op` goes: the engine's address of its peer, or a lane of one peer's own.
  [[nodiscard]] std::uint64_t addr_of(const Op& op) const noexcept {
    return one_peer_ ? only_peer_ : op.backend_peer;
  }

  FabricEndpoint& e_;
  std::function<void(std::uint32_t)> deliver_imm_;
  bool one_peer_;
  std::uint64_t only_peer_{0};
  std::deque<std::shared_ptr<Op>> queue_;                    // not yet all posted
  std::unordered_map<std::uint64_t, std::size_t> per_peer_;  // posted, not completed
  std::vector<std::unique_ptr<Context>> all_;
  std::vector<Context*> free_;
  std::atomic<std::uint64_t> chunks_posted_{0};
  std::atomic<std::uint64_t> eagain_{0};
};

}  // namespace spillway::transfer::detail
