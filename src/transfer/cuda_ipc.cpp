// The cuda_ipc backend: engines of processes on one node move batches on the GPU. A device
// region is exported as a CUDA IPC handle of its allocation and the region's offset in it.
//
// Which side carries a batch out:
// - the remote side is device memory: the initiator maps it and copies (one-sided); a write's
//   imm follows on the control channel once the copy has completed;
// - the remote side is a SharedHostMemory (a memfd the initiator can map): the initiator maps
//   it, page-locks it and copies from its own device memory, one-sided as above;
// - only the local side is device memory (the remote is other host memory, which CUDA IPC
//   cannot map): the initiator sends a copy request and the target maps the initiator's memory
//   and copies, counts the imm and answers. The target checks every chunk against its own
//   registration first, so nothing outside a region is ever written;
// - neither: an error (host to host between processes is libfabric shm's).
// Copies go on one stream of the engine's GPU in order; an event per batch says when it is done.

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>

#include <spillway/transfer/gpu_copies.hpp>
#include "core/detail/byte_codec.hpp"
#include "transfer/detail/backend.hpp"
#include "transfer/detail/ipc_export.hpp"
#include "transfer/detail/ipc_inflight.hpp"
#include "transfer/detail/ipc_peer.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>

namespace spillway::transfer::detail {

namespace {

using spillway::detail::ByteReader;
using spillway::detail::ByteWriter;

enum Kind : std::uint8_t { kRequest = 1, kDone = 2, kImm = 3 };
/// Chunks per request: 24 bytes each keeps a frame well under the control channel's 1 MiB.
constexpr std::size_t kChunksPerRequest = 32768;
/// A batch goes out in parts of this many chunks, so that the GPU copies one part while the
/// CPU prepares (or the target parses) the next.
constexpr std::size_t kChunksPerPart = 2048;

double micros_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count();
}

class CudaIpcBackend final : public Backend {
 public:
  CudaIpcBackend(BackendHost& host, const EngineOptions& options)
      : host_{host},
        method_{parse_copy_method(options.ipc_copy)},
        node_{this_node()},
        pid_{static_cast<std::uint32_t>(::getpid())} {
    SPILLWAY_EXPECTS(cuda::is_available(),
                     "transfer: the cuda_ipc backend needs a GPU, and none is usable here",
                     cuda_error);
    device_ = options.device >= 0 ? options.device : cuda::current_device();
    cuda::set_device(device_);
    stream_ = Stream{cuda::stream_create()};
    side_ = {Stream{cuda::stream_create()}, cuda::event_create(), cuda::event_create(),
             options.ipc_kernel_share};
  }

  ~CudaIpcBackend() override {
    try {
      cuda::set_device(device_);
      cuda::stream_synchronize(stream_);
    } catch (...) {  // a GPU that failed: release what can be released
    }
    inflight_.clear();
    free_slots_.clear();
    peers_.clear();
    cuda::stream_destroy(stream_.handle());
    cuda::stream_destroy(side_.stream.handle());
    cuda::event_destroy(side_.fork);
    cuda::event_destroy(side_.join);
  }

  [[nodiscard]] std::string name() const override { return "cuda_ipc"; }

  [[nodiscard]] std::vector<std::uint8_t> address() const override {
    ByteWriter w;
    w.put(static_cast<std::uint32_t>(node_.size()));
    w.put_bytes(std::span(reinterpret_cast<const std::uint8_t*>(node_.data()), node_.size()));
    w.put(pid_);
    return w.take();
  }
  [[nodiscard]] bool carries(MemoryType local, MemoryType remote) const override {
    return local == MemoryType::DEVICE || remote == MemoryType::DEVICE;  // host to host: shm
  }

