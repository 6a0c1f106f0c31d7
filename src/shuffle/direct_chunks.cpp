// The direct-chunk protocol of the Shuffler: once every rank has finished, each local
// partition's final buffer is allocated and its senders' columns are received straight into
// their places in it (this rank's own chunk copied in), so that no concatenation follows.
#include <spillway/transfer/gpu_copies.hpp>
#include "detail/shuffler_impl.hpp"

#include <spillway/core/cuda.hpp>

#include <cstring>

namespace spillway {

void Shuffler::Impl::post_direct() {
  {
    std::lock_guard lock(mutex);
    if (!joined || finishes != n) return;  // the sizes are not all known yet
  }
  direct_started = true;
  std::vector<DirectPartition*> posted;
  for (auto& entry : direct) {  // (not a structured binding: the lambda below captures it)
    const PartID pid = entry.first;
    DirectPartition& d = entry.second;
    if (d.buffer) continue;  // allocated and posted already
    std::sort(d.sources.begin(), d.sources.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    const auto& [first, schema] = d.sources.front();
    std::uint64_t rows = 0;
    for (const auto& [r, l] : d.sources) {
      if (!same_schema(l, schema)) {
        SPILLWAY_FAIL("partition " + std::to_string(pid) + ": rank " + std::to_string(r) +
                          "'s chunk has other columns than rank " + std::to_string(first) + "'s",
                      corrupt_data_error);
      }
      rows += l.num_rows;
    }
    d.layout = detail::make_layout(schema_of(schema), rows, {});
    auto res = reserve_landing(d.layout.payload_size);
    if (!res) break;  // later partitions wait too: each sender sends in partition order
    if (!landing_stream) landing_stream.emplace();
    d.buffer = br.allocate(*res, d.layout.payload_size, landing_stream->view());
    posted.push_back(&d);
    ++moved;
  }
  // The receives, group by group (the order the senders' copies become ready in), each
  // group's in partition order (as its sender sends it).
  std::vector<std::uint32_t> groups;
  {
    std::lock_guard lock(mutex);
    groups = direct_groups;
  }
  const std::uint32_t most = *std::max_element(groups.begin(), groups.end());
  for (std::uint32_t g = 0; g < most; ++g) {
    for (DirectPartition* d : posted) {
      for_each_piece(*d, [&](Rank src, std::size_t c, std::size_t at, std::size_t bytes) {
        const std::size_t columns = d->layout.columns.size();
        if (src == me || group_of(c, columns, groups[static_cast<std::size_t>(src)]) != g) return;
        count_landing(*d->buffer, bytes);
        d->receives.push_back(
            comm.recv(src, direct_tag(g), BufferResource::view(*d->buffer, at, bytes)));
      });
    }
  }
  // Then this rank's own chunks, while the peers' bytes move (after every receive was posted,
  // so that no transfer waits for them): the small pieces between device buffers by kernel.
  // A batch goes out once it holds own_batch_bytes, so that the first partitions need not wait
  // for every partition's copies.
  OwnCopies batch;
  std::size_t first = 0;  // posted[first, ...): copies issued, `copied` not recorded yet
  const auto flush = [&](std::size_t end) {
    if (!batch.sizes.empty()) {
      gpu::copy_batch(batch.dsts, batch.srcs, batch.sizes, br, own_stream->view());
      batch = OwnCopies{};
    }
    for (; first < end; ++first) {
      if (posted[first]->on_gpu) posted[first]->copied.record(own_stream->view());
    }
  };
  for (std::size_t i = 0; i < posted.size(); ++i) {
    copy_own(*posted[i], batch);
    if (batch.bytes >= own_batch_bytes) flush(i + 1);
  }
  flush(posted.size());
}

template <typename Fn>
void Shuffler::Impl::for_each_piece(const DirectPartition& d, Fn&& fn) {
  std::uint64_t row = 0;
  for (const auto& [src, l] : d.sources) {
    for (std::size_t c = 0; c < l.columns.size(); ++c) {
      const std::size_t width = size_of(l.columns[c].type);
      const std::size_t bytes = l.num_rows * width;
      if (bytes > 0) fn(src, c, d.layout.columns[c].data.offset + row * width, bytes);
    }
    row += l.num_rows;
  }
}

void Shuffler::Impl::copy_own(DirectPartition& d, OwnCopies& batch) {
  if (!d.own) return;
  bool& gpu_copy = d.on_gpu;
  bool synced = !br.is_live(MemoryType::DEVICE);
  std::optional<Stream> waited;  // the last column stream own_stream waits for
  for_each_piece(d, [&](Rank src, std::size_t c, std::size_t at, std::size_t bytes) {
    if (src != me) return;
    const Buffer& from = *d.own->columns[c];
    if (is_host_accessible(from.mem_type()) && is_host_accessible(d.buffer->mem_type())) {
      if (!synced) br.stream().synchronize();  // pinned memory: GPU writes still queued
      synced = true;
      std::memcpy(d.buffer->data() + at, from.data(), bytes);
      return;
    }
    // On a stream of its own, after what the column's stream (where it is written) and the
    // final buffer's (its allocation) hold now.
    if (!own_stream) own_stream.emplace();
    if (!gpu_copy) {
      Event allocated;
      allocated.record(d.buffer->stream());
      allocated.wait_on(own_stream->view());
      gpu_copy = true;
    }
    if (waited != from.stream()) {
      Event written;
      written.record(from.stream());
      written.wait_on(own_stream->view());
      waited = from.stream();
    }
    namespace td = transfer::detail;
    const bool device_to_device =
        from.mem_type() == MemoryType::DEVICE && d.buffer->mem_type() == MemoryType::DEVICE;
    if (td::choose(td::CopyMethod::automatic, bytes, device_to_device, /*over_pcie=*/false) ==
        td::CopyMethod::kernel) {
      batch.dsts.push_back(d.buffer->data() + at);
      batch.srcs.push_back(from.data());
      batch.sizes.push_back(bytes);
      batch.bytes += bytes;
    } else {
      cuda::memcpy_async(d.buffer->data() + at, from.data(), bytes, own_stream->view());
    }
  });
}

void Shuffler::Impl::complete_direct() {
  moved +=
      std::erase_if(direct_sends, [&](const std::unique_ptr<Future>& f) { return comm.test(*f); });
  if (!direct_started) return;  // insert_finished may still be filling `direct`
  for (auto it = direct.begin(); it != direct.end();) {
    DirectPartition& d = it->second;
    moved += std::erase_if(d.receives, [&](const std::unique_ptr<Future>& f) {
      if (!comm.test(*f)) return false;
      br.statistics().add_bytes("shuffle-payload-recv", static_cast<double>(f->request().bytes));
      return true;
    });
    if (!d.buffer || !d.receives.empty() || !d.copied.is_complete()) {
      ++it;
      continue;
    }
    d.own.reset();  // this rank's chunk is in: its memory may go
    const auto key = incoming_store.insert(std::move(d.buffer));
    {
      std::lock_guard lock(mutex);
      incoming[it->first].push_back({detail::encode(d.layout), key});
      arrived(it->first, d.sources.size());
      it = direct.erase(it);
    }
    ++moved;
    cv.notify_all();
  }
}

}  // namespace spillway
