#include <spillway/shuffle/shuffler.hpp>

#include <spillway/comm/progress_thread.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/memory/spillable_store.hpp>

#include "wire.hpp"

#include <array>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>

namespace spillway {

namespace {
constexpr std::uint8_t stage_chunk = 0;
constexpr std::uint8_t stage_payload = 1;
constexpr std::uint8_t stage_finish = 2;
}  // namespace

struct Shuffler::Impl {
  Impl(Communicator& c, OpID o, PartID t, BufferResource& b, PartitionOwner own)
      : comm{c},
        op{o},
        total{t},
        br{b},
        owner_of(t),
        me{c.rank()},
        n{c.nranks()},
        outgoing_store{b},
        incoming_store{b},
        sent(static_cast<std::size_t>(c.nranks())) {
    for (PartID pid = 0; pid < total; ++pid) {
      const Rank r = own(pid, n);
      SPILLWAY_EXPECTS(r >= 0 && r < n, "the partition owner gave rank " + std::to_string(r) +
                                            " for partition " + std::to_string(pid));
      owner_of[pid] = r;
      if (r == me) local.push_back(pid);
    }
  }

  [[nodiscard]] Tag tag(std::uint8_t stage) const { return Tag{op, stage}; }

  /// Under `mutex`.
  [[nodiscard]] bool complete(PartID pid) const {
    if (finishes != n) return false;
    const auto e = expected.find(pid);
    const auto r = received.find(pid);
    return (e == expected.end() ? 0 : e->second) == (r == received.end() ? 0 : r->second);
  }

  /// Under `mutex`: "; partition 3: 2 of 4 chunks, ..." for the incomplete local partitions.
  [[nodiscard]] std::string missing() const {
    std::string out;
    for (PartID pid : local) {
      if (complete(pid) || out.size() > 200) continue;
      const auto e = expected.find(pid);
      const auto r = received.find(pid);
      out += "; partition " + std::to_string(pid) + ": " +
             std::to_string(r == received.end() ? 0 : r->second) + " of " +
             std::to_string(e == expected.end() ? 0 : e->second) + " chunks";
    }
    return out;
  }

  ProgressThread::Progress progress();
  void send_ready();
  void post_receives();
  void read_finishes();
  void complete_transfers();

  Communicator& comm;
  const OpID op;
  const PartID total;
  BufferResource& br;
  std::vector<Rank> owner_of;
  const Rank me;
  const int n;
  std::vector<PartID> local;
  SpillableStore outgoing_store;
  SpillableStore incoming_store;

  struct Outgoing {
    Rank dst;
    PartID pid;
    std::vector<std::uint8_t> metadata;
    SpillableStore::Key key;
    std::size_t bytes;
  };
  struct Incoming {
    std::vector<std::uint8_t> metadata;
    SpillableStore::Key key;
  };
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Outgoing> outgoing;
  std::map<PartID, std::vector<Incoming>> incoming;
  std::map<PartID, std::uint64_t> received;  // chunks arrived, per local partition
  std::map<PartID, std::uint64_t> expected;  // chunks sent to us, summed over finish messages
  int finishes{0};                           // finish messages seen (our own included)
  std::vector<std::map<PartID, std::uint64_t>> sent;  // per destination rank
  std::set<PartID> handed_out;
  std::set<PartID> extracted;
  bool joined{false};  // insert() or insert_finished() was called: receives may be posted
  bool inserts_done{false};
  bool progress_done{false};  // every chunk sent and every local partition complete
  std::exception_ptr error;

  // Used by the progress thread only.
  std::vector<std::unique_ptr<Future>> sends;
  std::size_t send_bytes{0};  // payload bytes of `sends`
  /// A send holds its buffer, unspillable, until the peer has taken it: at most this many
  /// bytes are in flight (always at least one chunk), a quarter of the smallest limit of a
  /// memory tier; the other chunks wait, spillable, in outgoing_store.
  std::size_t send_budget{send_budget_of(br)};
  struct Receive {
    std::unique_ptr<Future> future;
    PartID pid;
    std::vector<std::uint8_t> metadata;
  };
  std::vector<Receive> receives;
  /// Chunk headers whose payload could not be given memory yet (every tier full of data that
  /// cannot spill, such as transfers in flight); retried, in arrival order, on every round.
  struct Deferred {
    Rank source;
    detail::ChunkHeader header;
  };
  std::deque<Deferred> deferred;
  std::optional<std::chrono::steady_clock::time_point> deferred_since;  // memory short since

  static std::size_t send_budget_of(const BufferResource& b) {
    std::size_t budget = unlimited_bytes;
    for (MemoryType t : {MemoryType::DEVICE, MemoryType::PINNED_HOST, MemoryType::HOST}) {
      if (b.is_live(t) && b.limit(t) != unlimited_bytes) budget = std::min(budget, b.limit(t) / 4);
    }
    return budget;
  }
  ProgressThread::FunctionID function{0};
  double loop_seconds{0};  // the progress function's time and calls (event-loop-total)
  std::size_t loop_calls{0};
};

void Shuffler::Impl::send_ready() {
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
  }
}