  void register_region(RegionRecord& record) override {
    cuda::set_device(device_);
    if (record.region.type == MemoryType::DEVICE) {
      const auto alloc = cuda::allocation_of(record.region.ptr);
      Exported e;
      e.base = reinterpret_cast<std::uintptr_t>(alloc.base);
      e.offset = reinterpret_cast<std::uintptr_t>(record.region.ptr) - e.base;
      SPILLWAY_EXPECTS(e.offset + record.region.bytes <= alloc.bytes,
                       "transfer: register_memory of " + std::to_string(record.region.bytes) +
                           " device bytes that run past their allocation",
                       logic_error);
      // Memory of a stream-ordered pool has no handle: it still serves as this engine's side
      // of a copy it makes, but no peer can map it (mapped() says so).
      e.handle = cuda::ipc_handle_if_shareable(alloc.base).value_or(cuda::IpcHandle{});
      record.address = e.offset;
      record.blob = to_blob(e);
      record.handle = record.region.ptr;
    } else {
      record.handle = cuda::host_device_pointer(record.region.ptr);  // null: pageable
      if (const auto f = shared_file_of(record.region.ptr, record.region.bytes)) {
        record.address = f->offset;
        record.blob = to_blob(SharedExport{static_cast<std::uint64_t>(f->fd), f->inode, f->bytes,
                                           f->base, f->offset, record.region.bytes});
      }
    }
    regions_[record.region.id] = record;
  }

  void deregister_region(RegionRecord& record) noexcept override {
    drain();  // no copy of a peer's still uses it
    regions_.erase(record.region.id);
  }

  std::uint64_t add_peer(std::span<const std::uint8_t> address) override {
    ByteReader r(address, "cuda_ipc peer address: ");
    const auto n = r.get<std::uint32_t>("node length");
    if (n > 4096) r.fail("a node name of " + std::to_string(n) + " bytes");
    const std::string node = r.get_string(n, "node");
    const auto pid = r.get<std::uint32_t>("pid");
    SPILLWAY_EXPECTS(node == node_,
                     "transfer: the cuda_ipc peer is on node '" + node + "', this engine on '" +
                         node_ + "' (cuda_ipc works within one node; use libfabric across)",
                     comm_error);
    const std::uint64_t id = next_peer_++;
    peers_.try_emplace(id, pid, pid_);
    return id;
  }

  void remove_peer(std::uint64_t backend_peer) noexcept override {
    const auto it = peers_.find(backend_peer);
    if (it == peers_.end()) return;
    drain();  // no copy still uses its mappings
    peers_.erase(it);
    std::erase_if(awaiting_,
                  [&](const auto& a) { return a.second.op->backend_peer == backend_peer; });
  }

  void post(std::shared_ptr<Op> op) override {
    began_ = std::chrono::steady_clock::now();
    cuda::set_device(device_);
    const bool local_device = op->local.region.type == MemoryType::DEVICE;
    if (op->remote.type == MemoryType::DEVICE) {
      const Exported e = from_blob(op->remote_key.blob, "the remote region");
      std::uint8_t* remote = peers_.at(op->backend_peer).device_memory(e) + op->remote_key.address;
      copy_here(std::move(op), remote);
    } else if (local_device) {
      std::uint8_t* remote = nullptr;
      try {
        if (!op->remote_key.blob.empty()) {
          remote = peers_.at(op->backend_peer)
                       .shared_memory(shared_from_blob(op->remote_key.blob), op->remote_key.address,
                                      op->remote.length);
        }
      } catch (const std::exception& e) {  // a forged or corrupt range: nothing is written
        op->ticket->finish(Status::error, e.what());
        return;
      }
      if (remote != nullptr) {
        copy_here(std::move(op), remote);
      } else {
        ask_target(std::move(op));
      }
    } else {
      op->ticket->finish(Status::error,
                         "cuda_ipc moves GPU memory, and neither side of this batch is device "
                         "memory (between host regions of two processes use libfabric shm)");
    }
  }

  void on_message(std::uint64_t backend_peer, std::span<const std::uint8_t> body) override {
    ByteReader r(body, "cuda_ipc message: ");
    const auto kind = r.get<std::uint8_t>("kind");
    if (kind == kRequest) {
      serve(backend_peer, r);
    } else if (kind == kDone) {
      answered(r);
    } else if (kind == kImm) {
      host_.deliver_imm(r.get<std::uint32_t>("imm"));
    } else {
      r.fail("unknown kind " + std::to_string(kind));
    }
  }

