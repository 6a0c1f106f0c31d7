// The plain-chunk protocol of the Shuffler: each chunk (or batch of small ones) a chunks
// message, a ready message back and a payload. The sender announces its chunks within the send
// budget and keeps their payloads, spillable, until their owner is ready; the owner reserves a
// landing in the first tier with room (deferred while there is none, or while the rank's
// transfer budget is spent), posts the receive and says it is ready; only then is the payload
// sent. A send in flight thus always has memory waiting for it: it never holds its sender's
// memory while the receiver's is full of sends of its own (RapidsMPF's ready-for-data). The
// landed chunks wait in the incoming store until extracted.
#include "detail/shuffler_impl.hpp"

#include <spillway/core/cuda.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/memory_step.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <utility>

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
  // The destinations in turn, each time the chunks waiting for it that fit in one message.
  for (;;) {
    std::vector<Outgoing> batch;
    Rank dst = 0;
    {
      std::lock_guard lock(mutex);
      if (outgoing_count == 0) return;
      while (outgoing[static_cast<std::size_t>(next_dst)].empty()) next_dst = (next_dst + 1) % n;
      dst = next_dst;
      auto& q = outgoing[static_cast<std::size_t>(dst)];
      const auto fits = [&](std::size_t bytes) {
        return send_bytes == 0 || send_bytes + bytes <= send_budget;
      };
      if (!fits(q.front().bytes)) return;
      std::size_t bytes = q.front().bytes;
      batch.push_back(std::move(q.front()));
      q.pop_front();
      if (bytes < batch_below) {
        const std::size_t most = std::min(batch_bytes, send_budget);
        // Chains of payloads lying one after another (Outgoing::follows) go joined, without a
        // copy (send_chunks): a batch in a chain takes only the rest of it (its last chunk may
        // go alone), one that is not stops where a chain starts.
        const auto starts_chain = [&] { return q.size() > 1 && q[1].follows; };
        const bool chain = batch.front().follows || (!q.empty() && q.front().follows);
        while (!q.empty() && q.front().bytes < batch_below &&
               (chain ? q.front().follows : !starts_chain())) {
          const std::size_t more = round_up(bytes, detail::chunk_alignment) + q.front().bytes;
          if (more > most || !fits(more)) break;
          bytes = more;
          batch.push_back(std::move(q.front()));
          q.pop_front();
        }
      }
      outgoing_count -= batch.size();
      next_dst = (dst + 1) % n;
    }
    send_chunks(dst, std::move(batch));
  }
}

std::vector<std::uint32_t> Shuffler::Impl::partitions_by_owner() const {
  std::vector<std::size_t> at(static_cast<std::size_t>(n) + 1, 0);  // (a counting sort)
  for (PartID p = 0; p < total; ++p) ++at[static_cast<std::size_t>(owner_of[p]) + 1];
  std::partial_sum(at.begin(), at.end(), at.begin());
  std::vector<std::uint32_t> out(total);
  for (PartID p = 0; p < total; ++p) out[at[static_cast<std::size_t>(owner_of[p])]++] = p;
  return out;
}

std::vector<std::pair<PartID, bool>> Shuffler::Impl::in_partition_order(
    const std::unordered_map<PartID, PackedData>& chunks) const {
  std::vector<std::pair<PartID, bool>> order;
  order.reserve(chunks.size());
  for (const auto& entry : chunks) order.emplace_back(entry.first, false);
  std::sort(order.begin(), order.end());
  std::vector<const Buffer*> before(static_cast<std::size_t>(n), nullptr);
  for (auto& [pid, follows] : order) {
    const auto dst = static_cast<std::size_t>(owner_of[pid]);
    const Buffer& payload = *chunks.at(pid).payload;
    follows = before[dst] != nullptr && payload.follows(*before[dst], detail::chunk_alignment);
    before[dst] = &payload;
  }
  return order;
}

void Shuffler::Impl::send_chunks(Rank dst, std::vector<Outgoing> batch) {
  // (Chunks spilled to disk while they waited stay there: they go back to memory when their
  // owner is ready for them, one message each.)
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<detail::ChunkHeader> chunks;
  for (Outgoing& o : batch) {
    auto buf = outgoing_store.extract(o.key);
    chunks.push_back({o.pid, buf->size(), std::move(o.metadata)});
    bufs.push_back(std::move(buf));
  }
  if (bufs.size() > 1) {
    if (auto payload = BufferResource::join(bufs, detail::chunk_alignment)) {
      br.statistics().add_bytes("shuffle-joined", static_cast<double>(payload->size()));
      announce(dst, chunks, std::move(payload));
      return;
    }
    if (auto payload = gather(chunks, bufs)) {
      announce(dst, chunks, std::move(payload));
      return;
    }
  }
  for (std::size_t i = 0; i < bufs.size(); ++i) {
    announce(dst, std::span(chunks).subspan(i, 1), std::move(bufs[i]));
  }
}

