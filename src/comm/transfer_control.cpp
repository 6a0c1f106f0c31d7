#include "comm/detail/transfer_core.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>

#include "comm/detail/transfer_wire.hpp"

#include <algorithm>
#include <thread>

// The control side of the transfer communicator's core: small messages, the barrier, and
// what the control channel brings (offers, answers, withdrawals, barrier steps).

namespace spillway::detail {

namespace {

using namespace std::chrono_literals;
using Kind = TransferWire::Kind;

}  // namespace

void TransferCore::send_message(std::vector<std::uint8_t> data, Rank dst, Tag tag) {
  std::lock_guard lock(mutex_);
  if (dst == me_) {
    messages_[tag.value()].push_back(Message{me_, std::move(data)});
    return;
  }
  std::size_t at = 0;
  do {
    const std::size_t n = std::min(TransferWire::max_piece, data.size() - at);
    const bool last = at + n == data.size();
    send_locked(dst, TransferWire::message(me_, tag.value(), last, std::span(data).subspan(at, n)));
    at += n;
  } while (at < data.size());
}

std::optional<Message> TransferCore::recv_any(Tag tag) {
  std::lock_guard lock(mutex_);
  pump();
  const auto it = messages_.find(tag.value());
  if (it == messages_.end()) return std::nullopt;
  Message m = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) messages_.erase(it);
  return m;
}

void TransferCore::barrier(std::chrono::milliseconds timeout) {
  std::uint64_t generation = 0;
  {
    std::lock_guard lock(mutex_);
    generation = ++barrier_generation_;
    if (me_ != 0) send_locked(0, TransferWire::barrier(Kind::arrive, me_, generation));
  }
  // (under mutex_) Whether this rank may leave: rank 0 once every other rank has arrived
  // (it then releases them), the others once rank 0 has released them.
  const auto done = [&] {
    if (me_ == 0 && arrivals_[generation] == nranks_ - 1) {
      arrivals_.erase(generation);
      for (Rank r = 1; r < nranks_; ++r) {
        send_locked(r, TransferWire::barrier(Kind::release, me_, generation));
      }
      return true;
    }
    return me_ != 0 && released_ >= generation;
  };
  const auto start = std::chrono::steady_clock::now();
  bool left = false;
  const auto advance = [&] {
    pump();
    return left = done();
  };
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (advance()) return;
      for (Rank r = 0; r < nranks_; ++r) {
        if (me_ != 0 && r != 0) continue;  // only rank 0 matters to the others
        // (rank 0 may have released this rank and left before its connection closed)
        if (const std::string why = gone_unless(r, advance); !why.empty()) {
          SPILLWAY_FAIL(prefix_ + "barrier: rank " + std::to_string(r) + " is gone (" + why + ")",
                        comm_error);
        }
        if (left) return;
      }
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > timeout) {
      SPILLWAY_FAIL(prefix_ + "barrier: timed out after " + std::to_string(timeout.count()) +
                        " ms: a rank is dead or stuck",
                    comm_error);
    }
    std::this_thread::sleep_for(waited < 2ms ? 0us : 20us);
  }
}

void TransferCore::send_locked(Rank dst, const std::vector<std::uint8_t>& bytes) {
  transfer::PeerId p = 0;
  {
    std::lock_guard lock(dead_mutex_);
    p = host_.peer_of[static_cast<std::size_t>(dst)];
  }
  host_.engine->send_control(p, bytes);
}

/// Takes every control message that has arrived, in order.
void TransferCore::pump() {
  while (auto m = host_.engine->recv_control(0ms)) {
    Rank from = -1;
    {
      std::lock_guard lock(dead_mutex_);
      if (const auto it = host_.rank_of.find(m->first); it != host_.rank_of.end()) {
        from = it->second;
      }
    }
    if (from < 0) {
      SPILLWAY_LOG(warn, prefix_ << "transfer: a control message from engine peer " << m->first
                                 << ", which is no rank, was dropped");
      continue;
    }
    try {
      handle(from, m->second);
    } catch (const std::exception& e) {
      SPILLWAY_LOG(warn,
                   prefix_ << "transfer: rank " << from << " sent a bad message: " << e.what());
      std::lock_guard lock(dead_mutex_);
      dead_[static_cast<std::size_t>(from)] = std::string("sent a bad message: ") + e.what();
      any_dead_.store(true);
    }
  }
}

void TransferCore::handle(Rank from, std::span<const std::uint8_t> bytes) {
  const TransferWire::Parsed w = TransferWire::parse(bytes, from);
  switch (w.kind) {
    case Kind::message: {
      auto& part = partial_[static_cast<std::size_t>(from)];
      part.insert(part.end(), w.payload.begin(), w.payload.end());
      if (w.last) {
        messages_[w.tag].push_back(Message{from, std::move(part)});
        part = {};
      }
      break;
    }
    case Kind::offer: {
      const auto key = transfer_key(from, w.tag);
      offers_[key].push_back(Offer{w.size, w.imm, w.device,
                                   std::vector<std::uint8_t>(w.payload.begin(), w.payload.end()),
                                   nullptr});
      match(key);
      break;
    }
    case Kind::refuse:
    case Kind::empty: {
      const auto it = recvs_.find(w.imm);
      if (it == recvs_.end()) break;  // cancelled meanwhile
      TransferRecv& r = *it->second;
      if (r.peer != from) {
        SPILLWAY_FAIL("an answer for a receive from rank " + std::to_string(r.peer),
                      corrupt_data_error);
      }
      if (w.kind == Kind::empty && r.bytes == 0) {
        r.state = TransferRecv::State::done;
      } else {
        r.fail(w.kind == Kind::empty ? "rank " + std::to_string(from) + " sent 0 bytes for it"
                                     : "rank " + std::to_string(from) + " refused it: " +
                                           std::string(w.payload.begin(), w.payload.end()));
      }
      release(r.landing);
      recvs_.erase(it);
      break;
    }
    case Kind::withdraw:
      unqueue_offer(transfer_key(from, w.tag), [&](const Offer& o) { return o.imm == w.imm; });
      break;
    case Kind::arrive:
      if (me_ != 0) {
        SPILLWAY_FAIL("a barrier arrival at rank " + std::to_string(me_), corrupt_data_error);
      }
      ++arrivals_[w.generation];
      break;
    case Kind::release:
      released_ = std::max(released_, w.generation);
      break;
  }
}

}  // namespace spillway::detail
