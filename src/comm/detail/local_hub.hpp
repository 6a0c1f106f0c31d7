#pragma once
// Private to the local communicator (local.cpp, local_copies.cpp): what its ranks share (the
// hub), one side of a transfer (LocalRequest), and the copies of matched pairs.

#include <spillway/comm/communicator.hpp>
#include <spillway/core/event.hpp>
#include <spillway/core/stream.hpp>

#include <spillway/transfer/gpu_copies.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace spillway::detail {

class LocalRequest;
struct LocalHub;

/// The unmatched requests of one receiving rank, queued by (sending rank, tag) in posting order:
/// matching looks at one queue, not at every request (a shuffle of many partitions has
/// thousands in flight).
class RequestQueues {
 public:
  void push(Rank origin, Tag tag, std::shared_ptr<LocalRequest> r);
  /// The oldest request from `origin` with `tag`, taken out; null when there is none.
  std::shared_ptr<LocalRequest> take(Rank origin, Tag tag);
  /// Takes `r` out if it is still queued.
  void erase(Rank origin, Tag tag, const LocalRequest* r);

 private:
  static std::uint64_t key(Rank origin, Tag tag) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(origin)) << 32) | tag.value();
  }
  std::unordered_map<std::uint64_t, std::deque<std::shared_ptr<LocalRequest>>> queues_;
};

/// When a batch of copies is done: shared by every transfer of the batch and both sides of
/// each, so that the event is queried until the first of them sees it complete, not by each.
class CopyDone {
 public:
  [[nodiscard]] bool is_complete() const {
    if (complete_.load(std::memory_order_acquire)) return true;
    if (!event.is_complete()) return false;
    complete_.store(true, std::memory_order_release);
    return true;
  }
  Event event;

 private:
  mutable std::atomic<bool> complete_{false};
};

using MatchedPair = std::pair<std::shared_ptr<LocalRequest>, std::shared_ptr<LocalRequest>>;

/// Per GPU: the matched transfers between device buffers, queued until a request of the hub is
/// next tested, then issued together on the GPU's copy stream, as one batched copy. One
/// cudaMemcpyAsync, two stream waits and an event record per transfer cost a few microseconds
/// each on the stream: a shuffle into 1024 partitions of 10 columns moves 10240 pieces.
struct DeviceCopies {
  std::mutex mutex;
  std::vector<MatchedPair> queued;
  /// The batches' descriptors; each reused once the batch that used it is done.
  struct Scratch {
    transfer::detail::CopyScratch room;
    std::shared_ptr<CopyDone> used;
  };
  std::deque<Scratch> scratches;
};

/// What the ranks of one group share: the unmatched sends and receives, the small messages,
/// the barrier and who has left.
struct LocalHub {
  explicit LocalHub(int n)
      : nranks{n}, gone(static_cast<std::size_t>(n)), pending(n), posted(n), messages(n) {}
  const int nranks;
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::atomic<bool>> gone;
  // Indexed by the receiving rank.
  std::vector<RequestQueues> pending;  // sends waiting for a receive
  std::vector<RequestQueues> posted;   // receives waiting for a send
  std::vector<std::deque<std::pair<Tag, Message>>> messages;
  std::size_t barrier_waiting{0};
  std::uint64_t barrier_generation{0};
  std::uint64_t ready_records{0};  // under `mutex`: orders the requests' `ready` records
  /// Per GPU, the stream of the copies into (or out of) its memory: apart from the ranks' own
  /// streams, so a transfer does not wait behind a rank's kernels, nor they behind it.
  std::vector<OwningStream> copy_streams;
  std::vector<std::unique_ptr<DeviceCopies>> device_copies;  // per GPU
};

/// One side of a transfer. Once matched, both sides share the copy's completion.
class LocalRequest final : public Request {
 public:
  LocalRequest(bool is_send, Rank self, Rank peer, Tag tag, Buffer* buffer,
               std::shared_ptr<LocalHub> hub)
      : Request(is_send, peer, tag, buffer->size()),
        self{self},
        buffer{buffer},
        hub_{std::move(hub)} {}

  bool progress() override;
  bool cancel() noexcept override;

  // queued -> matched (under the hub's lock) -> copying (issued) -> done, or failed.
  static constexpr int queued = 0, matched = 1, copying = 2, done = 3, failed = 4;
  const Rank self;
  Buffer* const buffer;
  std::atomic<int> state{queued};
  /// The buffer's stream when posted (its allocation and pending writes), recorded under the
  /// hub's lock as its `ready_order`-th record: of a stream's records, the latest covers the
  /// earlier ones.
  Event ready;
  Stream ready_stream;
  std::uint64_t ready_order{0};
  std::shared_ptr<CopyDone> copy;  // set when copying
  std::string error;

 private:
  std::shared_ptr<LocalHub> hub_;
};

/// Sets the current device for the scope (no-op without a GPU).
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int old_{-1};
};

/// Moves the bytes of a pair matched under the hub's lock (called outside it): between host
/// memory at once; between device buffers queued for issue_queued_copies; otherwise one copy
/// on the copy stream of the side in device memory.
void transfer(LocalHub& hub, const std::shared_ptr<LocalRequest>& send,
              const std::shared_ptr<LocalRequest>& recv);

/// Issues every queued copy of the hub, a batch per GPU. A failure fails the batch's requests.
void issue_queued_copies(LocalHub& hub) noexcept;

}  // namespace spillway::detail
