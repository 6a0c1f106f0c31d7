// The batches a lane has on the wire (detail/fabric_batches.hpp).
//
// A batch goes out as fi_writemsg / fi_readmsg calls of up to four chunks each (as many as the
// provider's iov and RMA iov limits allow), posted with FI_MORE while more follow; what the
// provider refuses with -FI_EAGAIN stays queued and is posted again after the completion queue
// is polled. The imm travels as remote CQ data on the batch's last write. Where the provider
// places writes in order (FI_ORDER_WAW; tcp and shm do), the whole batch goes out at once and
// only the last write asks for delivery completion, which vouches for the batch; elsewhere the
// last write is held back until every other write of the batch has completed
// (FI_DELIVERY_COMPLETE where the provider offers it). Either way the target sees the imm only
// when all of the batch's bytes are in place, and the initiator's ticket ends then too.

#include "transfer/detail/fabric_batches.hpp"

#include <spillway/core/error.hpp>

#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <cerrno>

#include <algorithm>
#include <array>

namespace spillway::transfer::detail {

namespace {

/// A message takes more pieces only while it holds fewer bytes than this: larger chunks go
/// one per message, which pipelines better (tcp at 1 MiB: 0.79-1.09 of the contiguous write
/// four to a message, 1.06-1.95 alone; noisy, 2 cores).
constexpr std::size_t kGroupBelow = std::size_t{256} << 10;

bool connection_error(int err) {
  return err == FI_ECONNREFUSED || err == FI_ECONNRESET || err == FI_ECONNABORTED ||
         err == FI_EHOSTUNREACH || err == FI_ENOTCONN || err == FI_EADDRNOTAVAIL ||
         err == FI_ETIMEDOUT || err == FI_EIO || err == EPIPE;
}

/// Whether a failed completion says the peer can no longer be reached. The tcp provider
/// ends the ops of a connection it lost as FI_ECANCELED, with the socket's errno as the
/// provider's errno (ENOTCONN, ECONNRESET, EPIPE); the engine never cancels an op itself.
bool peer_unreachable(const fi_cq_err_entry& err) {
  if (connection_error(err.err)) return true;
  if (err.err != FI_ECANCELED) return false;
  const int e = err.prov_errno < 0 ? -err.prov_errno : err.prov_errno;
  return e == ENOTCONN || e == ECONNRESET || e == EPIPE || e == ECONNABORTED || e == ECONNREFUSED ||
         e == EHOSTUNREACH || e == ETIMEDOUT;
}

/// Ends `op` well once everything of it has been posted and completed.
void maybe_done(Op& op) {
  if (op.next == op.chunks.size() && op.inflight == 0) op.ticket->finish(Status::ok);
}

}  // namespace

FabricBatches::FabricBatches(FabricEndpoint& endpoint,
                             std::function<void(std::uint32_t)> deliver_imm, bool one_peer)
    : e_{endpoint}, deliver_imm_{std::move(deliver_imm)}, one_peer_{one_peer} {}

FabricBatches::Context* FabricBatches::acquire(std::shared_ptr<Op> op) {
  if (free_.empty()) {
    all_.push_back(std::make_unique<Context>());
    free_.push_back(all_.back().get());
  }
  Context* c = free_.back();
  free_.pop_back();
  c->op = std::move(op);
  return c;
}

void FabricBatches::release(Context* c) {
  c->op.reset();
  free_.push_back(c);
}

void FabricBatches::fail_all(const std::string& why) {
  for (auto& c : all_) {
    if (c->op) c->op->ticket->finish(Status::error, why);
  }
  for (auto& op : queue_) op->ticket->finish(Status::error, why);
}

void FabricBatches::add_counters(EngineCounters& c) const {
  c.chunks_posted += chunks_posted_.load(std::memory_order_relaxed);
  c.eagain += eagain_.load(std::memory_order_relaxed);
}

bool FabricBatches::poll_completions() {
  bool did = false;
  fi_cq_data_entry entries[64];
  for (int round = 0; round < 64; ++round) {
    const ssize_t n = fi_cq_read(e_.cq, entries, 64);
    if (n == -FI_EAGAIN) break;
    if (n == -FI_EAVAIL) {
      read_error();
      did = true;
      continue;
    }
    fabric_check(static_cast<int>(n < 0 ? n : 0), "fi_cq_read");
    did = true;
    for (ssize_t i = 0; i < n; ++i) {
      const auto& e = entries[i];
      if ((e.flags & FI_REMOTE_CQ_DATA) && !(e.flags & (FI_WRITE | FI_READ))) {
        deliver_imm_(static_cast<std::uint32_t>(e.data));  // a peer's batch landed
        continue;
      }
      auto* c = static_cast<Context*>(e.op_context);
      if (c == nullptr) continue;
      Op& op = *c->op;
      --op.inflight;
      --per_peer_[addr_of(op)];
      op.completed += c->chunks;
      maybe_done(op);
      release(c);
    }
    if (n < 64) break;
  }
  return did;
}

void FabricBatches::read_error() {
  fi_cq_err_entry err{};
  if (fi_cq_readerr(e_.cq, &err, 0) != 1) return;
  if ((err.flags & FI_REMOTE_CQ_DATA) && !(err.flags & (FI_WRITE | FI_READ))) return;
  auto* c = static_cast<Context*>(err.op_context);
  if (c == nullptr) return;
  Op& op = *c->op;
  --op.inflight;
  --per_peer_[addr_of(op)];
  const char* text = fi_cq_strerror(e_.cq, err.prov_errno, err.err_data, nullptr, 0);
  const std::string why = "libfabric/" + e_.provider + ": a " + (op.is_read ? "read" : "write") +
                          " failed: " + fi_strerror(err.err) + " (" + (text ? text : "") + ")";
  op.ticket->finish(peer_unreachable(err) ? Status::peer_gone : Status::error, why);
  release(c);
}

bool FabricBatches::post_queued() {
  bool did = false;
  for (auto it = queue_.begin(); it != queue_.end();) {
    Op& op = **it;
    if (op.ticket->ended()) {
      if (op.inflight == 0) {
        it = queue_.erase(it);
      } else {
        ++it;
      }
      continue;
    }
    const int r = post_some(*it);
    did = did || r > 0;
    if (r < 0) break;  // the provider's queue is full
    if (op.next == op.chunks.size()) {
      it = queue_.erase(it);  // all posted; completions end it
      continue;
    }
    ++it;
  }
  return did;
}

/// Posts `op`'s next pieces: as many as the transmit queue has room for, the last of them
/// without FI_MORE. @returns the count posted, or -1 when the provider refused one
int FabricBatches::post_some(const std::shared_ptr<Op>& sp) {
  Op& op = *sp;
  int posted = 0;
  // A peer may hold at most a quarter of the transmit queue: a peer that dies with writes
  // outstanding (which a provider such as shm never completes) leaves room for the others.
  const std::uint64_t addr = addr_of(op);
  std::size_t& mine = per_peer_[addr];
  const std::size_t cap = std::max<std::size_t>(1, e_.tx_size / 4);
  const std::size_t total = inflight();
  const std::size_t room =
      std::min(e_.tx_size > total ? e_.tx_size - total : 0, cap > mine ? cap - mine : 0);
  if (room == 0) return 0;
  void* const local_desc = e_.desc_of(op.local.region.id);
  for (std::size_t burst = 0; op.next < op.chunks.size() && burst < room; ++burst) {
    // One message carries up to e_.iov_per_msg pieces (chunks, or parts of chunks over the
    // largest message): the provider's cost is per message, not per byte.
    std::array<iovec, kFabricMaxPieces> iov{};
    std::array<void*, kFabricMaxPieces> desc{};
    std::array<fi_rma_iov, kFabricMaxPieces> rma{};
    std::size_t count = 0;
    std::size_t bytes = 0;
    std::size_t next = op.next;
    std::size_t next_byte = op.next_byte;
    bool last_piece = false;
    while (count < e_.iov_per_msg && next < op.chunks.size() && bytes < kGroupBelow) {
      const Chunk& c = op.chunks[next];
      const std::size_t length = std::min(c.length - next_byte, e_.max_msg);
      if (count > 0 && bytes + length > e_.max_msg) break;
      // A piece the provider can inject goes alone: grouped, it lost that fast path.
      const bool injectable = length <= e_.inject;
      if (count > 0 && injectable) break;
      const bool last = next + 1 == op.chunks.size() && next_byte + length == c.length;
      // Unless writes are placed in order, the imm goes after the rest have completed.
      if (last && op.imm && !(e_.ordered && !op.is_read) && (op.inflight > 0 || count > 0)) break;
      const std::size_t local_at = (op.is_read ? c.dst_offset : c.src_offset) + next_byte;
      const std::size_t remote_at = (op.is_read ? c.src_offset : c.dst_offset) + next_byte;
      iov[count] = {static_cast<std::uint8_t*>(op.local.region.ptr) + local_at, length};
      desc[count] = local_desc;
      rma[count] = {op.remote_key.address + remote_at, length, op.remote_key.key};
      ++count;
      bytes += length;
      last_piece = last;
      next_byte += length;
      if (next_byte == c.length) {
        ++next;
        next_byte = 0;
      }
      if (injectable) break;
    }
    if (count == 0) break;  // the imm's write waits for the others
    const bool more = !last_piece && burst + 1 < room;
    Context* ctx = acquire(sp);
    ctx->chunks = next - op.next;
    fi_msg_rma msg{};
    msg.msg_iov = iov.data();
    msg.desc = desc.data();
    msg.iov_count = count;
    msg.addr = addr;
    msg.rma_iov = rma.data();
    msg.rma_iov_count = count;
    msg.context = &ctx->fi;
    std::uint64_t flags = FI_COMPLETION | (more ? FI_MORE : 0);
    // In order, the last write's delivery vouches for the batch; else each write's does.
    if (!op.is_read && e_.delivery_complete && (last_piece || !e_.ordered)) {
      flags |= FI_DELIVERY_COMPLETE;
    }
    if (last_piece && op.imm) {
      msg.data = *op.imm;
      flags |= FI_REMOTE_CQ_DATA;
    }
    const ssize_t rc =
        op.is_read ? fi_readmsg(e_.ep, &msg, flags) : fi_writemsg(e_.ep, &msg, flags);
    if (rc == -FI_EAGAIN) {
      release(ctx);
      eagain_.fetch_add(1, std::memory_order_relaxed);
      return -1;
    }
    if (rc != 0) {
      release(ctx);
      op.ticket->finish(connection_error(static_cast<int>(-rc)) ? Status::peer_gone : Status::error,
                        "libfabric/" + e_.provider + ": " +
                            (op.is_read ? "fi_readmsg" : "fi_writemsg") +
                            " failed: " + fi_strerror(static_cast<int>(-rc)));
      return posted;
    }
    ++op.inflight;
    ++mine;
    ++posted;
    chunks_posted_.fetch_add(count, std::memory_order_relaxed);
    op.next = next;
    op.next_byte = next_byte;
  }
  return posted;
}

}  // namespace spillway::transfer::detail