void Shuffler::Impl::post_receives() {
  static constexpr std::array<MemoryType, 3> order{MemoryType::DEVICE, MemoryType::PINNED_HOST,
                                                   MemoryType::HOST};
  while (auto msg = comm.recv_any(tag(stage_chunk))) {
    auto h = detail::decode_chunk(msg->data, total);
    if (owner_of[h.pid] != me) {
      throw corrupt_data_error("spillway: rank " + std::to_string(msg->source) +
                               " sent a chunk of partition " + std::to_string(h.pid) +
                               ", which rank " + std::to_string(owner_of[h.pid]) + " owns");
    }
    deferred.push_back({msg->source, std::move(h)});
  }
  {
    std::lock_guard lock(mutex);
    if (!joined) return;  // the input this rank is still making has its memory first
  }
  // In arrival order, so that each peer's payloads are received in the order it sent them.
  while (!deferred.empty()) {
    detail::ChunkHeader& h = deferred.front().header;
    std::optional<MemoryReservation> res;
    try {
      res.emplace(br.reserve_first_fit(order, h.payload_bytes));
    } catch (const out_of_memory&) {
      // Transfers in flight, extractions and spilling free memory soon; a receive that finds
      // none for the communicator's timeout fails the shuffle with the reason.
      const auto now = std::chrono::steady_clock::now();
      if (!deferred_since) deferred_since = now;
      if (now - *deferred_since > comm.timeout()) throw;
      return;
    }
    deferred_since.reset();
    auto buf = br.allocate(*res, h.payload_bytes, br.stream());
    if (buf->mem_type() != MemoryType::DEVICE && br.is_live(MemoryType::DEVICE)) {
      br.statistics().add_bytes("recv-into-host-memory", static_cast<double>(h.payload_bytes));
    }
    receives.push_back({comm.recv(deferred.front().source, tag(stage_payload), std::move(buf)),
                        h.pid, std::move(h.metadata)});
    deferred.pop_front();
  }
}

void Shuffler::Impl::read_finishes() {
  while (auto msg = comm.recv_any(tag(stage_finish))) {
    const auto counts = detail::decode_finish(msg->data, total);
    std::lock_guard lock(mutex);
    for (const auto& [pid, c] : counts) {
      if (owner_of[pid] != me) {
        throw corrupt_data_error("spillway: rank " + std::to_string(msg->source) +
                                 " counted chunks of partition " + std::to_string(pid) +
                                 ", which this rank does not own");
      }
      expected[pid] += c;
    }
    ++finishes;
    cv.notify_all();
  }
}

void Shuffler::Impl::complete_transfers() {
  std::erase_if(sends, [&](const std::unique_ptr<Future>& f) {
    if (!comm.test(*f)) return false;
    send_bytes -= f->request().bytes;
    return true;
  });
  for (auto it = receives.begin(); it != receives.end();) {
    if (!comm.test(*it->future)) {
      ++it;
      continue;
    }
    auto buf = comm.release(std::move(it->future));
    br.statistics().add_bytes("shuffle-payload-recv", static_cast<double>(buf->size()));
    const auto key = incoming_store.insert(std::move(buf));
    {
      std::lock_guard lock(mutex);
      incoming[it->pid].push_back({std::move(it->metadata), key});
      ++received[it->pid];
    }
    cv.notify_all();
    it = receives.erase(it);
  }
}

ProgressThread::Progress Shuffler::Impl::progress() {
  struct Timed {  // event-loop-total, summed here, recorded once by ~Shuffler
    Impl& s;
    std::chrono::steady_clock::time_point t0{std::chrono::steady_clock::now()};
    ~Timed() {
      s.loop_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++s.loop_calls;
    }
  } timed{*this};
  try {
    // The progress thread may serve ranks on other GPUs: work on this rank's.
    if (br.device() >= 0 && cuda::current_device() != br.device()) cuda::set_device(br.device());
    send_ready();
    post_receives();
    read_finishes();
    complete_transfers();
    std::lock_guard lock(mutex);
    if (!inserts_done || !outgoing.empty() || !sends.empty() || !receives.empty() ||
        !deferred.empty() || finishes != n) {
      return ProgressThread::Progress::in_progress;
    }
    for (PartID pid : local) {
      if (!complete(pid)) return ProgressThread::Progress::in_progress;
    }
    progress_done = true;
    cv.notify_all();
    return ProgressThread::Progress::done;
  } catch (...) {
    std::lock_guard lock(mutex);
    error = std::current_exception();
    cv.notify_all();
    return ProgressThread::Progress::done;
  }
}

Shuffler::Shuffler(Communicator& comm, OpID op_id, PartID total_partitions, BufferResource& br,
                   PartitionOwner owner) {
  SPILLWAY_EXPECTS(total_partitions > 0, "a shuffle needs at least one partition");
  impl_ = std::make_shared<Impl>(comm, op_id, total_partitions, br, std::move(owner));
  Impl* impl = impl_.get();
  impl_->function = comm.progress_thread().add_function([impl] { return impl->progress(); });
}