void Shuffler::Impl::announce(Rank dst, std::span<const detail::ChunkHeader> chunks,
                              std::unique_ptr<Buffer> payload) {
  const std::size_t bytes = payload->size();
  announced[static_cast<std::size_t>(dst)].push_back(
      {announced_store.insert(std::move(payload)), bytes});
  ++announced_count;
  send_bytes += bytes;
  comm.send_message(detail::encode_chunks(chunks), dst, tag(stage_chunk));
  moved += chunks.size();
}

void Shuffler::Impl::send_payloads() {
  while (auto msg = comm.recv_any(tag(stage_ready))) {
    const std::uint32_t payloads = detail::decode_ready(msg->data);
    const auto src = static_cast<std::size_t>(msg->source);
    if (payloads > announced[src].size() - readies[src]) {
      SPILLWAY_FAIL("rank " + std::to_string(msg->source) + " said it was ready for " +
                        std::to_string(payloads) + " payloads, but " +
                        std::to_string(announced[src].size() - readies[src]) +
                        " were announced to it and waiting",
                    corrupt_data_error);
    }
    readies[src] += payloads;
    ++moved;
  }
  for (std::size_t dst = 0; dst < readies.size(); ++dst) {
    for (; readies[dst] > 0; --readies[dst]) {
      Announced& a = announced[dst].front();
      auto buf = announced_store.extract(a.key);
      if (!unspill(buf)) {  // no room yet: back in the store, at the head of the line
        a.key = announced_store.insert(std::move(buf));
        return;
      }
      br.statistics().add_bytes("shuffle-payload-send", static_cast<double>(a.bytes));
      sends.push_back(comm.send(std::move(buf), static_cast<Rank>(dst), tag(stage_payload)));
      announced[dst].pop_front();
      --announced_count;
      ++moved;
    }
  }
}

bool Shuffler::Impl::unspill(std::unique_ptr<Buffer>& buf) {
  if (buf->mem_type() != MemoryType::DISK) return true;
  const MemoryStep step("bringing a spilled chunk back to memory to send it (Shuffler)");
  const std::size_t bytes = buf->size();
  auto res = reserve_soon(
      unspill_since, [&] { return br.reserve_or_spill(MemoryType::HOST, bytes); },
      [&] { return std::optional(br.reserve(MemoryType::HOST, bytes)); });
  if (!res) return false;
  buf = br.move(std::move(buf), *res, br.stream());
  return true;
}

