// The Shuffler's finishes: this rank's finish message to every rank (its chunk counts per
// partition, and the layouts of its direct chunks), and every rank's counted as they come, so
// that a partition is known complete once all of its chunks have arrived; ranks that left
// while awaited are a comm_error.
#include "detail/shuffler_impl.hpp"

#include <algorithm>

namespace spillway {

void Shuffler::Impl::read_finishes() {
  while (auto msg = comm.recv_any(tag(stage_finish))) {
    const auto f = detail::decode_finish(msg->data, total);
    const std::string from = "rank " + std::to_string(msg->source);
    std::map<PartID, std::uint64_t> counts;
    for (const auto& [pid, c] : f.counts) {
      if (owner_of[pid] != me) {
        SPILLWAY_FAIL(from + " counted chunks of partition " + std::to_string(pid) +
                          ", which this rank does not own",
                      corrupt_data_error);
      }
      counts[pid] += c;
    }
    std::map<PartID, detail::PackLayout> layouts;
    for (const auto& h : f.direct) {
      const std::string what = from + " sent a direct chunk of partition " + std::to_string(h.pid);
      if (owner_of[h.pid] != me)
        SPILLWAY_FAIL(what + ", which this rank does not own", corrupt_data_error);
      auto layout = detail::decode(h.metadata, h.payload_bytes);
      if (!direct_ok(layout)) {
        SPILLWAY_FAIL(what + " with a column that is not fixed-width without a mask",
                      corrupt_data_error);
      }
      if (layouts.count(h.pid) != 0 || counts[h.pid] == 0) {
        SPILLWAY_FAIL(what + " that its chunk counts do not account for", corrupt_data_error);
      }
      --counts[h.pid];  // one direct chunk per partition and sender
      layouts.emplace(h.pid, std::move(layout));
    }
    std::lock_guard lock(mutex);
    for (const auto& [pid, c] : f.counts) expected[pid] += c;
    for (auto& [pid, l] : layouts) direct[pid].sources.emplace_back(msg->source, std::move(l));
    direct_groups[static_cast<std::size_t>(msg->source)] = f.direct_groups;
    finished_from[static_cast<std::size_t>(msg->source)] = 1;
    finish_counted();
    ++moved;
  }
}

std::vector<Rank> Shuffler::Impl::left_while_awaited() const {
  std::vector<Rank> left;
  for (Rank r = 0; r < n; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (r != me && awaits(i) && comm.has_left(r)) left.push_back(r);
  }
  return left;
}

void Shuffler::Impl::check_left(const std::vector<Rank>& left) const {
  for (const Rank r : left) {
    const auto i = static_cast<std::size_t>(r);
    if (!awaits(i)) continue;
    const std::string what = finished_from[i] == 0
                                 ? "it finished inserting"
                                 : "it was ready for " +
                                       std::to_string(announced[i].size() - readies[i]) +
                                       " payloads announced to it";
    SPILLWAY_FAIL(comm.logger().prefix() + "shuffle op " + std::to_string(op) + ": rank " +
                      std::to_string(r) + " left the communicator before " + what,
                  comm_error);
  }
}

void Shuffler::Impl::finish(std::map<PartID, DirectChunk> chunks, std::uint32_t groups) {
  std::vector<detail::Finish> msgs(static_cast<std::size_t>(n));
  {
    std::lock_guard lock(mutex);
    SPILLWAY_EXPECTS(!inserts_done, "insert_finished() called twice");
    inserts_done = true;
    joined = true;
    for (auto& [pid, chunk] : chunks) {  // in partition order: the order receives are posted
      const Rank dst = owner_of[pid];
      ++sent[static_cast<std::size_t>(dst)][pid];
      if (dst == me) {
        DirectPartition& d = direct[pid];
        d.sources.emplace_back(me, chunk.layout);
        d.own = std::move(chunk);
        continue;
      }
      msgs[static_cast<std::size_t>(dst)].direct.push_back(
          {pid, chunk.layout.payload_size, detail::encode(chunk.layout)});
    }
    for (std::uint32_t g = 0; g < groups; ++g) {  // the peers' columns, group by group
      for (auto& [pid, chunk] : chunks) {
        const Rank dst = owner_of[pid];
        if (dst == me) continue;
        for (std::size_t c = 0; c < chunk.columns.size(); ++c) {
          auto& col = chunk.columns[c];
          if (group_of(c, chunk.columns.size(), groups) != g || col->size() == 0) continue;
          direct_out.push_back({dst, static_cast<std::uint8_t>(g), std::move(col)});
        }
      }
    }
    for (auto& m : msgs) m.direct_groups = groups;
    for (PartID pid = 0; pid < total; ++pid) {
      const auto r = static_cast<std::size_t>(owner_of[pid]);
      const auto it = sent[r].find(pid);
      msgs[r].counts.emplace_back(pid, it == sent[r].end() ? 0 : it->second);
    }
    for (const auto& [pid, c] : msgs[static_cast<std::size_t>(me)].counts) expected[pid] += c;
    finish_counted();
  }
  for (Rank r = 0; r < n; ++r) {
    if (r == me) continue;
    comm.send_message(detail::encode_finish(msgs[static_cast<std::size_t>(r)]), r,
                      tag(stage_finish));
  }
  comm.progress_thread().wake();
}

}  // namespace spillway
