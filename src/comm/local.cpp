#include <spillway/comm/local.hpp>
#include <spillway/comm/single.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/event.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include "comm/detail/local_hub.hpp"

#include <mutex>

namespace spillway {

std::vector<std::unique_ptr<Communicator>> LocalCommunicator::create(int nranks) {
  SPILLWAY_EXPECTS(nranks >= 1, "a local communicator needs at least one rank");
  const int gpus = cuda::device_count();
  for (int a = 0; a < gpus; ++a) {
    for (int b = 0; b < gpus; ++b) {
      if (a != b) cuda::enable_peer_access(a, b);
    }
  }
  auto hub = std::make_shared<detail::LocalHub>(nranks);
  for (int d = 0; d < gpus; ++d) {
    detail::DeviceScope scope(d);
    hub->copy_streams.emplace_back();
    hub->device_copies.push_back(std::make_unique<detail::DeviceCopies>());
  }
  std::vector<std::unique_ptr<Communicator>> out;
  for (Rank r = 0; r < nranks; ++r) out.push_back(std::make_unique<LocalCommunicator>(hub, r));
  return out;
}

int LocalCommunicator::device_of(Rank rank) noexcept {
  const int gpus = cuda::device_count();
  return gpus > 0 ? rank % gpus : -1;
}

std::unique_ptr<Communicator> make_single_communicator() {
  return std::move(LocalCommunicator::create(1).front());
}

LocalCommunicator::LocalCommunicator(std::shared_ptr<detail::LocalHub> hub, Rank rank)
    : Communicator(rank, hub->nranks), hub_{std::move(hub)} {}

LocalCommunicator::~LocalCommunicator() {
  leave();
}

void LocalCommunicator::leave() noexcept {
  {
    // Under the mutex: a barrier that has just found nobody gone, and not yet slept, would
    // otherwise miss the notification and wait out the timeout.
    std::lock_guard lock(hub_->mutex);
    hub_->gone[static_cast<std::size_t>(rank())].store(true);
  }
  hub_->cv.notify_all();
}

bool LocalCommunicator::do_has_left(Rank peer) const noexcept {
  return hub_->gone[static_cast<std::size_t>(peer)].load();
}

std::unique_ptr<Future> LocalCommunicator::do_send(std::unique_ptr<Buffer> buffer, Rank dst,
                                                   Tag tag) {
  auto req = std::make_shared<detail::LocalRequest>(true, rank(), dst, tag, buffer.get(), hub_);
  if (buffer->mem_type() != MemoryType::HOST) buffer->wait();
  return post(std::move(req), std::move(buffer));
}

std::unique_ptr<Future> LocalCommunicator::do_recv(Rank src, Tag tag,
                                                   std::unique_ptr<Buffer> buffer) {
  auto req = std::make_shared<detail::LocalRequest>(false, rank(), src, tag, buffer.get(), hub_);
  return post(std::move(req), std::move(buffer));
}

std::unique_ptr<Future> LocalCommunicator::post(std::shared_ptr<detail::LocalRequest> req,
                                                std::unique_ptr<Buffer> buffer) {
  // A send looks for a posted receive of its destination, a receive for a pending send to
  // this rank; unmatched, each waits in its own queue of the receiving rank.
  const auto receiver = static_cast<std::size_t>(req->is_send ? req->peer : rank());
  auto& matches = req->is_send ? hub_->posted[receiver] : hub_->pending[receiver];
  auto& queue = req->is_send ? hub_->pending[receiver] : hub_->posted[receiver];
  std::shared_ptr<detail::LocalRequest> match;
  {
    std::lock_guard lock(hub_->mutex);
    // The copy waits for what the buffer's stream holds now (its allocation, writes queued):
    // recorded under the lock, so that the records of one stream are ordered.
    if (buffer->mem_type() != MemoryType::HOST) {
      req->ready.record(buffer->stream());
      req->ready_stream = buffer->stream();
      req->ready_order = ++hub_->ready_records;
    }
    // Requests are filed under their sending rank and tag: a send's, this rank; a receive's,
    // the rank it receives from.
    match = matches.take(req->is_send ? rank() : req->peer, req->tag);
    if (match) {
      // Claimed under the lock, so that neither side reports the peer gone meanwhile.
      req->state.store(detail::LocalRequest::matched);
      match->state.store(detail::LocalRequest::matched);
    } else {
      queue.push(req->is_send ? rank() : req->peer, req->tag, req);
    }
  }
  if (match) {
    req->is_send ? detail::transfer(*hub_, req, match) : detail::transfer(*hub_, match, req);
  }
  return std::make_unique<Future>(std::move(req), std::move(buffer));
}

void LocalCommunicator::do_send_message(std::vector<std::uint8_t> data, Rank dst, Tag tag) {
  std::lock_guard lock(hub_->mutex);
  hub_->messages[static_cast<std::size_t>(dst)].emplace_back(tag, Message{rank(), std::move(data)});
}

std::optional<Message> LocalCommunicator::do_recv_any(Tag tag) {
  std::lock_guard lock(hub_->mutex);
  auto& q = hub_->messages[static_cast<std::size_t>(rank())];
  for (auto it = q.begin(); it != q.end(); ++it) {
    if (it->first == tag) {
      Message m = std::move(it->second);
      q.erase(it);
      return m;
    }
  }
  return std::nullopt;
}

void LocalCommunicator::do_barrier() {
  std::unique_lock lock(hub_->mutex);
  const std::uint64_t gen = hub_->barrier_generation;
  if (++hub_->barrier_waiting == static_cast<std::size_t>(hub_->nranks)) {
    hub_->barrier_waiting = 0;
    ++hub_->barrier_generation;
    hub_->cv.notify_all();
    return;
  }
  auto someone_gone = [&] {
    for (Rank r = 0; r < hub_->nranks; ++r) {
      if (hub_->gone[static_cast<std::size_t>(r)].load()) return r;
    }
    return -1;
  };
  const bool passed = hub_->cv.wait_for(
      lock, timeout(), [&] { return hub_->barrier_generation != gen || someone_gone() >= 0; });
  if (hub_->barrier_generation != gen) return;
  --hub_->barrier_waiting;
  if (const Rank r = someone_gone(); r >= 0) {
    SPILLWAY_FAIL(
        logger().prefix() + "barrier: rank " + std::to_string(r) + " left the communicator",
        comm_error);
  }
  if (!passed) {
    SPILLWAY_FAIL(logger().prefix() + "barrier timed out after " +
                      std::to_string(timeout().count()) + " ms: a peer is dead or stuck",
                  comm_error);
  }
}

}  // namespace spillway