  bool progress() override {
    if (inflight_.empty()) return false;
    cuda::set_device(device_);
    bool did = false;
    while (!inflight_.empty() && cuda::event_query(inflight_.front().slot->event)) {
      InFlight f = std::move(inflight_.front());
      inflight_.pop_front();
      if (f.slot->timed) {
        const double took = micros_since(f.slot->began);
        SPILLWAY_LOG(trace, "cuda_ipc: a batch took "
                                << took << " us (posted " << f.slot->posted_us
                                << " us after its submission), " << f.slot->prepared_us
                                << " us of it to queue, "
                                << 1e3 * cuda::event_elapsed_ms(f.slot->start, f.slot->event)
                                << " us on the GPU");
      }
      free_slots_.push_back(std::move(f.slot));
      did = true;
      if (f.op) {
        if (f.last) finish_here(*f.op);
      } else {
        if (f.imm) host_.deliver_imm(*f.imm);
        reply(f.reply_to, f.seq, {});
      }
    }
    return did;
  }

  bool may_sleep() override { return inflight_.empty() && awaiting_.empty(); }

  [[nodiscard]] EngineCounters counters() const override { return counters_; }

 private:
  /// Waits for every copy on the stream; the next progress() ends them.
  void drain() noexcept {
    if (inflight_.empty()) return;
    try {
      cuda::set_device(device_);
      cuda::stream_synchronize(stream_);
    } catch (...) {  // the copies failed: event_query reports it
    }
  }

  /// Where a kernel reaches a local region (null for pageable host memory).
  static std::uint8_t* reachable(const RegionRecord& r) {
    return static_cast<std::uint8_t*>(r.handle);
  }

  std::unique_ptr<Slot> take_slot() {
    if (free_slots_.empty()) return std::make_unique<Slot>();
    auto slot = std::move(free_slots_.back());
    free_slots_.pop_back();
    return slot;
  }

  /// Queues `pieces` (in `f.slot`'s scratch) and the event after them.
  void enqueue(InFlight f, std::span<const Piece> pieces, CopyMethod wanted, bool kernel_ok,
               bool over_pcie) {
    std::size_t bytes = 0;
    for (const Piece& p : pieces) bytes += p.bytes;
    f.slot->began = began_;
    f.slot->timed = spillway::detail::log_enabled(LogLevel::trace);
    if (f.slot->timed) {
      f.slot->posted_us =
          f.op ? std::chrono::duration<double, std::micro>(began_ - f.op->submitted).count() : 0;
      cuda::event_record(f.slot->start, stream_);
    }
    copy_pieces(pieces, choose(wanted, bytes / pieces.size(), kernel_ok, over_pcie), stream_,
                f.slot->scratch, &side_);
    f.slot->prepared_us = micros_since(began_);
    cuda::event_record(f.slot->event, stream_);
    counters_.chunks_posted += pieces.size();
    inflight_.push_back(std::move(f));
  }

  /// The remote side is mapped here (`remote`: its range's first byte, as the GPU reaches it):
  /// copy here.
  void copy_here(std::shared_ptr<Op> op, std::uint8_t* remote) {
    std::uint8_t* local_reach = reachable(op->local);
    auto* local =
        local_reach != nullptr ? local_reach : static_cast<std::uint8_t*>(op->local.region.ptr);
    const std::size_t n = op->chunks.size();
    for (std::size_t from = 0; from < n; from += kChunksPerPart) {
      const std::size_t count = std::min(kChunksPerPart, n - from);
      InFlight f;
      f.op = op;
      f.last = from + count == n;
      f.slot = take_slot();
      const auto pieces = f.slot->scratch.pieces(count);
      for (std::size_t i = 0; i < pieces.size(); ++i) {
        const Chunk& c = op->chunks[from + i];
        pieces[i] = op->is_read ? Piece{local + c.dst_offset, remote + c.src_offset, c.length}
                                : Piece{remote + c.dst_offset, local + c.src_offset, c.length};
      }
      enqueue(std::move(f), pieces, method_, local_reach != nullptr,
              op->local.region.type != MemoryType::DEVICE || op->remote.type != MemoryType::DEVICE);
    }
  }

