// The local communicator's requests and the copies of its matched pairs: host memory copied
// at once; between device buffers, queued and issued together as one batched copy per GPU.
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/memory/memory_type.hpp>

#include "comm/detail/local_hub.hpp"

#include <cstring>
#include <exception>
#include <span>
#include <thread>

namespace spillway::detail {

void RequestQueues::push(Rank origin, Tag tag, std::shared_ptr<LocalRequest> r) {
  queues_[key(origin, tag)].push_back(std::move(r));
}

std::shared_ptr<LocalRequest> RequestQueues::take(Rank origin, Tag tag) {
  auto it = queues_.find(key(origin, tag));
  if (it == queues_.end()) return nullptr;
  auto r = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) queues_.erase(it);
  return r;
}

void RequestQueues::erase(Rank origin, Tag tag, const LocalRequest* r) {
  auto it = queues_.find(key(origin, tag));
  if (it == queues_.end()) return;
  auto& q = it->second;
  for (auto e = q.begin(); e != q.end(); ++e) {
    if (e->get() == r) {
      q.erase(e);
      break;
    }
  }
  if (q.empty()) queues_.erase(it);
}

bool LocalRequest::progress() {
  const int s = state.load(std::memory_order_acquire);
  if (s == failed) SPILLWAY_FAIL(error, comm_error);
  if (s == copying) {
    if (!copy->is_complete()) return false;
    state.store(done, std::memory_order_release);
    return true;
  }
  if (s == done) return true;
  if (s == matched) {  // queued for a batch, or being issued
    issue_queued_copies(*hub_);
    if (state.load(std::memory_order_acquire) == failed) SPILLWAY_FAIL(error, comm_error);
    return false;
  }
  if (hub_->gone[static_cast<std::size_t>(peer)].load()) {
    // Matched meanwhile? Look again under the lock, where matching happens.
    std::lock_guard lock(hub_->mutex);
    if (state.load() == queued) {
      SPILLWAY_FAIL("rank " + std::to_string(peer) + " left the communicator before the " +
                        describe() + " was matched",
                    comm_error);
    }
  }
  return false;
}

bool LocalRequest::cancel() noexcept {
  {
    std::lock_guard lock(hub_->mutex);
    if (state.load() == queued) {
      if (is_send) {
        hub_->pending[static_cast<std::size_t>(peer)].erase(self, tag, this);
      } else {
        hub_->posted[static_cast<std::size_t>(self)].erase(peer, tag, this);
      }
      return true;
    }
  }
  while (state.load() == matched) {  // queued for a batch (issued now), or being issued
    issue_queued_copies(*hub_);
    std::this_thread::yield();
  }
  if (state.load() == copying) {
    try {
      copy->event.synchronize();
    } catch (...) {  // nothing better to do in a destructor path
    }
  }
  return true;
}

DeviceScope::DeviceScope(int device) {
  if (device < 0) return;
  old_ = cuda::current_device();
  if (old_ != device) cuda::set_device(device);
}

DeviceScope::~DeviceScope() {
  if (old_ >= 0) {
    try {
      cuda::set_device(old_);
    } catch (...) {
    }
  }
}

