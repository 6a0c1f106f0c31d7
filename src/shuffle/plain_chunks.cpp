// The plain-chunk protocol of the Shuffler: each chunk a header message and a payload. The
// outgoing postbox sends within the send budget; incoming chunks land in the first tier with
// room (deferred while there is none) and wait in the incoming store until extracted.
#include "detail/shuffler_impl.hpp"

#include <spillway/memory/memory_step.hpp>

#include "core/detail/nvtx.hpp"

namespace spillway {

void Shuffler::Impl::send_ready() {
  SPILLWAY_NVTX_RANGE("shuffle: send");
  // Direct chunks' columns are views of memory their sender holds anyway (nothing to spill):
  // they all go at once, in the order queued (column group, then partition, then column);
  // within each group that is the order their owner posts its receives in.
  std::deque<DirectPiece> views;
  {
    std::lock_guard lock(mutex);
    views.swap(direct_out);
  }
  for (auto& p : views) {
    br.statistics().add_bytes("shuffle-payload-send", static_cast<double>(p.view->size()));
    direct_sends.push_back(comm.send(std::move(p.view), p.dst, direct_tag(p.group)));
    ++moved;
  }
  for (;;) {
    Outgoing o;
    {
      std::lock_guard lock(mutex);
      if (outgoing.empty()) return;
      if (!sends.empty() && send_bytes + outgoing.front().bytes > send_budget) return;
      o = std::move(outgoing.front());
      outgoing.pop_front();
    }
    auto buf = outgoing_store.extract(o.key);
    if (buf->mem_type() == MemoryType::DISK) {  // spilled while waiting: back to memory
      buf = br.move(std::move(buf), MemoryType::HOST, br.stream());
    }
    const std::size_t bytes = buf->size();
    comm.send_message(detail::encode_chunk({o.pid, bytes, std::move(o.metadata)}), o.dst,
                      tag(stage_chunk));
    br.statistics().add_bytes("shuffle-payload-send", static_cast<double>(bytes));
    sends.push_back(comm.send(std::move(buf), o.dst, tag(stage_payload)));
    send_bytes += bytes;
    ++moved;
  }
}

std::optional<MemoryReservation> Shuffler::Impl::reserve_landing(std::size_t bytes) {
  const MemoryStep step("landing an incoming chunk (Shuffler)");
  if (auto res = br.try_reserve_first_fit(landing_order, bytes)) {
    deferred_since.reset();
    return res;
  }
  // Transfers in flight, extractions and spilling free memory soon; a receive that finds
  // none for the communicator's timeout fails the shuffle with the reason.
  const auto now = std::chrono::steady_clock::now();
  if (!deferred_since) deferred_since = now;
  if (now - *deferred_since > comm.timeout()) {
    auto res = br.reserve_first_fit(landing_order, bytes);  // the limit error, or room at last
    deferred_since.reset();
    return res;
  }
  return std::nullopt;
}

void Shuffler::Impl::post_receives() {
  while (auto msg = comm.recv_any(tag(stage_chunk))) {
    auto h = detail::decode_chunk(msg->data, total);
    if (owner_of[h.pid] != me) {
      SPILLWAY_FAIL("rank " + std::to_string(msg->source) + " sent a chunk of partition " +
                        std::to_string(h.pid) + ", which rank " + std::to_string(owner_of[h.pid]) +
                        " owns",
                    corrupt_data_error);
    }
    deferred.push_back({msg->source, std::move(h)});
    ++moved;
  }
  {
    std::lock_guard lock(mutex);
    if (!joined) return;  // the input this rank is still making has its memory first
  }
  // In arrival order, so that each peer's payloads are received in the order it sent them.
  while (!deferred.empty()) {
    detail::ChunkHeader& h = deferred.front().header;
    auto res = reserve_landing(h.payload_bytes);
    if (!res) return;
    auto buf = br.allocate(*res, h.payload_bytes, br.stream());
    count_landing(*buf, h.payload_bytes);
    receives.push_back({comm.recv(deferred.front().source, tag(stage_payload), std::move(buf)),
                        h.pid, std::move(h.metadata)});
    deferred.pop_front();
    ++moved;
  }
}

void Shuffler::Impl::complete_transfers() {
  SPILLWAY_NVTX_RANGE("shuffle: receive");
  moved += std::erase_if(sends, [&](const std::unique_ptr<Future>& f) {
    if (!comm.test(*f)) return false;
    send_bytes -= f->request().bytes;
    return true;
  });
  // The completed receives, taken out in one pass (erasing each from the middle cost the
  // square of the receives in flight: 62 ms a rank for 4096 chunks on an H200) and handed to
  // the incoming partitions under one lock, with one wake-up of the waiting consumer.
  // (Tested first, moved after: a test that throws leaves `receives` whole.)
  std::vector<char> completed(receives.size());
  for (std::size_t i = 0; i < receives.size(); ++i) completed[i] = comm.test(*receives[i].future);
  std::vector<Receive> done;
  std::size_t keep = 0;
  for (std::size_t i = 0; i < receives.size(); ++i) {
    if (completed[i] != 0) {
      done.push_back(std::move(receives[i]));
    } else {
      if (keep != i) receives[keep] = std::move(receives[i]);
      ++keep;
    }
  }
  receives.erase(receives.begin() + static_cast<std::ptrdiff_t>(keep), receives.end());
  if (done.empty()) return;
  std::vector<SpillableStore::Key> keys;
  keys.reserve(done.size());
  for (Receive& r : done) {
    auto buf = comm.release(std::move(r.future));
    br.statistics().add_bytes("shuffle-payload-recv", static_cast<double>(buf->size()));
    keys.push_back(incoming_store.insert(std::move(buf)));
  }
  {
    std::lock_guard lock(mutex);
    for (std::size_t i = 0; i < done.size(); ++i) {
      incoming[done[i].pid].push_back({std::move(done[i].metadata), keys[i]});
      arrived(done[i].pid, 1);
    }
  }
  moved += done.size();
  cv.notify_all();
}

}  // namespace spillway