  /// This engine's batch `op` is in place: send its imm, end its ticket.
  void finish_here(Op& op) {
    const auto done = std::chrono::steady_clock::now();
    const auto ok = [&] {
      op.completed = op.chunks.size();
      op.ticket->finish(Status::ok);
    };
    if (op.imm && !op.is_read) {
      // The ticket ends as soon as the imm's frame is sure to go before anything else sent to
      // the target (the send, ~20 us on a loopback connection, is then off the waiter's path).
      // A send that fails after that means a peer that is gone, which the heartbeats find.
      ByteWriter w;
      w.put(static_cast<std::uint8_t>(kImm));
      w.put(*op.imm);
      if (!host_.send_to_peer(op.backend_peer, w.take(), ok) && !op.ticket->ended()) {
        op.ticket->finish(Status::peer_gone, "cuda_ipc: the target did not take the batch's imm");
        return;
      }
    } else {
      ok();
    }
    if (spillway::detail::log_enabled(LogLevel::trace)) {
      SPILLWAY_LOG(trace, "cuda_ipc: a batch of " << op.chunks.size() << " chunks was done "
                                                  << micros_since(op.submitted) << " us after its "
                                                  << "submission (" << micros_since(done)
                                                  << " us after its copies, its imm sent)");
    }
  }

  /// The remote side is host memory: the target carries the batch out, in requests of at most
  /// kChunksPerPart chunks; only the last carries the imm (the target's copies are in order).
  void ask_target(std::shared_ptr<Op> op) {
    const std::size_t n = op->chunks.size();
    const std::size_t parts = (n + kChunksPerPart - 1) / kChunksPerPart;
    awaiting_[next_seq_] = {op, parts};
    for (std::size_t part = 0; part < parts; ++part) {
      const std::size_t from = part * kChunksPerPart;
      const std::size_t count = std::min(kChunksPerPart, n - from);
      const bool last = part + 1 == parts;
      ByteWriter w(std::move(request_));  // a large request's buffer is kept for the next
      w.reserve(64 + kBlob + count * sizeof(Chunk));
      w.put(static_cast<std::uint8_t>(kRequest));
      w.put(next_seq_);
      w.put(static_cast<std::uint8_t>(op->is_read));
      w.put(static_cast<std::uint8_t>(method_));
      w.put(static_cast<std::uint8_t>(last && op->imm.has_value()));
      w.put(op->imm.value_or(0));
      w.put(op->remote.region_id);
      w.put(op->remote.offset);
      w.put(op->remote.length);
      w.put_bytes(op->local.blob);  // the initiator's region, as register_region made it
      w.put(static_cast<std::uint32_t>(count));
      static_assert(sizeof(Chunk) == 3 * sizeof(std::uint64_t));  // no padding on the wire
      w.put_bytes(std::span(reinterpret_cast<const std::uint8_t*>(op->chunks.data() + from),
                            count * sizeof(Chunk)));
      request_ = w.take();
      if (!host_.send_to_peer(op->backend_peer, request_)) {
        awaiting_.erase(next_seq_);
        op->ticket->finish(Status::peer_gone, "cuda_ipc: the target did not take the request");
        ++next_seq_;
        return;
      }
    }
    ++next_seq_;
    counters_.chunks_posted += n;
  }