Shuffler::~Shuffler() {
  {
    // A rank may have all its own partitions before its chunks have reached the others: let
    // the sends finish (within the timeout) unless the shuffle was abandoned or failed.
    std::unique_lock lock(impl_->mutex);
    if (impl_->inserts_done) {
      impl_->cv.wait_for(lock, impl_->comm.timeout(),
                         [&] { return impl_->progress_done || impl_->error != nullptr; });
    }
  }
  try {
    impl_->comm.progress_thread().remove_function(impl_->function);
  } catch (...) {  // the error was already handed to wait_any, or nobody asked
  }
  impl_->br.statistics().add("event-loop-total", 0, impl_->loop_seconds, impl_->loop_calls);
}

void Shuffler::insert(std::unordered_map<PartID, PackedData>&& chunks) {
  Impl& s = *impl_;
  for (auto& [pid, data] : chunks) {
    SPILLWAY_EXPECTS(pid < s.total,
                     "insert: partition " + std::to_string(pid) + " of " + std::to_string(s.total));
    SPILLWAY_EXPECTS(data.payload != nullptr, "insert: a chunk without a payload");
  }
  std::lock_guard lock(s.mutex);
  SPILLWAY_EXPECTS(!s.inserts_done, "insert after insert_finished()");
  s.joined = true;
  for (auto& [pid, data] : chunks) {
    const Rank dst = s.owner_of[pid];
    ++s.sent[static_cast<std::size_t>(dst)][pid];
    if (dst == s.me) {  // stays here
      const auto key = s.incoming_store.insert(std::move(data.payload));
      s.incoming[pid].push_back({std::move(data.metadata), key});
      ++s.received[pid];
    } else {
      const std::size_t bytes = data.payload->size();
      const auto key = s.outgoing_store.insert(std::move(data.payload));
      s.outgoing.push_back({dst, pid, std::move(data.metadata), key, bytes});
    }
  }
  chunks.clear();
  s.cv.notify_all();
}

void Shuffler::insert_finished() {
  Impl& s = *impl_;
  std::vector<detail::FinishCounts> counts(static_cast<std::size_t>(s.n));
  {
    std::lock_guard lock(s.mutex);
    SPILLWAY_EXPECTS(!s.inserts_done, "insert_finished() called twice");
    s.inserts_done = true;
    s.joined = true;
    for (PartID pid = 0; pid < s.total; ++pid) {
      const auto r = static_cast<std::size_t>(s.owner_of[pid]);
      const auto it = s.sent[r].find(pid);
      counts[r].emplace_back(pid, it == s.sent[r].end() ? 0 : it->second);
    }
    for (const auto& [pid, c] : counts[static_cast<std::size_t>(s.me)]) s.expected[pid] += c;
    ++s.finishes;
    s.cv.notify_all();
  }
  for (Rank r = 0; r < s.n; ++r) {
    if (r != s.me) {
      s.comm.send_message(detail::encode_finish(counts[static_cast<std::size_t>(r)]), r,
                          s.tag(stage_finish));
    }
  }
}

PartID Shuffler::wait_any(std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  std::unique_lock lock(s.mutex);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (s.error) std::rethrow_exception(s.error);
    SPILLWAY_EXPECTS(s.handed_out.size() < s.local.size(),
                     "wait_any: every local partition was returned already");
    for (PartID pid : s.local) {
      if (s.handed_out.count(pid) == 0 && s.complete(pid)) {
        s.handed_out.insert(pid);
        return pid;
      }
    }
    if (s.cv.wait_until(lock, deadline) == std::cv_status::timeout) {
      throw comm_error(s.comm.logger().prefix() + "shuffle op " + std::to_string(s.op) +
                       ": no partition completed within " + std::to_string(timeout.count()) +
                       " ms (" + std::to_string(s.finishes) + " of " + std::to_string(s.n) +
                       " ranks finished inserting; " + std::to_string(s.outgoing.size()) +
                       " chunks still to send)" + s.missing());
    }
  }
}

std::vector<PackedData> Shuffler::extract(PartID pid) {
  Impl& s = *impl_;
  std::vector<Impl::Incoming> parts;
  {
    std::lock_guard lock(s.mutex);
    SPILLWAY_EXPECTS(pid < s.total && s.owner_of[pid] == s.me,
                     "extract: partition " + std::to_string(pid) + " is not local");
    SPILLWAY_EXPECTS(s.extracted.count(pid) == 0,
                     "extract: partition " + std::to_string(pid) + " was extracted already");
    SPILLWAY_EXPECTS(s.complete(pid),
                     "extract: partition " + std::to_string(pid) + " is not complete yet");
    s.extracted.insert(pid);
    s.handed_out.insert(pid);
    if (auto it = s.incoming.find(pid); it != s.incoming.end()) {
      parts = std::move(it->second);
      s.incoming.erase(it);
    }
  }
  std::vector<PackedData> out;
  for (auto& p : parts) {
    out.push_back(PackedData{std::move(p.metadata), s.incoming_store.extract(p.key)});
  }
  return out;
}

const std::vector<PartID>& Shuffler::local_partitions() const noexcept {
  return impl_->local;
}

bool Shuffler::finished() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->extracted.size() == impl_->local.size();
}

}  // namespace spillway