namespace {

void fail(LocalRequest& send, LocalRequest& recv, const std::string& msg) {
  send.error = recv.error = msg;
  send.state.store(LocalRequest::failed, std::memory_order_release);
  recv.state.store(LocalRequest::failed, std::memory_order_release);
}

void copying(LocalRequest& r, const std::shared_ptr<CopyDone>& copy) {
  r.ready = Event{};  // (back to the pool now, not when the request goes)
  r.copy = copy;
  r.state.store(LocalRequest::copying, std::memory_order_release);
}

/// Makes `stream` wait for what the pairs' buffers had queued when they were posted: per
/// stream, the latest of its records covers the earlier ones.
void wait_ready(std::span<const MatchedPair> pairs, Stream stream) {
  std::vector<const LocalRequest*> latest;  // one per stream (few: the ranks' and landings')
  const auto consider = [&](const LocalRequest& r) {
    if (r.ready.handle() == nullptr) return;
    for (auto& l : latest) {
      if (l->ready_stream == r.ready_stream) {
        if (r.ready_order > l->ready_order) l = &r;
        return;
      }
    }
    latest.push_back(&r);
  };
  for (const auto& [send, recv] : pairs) {
    consider(*send);
    consider(*recv);
  }
  for (const LocalRequest* r : latest) r->ready.wait_on(stream);
}

/// The queued batch of one GPU, issued on its copy stream.
void issue(LocalHub& hub, int device, DeviceCopies& dc, std::span<const MatchedPair> batch) {
  namespace td = transfer::detail;
  const DeviceScope scope(device);
  const Stream stream = hub.copy_streams.at(static_cast<std::size_t>(device));
  wait_ready(batch, stream);
  DeviceCopies::Scratch* scratch = nullptr;  // one whose last batch is done
  for (auto& s : dc.scratches) {
    if (s.used == nullptr || s.used->is_complete()) {
      scratch = &s;
      break;
    }
  }
  if (scratch == nullptr) scratch = &dc.scratches.emplace_back();
  std::span<td::Piece> pieces = scratch->room.pieces(batch.size());
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto& [send, recv] = batch[i];
    pieces[i] = {recv->buffer->data(), send->buffer->data(), send->bytes};
    bytes += send->bytes;
  }
  // Between device memory the kernel, below 16 MiB pieces; above, a cudaMemcpyAsync each.
  const td::CopyMethod method = td::choose(td::CopyMethod::automatic, bytes / batch.size(),
                                           /*kernel_reachable=*/true, /*over_pcie=*/false);
  td::copy_pieces(pieces, method, stream, scratch->room);
  auto done = std::make_shared<CopyDone>();
  done->event.record(stream);
  scratch->used = done;
  for (const auto& [send, recv] : batch) {
    copying(*send, done);
    copying(*recv, done);
  }
}

}  // namespace

void transfer(LocalHub& hub, const std::shared_ptr<LocalRequest>& send,
              const std::shared_ptr<LocalRequest>& recv) {
  if (send->bytes != recv->bytes) {
    fail(*send, *recv,
         "size mismatch: rank " + std::to_string(send->self) + " sent " +
             std::to_string(send->bytes) + " bytes with " + to_string(send->tag) + " but rank " +
             std::to_string(recv->self) + " posted a receive of " + std::to_string(recv->bytes));
    return;
  }
  Buffer& src = *send->buffer;
  Buffer& dst = *recv->buffer;
  const bool gpu = src.mem_type() == MemoryType::DEVICE || dst.mem_type() == MemoryType::DEVICE;
  if (!gpu || send->bytes == 0) {
    send->ready.synchronize();  // pinned buffers may have GPU work pending
    recv->ready.synchronize();
    if (send->bytes > 0) std::memcpy(dst.data(), src.data(), send->bytes);
    send->state.store(LocalRequest::done, std::memory_order_release);
    recv->state.store(LocalRequest::done, std::memory_order_release);
    return;
  }
  // On the copy stream of the GPU of the side in device memory, the sender's if both are (a
  // push: NVLink writes ran 5-10% faster than reads of the peer's memory),
  // after what was queued on both buffers' streams when they were posted.
  const Buffer& owner = src.mem_type() == MemoryType::DEVICE ? src : dst;
  const int device = owner.resource().device();
  auto& dc = *hub.device_copies.at(static_cast<std::size_t>(device));
  if (src.mem_type() == MemoryType::DEVICE && dst.mem_type() == MemoryType::DEVICE) {
    std::lock_guard lock(dc.mutex);
    dc.queued.emplace_back(send, recv);
    return;
  }
  try {
    const DeviceScope scope(device);
    const Stream stream = hub.copy_streams.at(static_cast<std::size_t>(device));
    send->ready.wait_on(stream);
    recv->ready.wait_on(stream);
    auto done = std::make_shared<CopyDone>();
    cuda::memcpy_async(dst.data(), src.data(), send->bytes, stream);
    done->event.record(stream);
    copying(*send, done);
    copying(*recv, done);
  } catch (const std::exception& e) {
    fail(*send, *recv, e.what());
  }
}

void issue_queued_copies(LocalHub& hub) noexcept {
  for (std::size_t d = 0; d < hub.device_copies.size(); ++d) {
    DeviceCopies& dc = *hub.device_copies[d];
    std::lock_guard lock(dc.mutex);  // held while issuing: the scratch is the batch's
    if (dc.queued.empty()) continue;
    std::vector<MatchedPair> batch;
    batch.swap(dc.queued);
    try {
      issue(hub, static_cast<int>(d), dc, batch);
    } catch (const std::exception& e) {
      for (const auto& [send, recv] : batch) {
        if (send->state.load() == LocalRequest::matched) fail(*send, *recv, e.what());
      }
    }
  }
}

}  // namespace spillway::detail