  /// A peer's request: check it against the region, then copy.
  void serve(std::uint64_t from, ByteReader& r) {
    began_ = std::chrono::steady_clock::now();
    const auto seq = r.get<std::uint64_t>("seq");
    const bool is_read = r.get<std::uint8_t>("is_read") != 0;
    const auto method = r.get<std::uint8_t>("method");
    if (method > static_cast<std::uint8_t>(CopyMethod::mixed)) {
      r.fail("unknown copy method " + std::to_string(method));
    }
    const bool has_imm = r.get<std::uint8_t>("has_imm") != 0;
    const auto imm = r.get<std::uint32_t>("imm");
    const auto region_id = r.get<std::uint64_t>("region");
    const auto offset = r.get<std::uint64_t>("offset");
    const auto length = r.get<std::uint64_t>("length");
    const Exported theirs = from_blob(r.bytes(kBlob, "initiator's region"), "the request");
    const auto n = r.get<std::uint32_t>("chunks");
    if (n == 0 || n > kChunksPerRequest) r.fail(std::to_string(n) + " chunks");
    const auto it = regions_.find(region_id);
    if (it == regions_.end()) {
      reply(from, seq,
            "cuda_ipc: the target region " + std::to_string(region_id) +
                " is not registered (any more)");
      return;
    }
    const RegionRecord& region = it->second;
    if (offset > region.region.bytes || length > region.region.bytes - offset) {
      reply(from, seq,
            "cuda_ipc: the range of " + std::to_string(length) + " bytes at " +
                std::to_string(offset) + " is outside the target's region of " +
                std::to_string(region.region.bytes));
      return;
    }
    cuda::set_device(device_);
    std::uint8_t* reach = reachable(region);
    std::uint8_t* mine =
        (reach != nullptr ? reach : static_cast<std::uint8_t*>(region.region.ptr)) + offset;
    std::uint8_t* other = nullptr;
    try {
      other = peers_.at(from).device_memory(theirs) + theirs.offset;
    } catch (const std::exception& e) {  // the initiator's memory: its error, not a bad frame
      reply(from, seq,
            std::string("cuda_ipc: the target cannot map the initiator's memory: ") + e.what());
      return;
    }
    InFlight f;
    f.reply_to = from;
    f.seq = seq;
    if (has_imm) f.imm = imm;
    f.slot = take_slot();
    // Each chunk is checked as it is read; none is copied unless all are inside the range.
    const auto pieces = f.slot->scratch.pieces(n);
    const auto wire = r.bytes(std::size_t{n} * sizeof(Chunk), "chunks");
    for (std::size_t i = 0; i < n; ++i) {
      Chunk c{};  // as ask_target wrote it
      std::memcpy(&c, wire.data() + i * sizeof(Chunk), sizeof(Chunk));
      const auto [src_offset, dst_offset, bytes] = c;
      Piece& p = pieces[i];
      const std::uint64_t at = is_read ? src_offset : dst_offset;
      if (bytes == 0 || at > length || bytes > length - at) {
        free_slots_.push_back(std::move(f.slot));
        reply(from, seq,
              "cuda_ipc: a chunk of " + std::to_string(bytes) + " bytes at " + std::to_string(at) +
                  " is outside the range of " + std::to_string(length) +
                  " bytes (nothing was copied)");
        return;
      }
      p = is_read ? Piece{other + dst_offset, mine + src_offset, bytes}
                  : Piece{mine + dst_offset, other + src_offset, bytes};
    }
    try {
      enqueue(std::move(f), pieces, static_cast<CopyMethod>(method), reach != nullptr,
              region.region.type != MemoryType::DEVICE);
    } catch (const std::exception& e) {
      reply(from, seq, std::string("cuda_ipc: the target's copy failed: ") + e.what());
    }
  }

  void reply(std::uint64_t to, std::uint64_t seq, const std::string& error) {
    ByteWriter w;
    w.put(static_cast<std::uint8_t>(kDone));
    w.put(seq);
    w.put(static_cast<std::uint32_t>(error.size()));
    w.put_bytes(std::span(reinterpret_cast<const std::uint8_t*>(error.data()), error.size()));
    (void)host_.send_to_peer(to, w.take());  // a peer that is gone no longer waits
  }

  void answered(ByteReader& r) {
    const auto seq = r.get<std::uint64_t>("seq");
    const auto n = r.get<std::uint32_t>("error length");
    if (n > 65536) r.fail("an error of " + std::to_string(n) + " bytes");
    const std::string error = r.get_string(n, "error");
    const auto it = awaiting_.find(seq);
    if (it == awaiting_.end()) return;  // ended already (timed out, its peer removed)
    Op& op = *it->second.op;
    if (!error.empty()) {
      op.ticket->finish(Status::error, error);
      awaiting_.erase(it);
    } else if (--it->second.parts == 0) {
      op.completed = op.chunks.size();
      op.ticket->finish(Status::ok);
      awaiting_.erase(it);
    }
  }

  BackendHost& host_;
  CopyMethod method_;
  std::string node_;
  std::uint32_t pid_;
  int device_{0};
  Stream stream_;
  SideStream side_;  // for mixed copies
  std::map<std::uint64_t, IpcPeer> peers_;
  std::uint64_t next_peer_{1};
  std::map<std::uint64_t, RegionRecord> regions_;
  std::deque<InFlight> inflight_;
  std::vector<std::unique_ptr<Slot>> free_slots_;
  std::map<std::uint64_t, Awaiting> awaiting_;
  std::uint64_t next_seq_{1};
  std::chrono::steady_clock::time_point began_;  // of the post or request in hand
  std::vector<std::uint8_t> request_;
  EngineCounters counters_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_ipc_backend(BackendHost& host, const EngineOptions& options) {
  return std::make_unique<CudaIpcBackend>(host, options);
}

}  // namespace spillway::transfer::detail