std::unique_ptr<Buffer> Shuffler::Impl::gather(std::span<const detail::ChunkHeader> chunks,
                                               std::vector<std::unique_ptr<Buffer>>& bufs) {
  const MemoryType t = bufs.front()->mem_type();
  if (t == MemoryType::DISK) return nullptr;
  for (const auto& b : bufs) {
    if (b->mem_type() != t) return nullptr;
  }
  const auto offsets = detail::chunk_offsets(chunks);
  auto res = br.try_reserve(t, offsets.back());
  if (!res) return nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  const Stream stream = br.stream();
  auto out = br.allocate(*res, offsets.back(), stream);
  if (t == MemoryType::HOST) {
    for (std::size_t i = 0; i < bufs.size(); ++i) {
      bufs[i]->wait();  // a move into host memory still in flight
      if (chunks[i].payload_bytes > 0) {
        std::memcpy(out->data() + offsets[i], bufs[i]->data(), chunks[i].payload_bytes);
      }
    }
  } else {
    // One batch of copies on the resource's stream, after what the chunks' own streams hold;
    // those streams wait for the copies before the chunks' memory can be reused.
    std::vector<Stream> others;
    std::vector<void*> dsts;
    std::vector<const void*> srcs;
    std::vector<std::size_t> sizes;
    for (std::size_t i = 0; i < bufs.size(); ++i) {
      const Stream s = bufs[i]->stream();
      if (s != stream && std::find(others.begin(), others.end(), s) == others.end()) {
        others.push_back(s);
      }
      if (chunks[i].payload_bytes == 0) continue;
      dsts.push_back(out->data() + offsets[i]);
      srcs.push_back(bufs[i]->data());
      sizes.push_back(chunks[i].payload_bytes);
    }
    for (const Stream s : others) {
      Event e;
      e.record(s);
      e.wait_on(stream);
    }
    // Device memory: one kernel (a fifth of cudaMemcpyBatchAsync's host time a gather).
    // Pinned host memory: the copy engines.
    if (t == MemoryType::DEVICE) {
      gpu::copy_batch(dsts, srcs, sizes, br, stream);
    } else {
      cuda::memcpy_batch_async(dsts.data(), srcs.data(), sizes.data(), dsts.size(), stream);
    }
    if (!others.empty()) {
      Event e;
      e.record(stream);
      for (const Stream s : others) e.wait_on(s);
    }
  }
  // (the host's time: the copies on the GPU may still run)
  br.statistics().add("shuffle-gathered", static_cast<double>(offsets.back()),
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  bufs.clear();
  return out;
}

std::optional<MemoryReservation> Shuffler::Impl::reserve_landing(std::size_t bytes) {
  const MemoryStep step("landing an incoming chunk (Shuffler)");
  // Transfers in flight, extractions and spilling free memory soon; a receive that finds
  // none for the communicator's timeout fails the shuffle with the reason.
  return reserve_soon(
      deferred_since, [&] { return br.try_reserve_first_fit(landing_order, bytes); },
      [&] { return std::optional(br.reserve_first_fit(landing_order, bytes)); });
}

void Shuffler::Impl::post_receives() {
  while (auto msg = comm.recv_any(tag(stage_chunk))) {
    auto chunks = detail::decode_chunks(msg->data, total);
    for (const auto& h : chunks) {
      if (owner_of[h.pid] != me) {
        SPILLWAY_FAIL("rank " + std::to_string(msg->source) + " sent a chunk of partition " +
                          std::to_string(h.pid) + ", which rank " +
                          std::to_string(owner_of[h.pid]) + " owns",
                      corrupt_data_error);
      }
    }
    deferred.push_back({msg->source, std::move(chunks)});
    ++moved;
  }
  {
    std::lock_guard lock(mutex);
    if (!joined) return;  // the input this rank is still making has its memory first
  }
  // In arrival order, so that each peer's payloads are received (and asked for) in the order
  // it announced them. One ready message per peer for all the receives posted here: under
  // OpenMPI's shared memory a message waits behind the payloads being copied, and a sender
  // that read one ready per progress round posted its sends that much later.
  if (deferred.empty()) return;
  while (!deferred.empty()) {
    Deferred& d = deferred.front();
    const std::size_t bytes = detail::chunk_offsets(d.chunks).back();
    auto share = br.transfer_budget().try_take(bytes);
    if (!share) break;
    auto res = reserve_landing(bytes);
    if (!res) break;
    auto buf = br.allocate(*res, bytes, br.stream());
    count_landing(*buf, bytes);
    receives.push_back({comm.recv(d.source, tag(stage_payload), std::move(buf)),
                        std::move(d.chunks), std::move(*share)});
    ++posted_from[static_cast<std::size_t>(d.source)];
    deferred.pop_front();
    ++moved;
  }
  for (std::size_t src = 0; src < posted_from.size(); ++src) {
    if (posted_from[src] > 0) {
      comm.send_message(detail::encode_ready(std::exchange(posted_from[src], 0)),
                        static_cast<Rank>(src), tag(stage_ready));
    }
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
  // square of the receives in flight) and handed to
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
  // A payload of several chunks is split into views of it, which keep it alive (and spill
  // one by one, its memory freed when the last has gone).
  std::vector<SpillableStore::Key> keys;
  for (Receive& r : done) {
    auto buf = comm.release(std::move(r.future));
    br.statistics().add_bytes("shuffle-payload-recv", static_cast<double>(buf->size()));
    if (r.chunks.size() == 1) {
      keys.push_back(incoming_store.insert(std::move(buf)));
      continue;
    }
    const auto offsets = detail::chunk_offsets(r.chunks);
    const std::shared_ptr<Buffer> block = std::move(buf);
    for (std::size_t i = 0; i < r.chunks.size(); ++i) {
      keys.push_back(incoming_store.insert(
          BufferResource::view(*block, offsets[i], r.chunks[i].payload_bytes, block)));
    }
  }
  {
    std::lock_guard lock(mutex);
    std::size_t k = 0;
    for (Receive& r : done) {
      for (detail::ChunkHeader& h : r.chunks) {
        incoming[h.pid].push_back({std::move(h.metadata), keys[k++]});
        arrived(h.pid, 1);
      }
    }
  }
  moved += keys.size();
  cv.notify_all();
}

}  // namespace spillway
