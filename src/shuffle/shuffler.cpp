#include <spillway/shuffle/shuffler.hpp>

#include <spillway/comm/progress_thread.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/memory/memory_step.hpp>
#include <spillway/memory/spillable_store.hpp>
#include <spillway/stats/memory_profiler.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/partition.hpp>

#include "../table/pack_format.hpp"
#include "wire.hpp"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstring>
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
constexpr std::uint8_t stage_direct = 3;  // the columns of direct chunks (3 + column group)
/// Column groups insert_finished places a table to hash in (see there): more start the first
/// sends sooner, but each repeats the place pass's per-row work and the last ones finish
/// every partition at about the same time. 20 GiB of 10 int32 columns per rank on 2 x H200
/// (bench/NOTES.md): 3/4/5/10 groups gave 515/531/550/486 GiB/s (-C local), 5 and 10 gave
/// 454 and 363 (-C mpi); 406 and 389 packing all partitions first.
constexpr std::size_t place_groups = 5;

/// Whether a chunk of this layout can go straight into its owner's final buffer: every
/// column's rows are one run of bytes there (no mask bits or string offsets to shift).
bool direct_ok(const detail::PackLayout& l) {
  return std::all_of(l.columns.begin(), l.columns.end(), [](const detail::ColumnLayout& c) {
    return is_fixed_width(c.type) && !c.nullable;
  });
}

/// The group of column `c` of `columns` when a sender sends its direct chunks' columns in
/// `groups` groups: each group's pieces carry the tag stage stage_direct + group, so that a
/// group placed early need not wait behind one placed later (insert_finished of a table to
/// hash), whatever order the owner posts its receives in.
std::uint8_t group_of(std::size_t c, std::size_t columns, std::uint32_t groups) {
  return static_cast<std::uint8_t>(c * groups / columns);
}

bool same_schema(const detail::PackLayout& a, const detail::PackLayout& b) {
  return std::equal(a.columns.begin(), a.columns.end(), b.columns.begin(), b.columns.end(),
                    [](const detail::ColumnLayout& x, const detail::ColumnLayout& y) {
                      return x.type == y.type && x.nullable == y.nullable && x.name == y.name;
                    });
}

/// The columns and names of `l`, without rows (what make_layout needs).
TableView schema_of(const detail::PackLayout& l) {
  TableView v;
  for (const auto& c : l.columns) {
    v.columns.push_back(ColumnView{.type = c.type});
    v.names.push_back(c.name);
  }
  return v;
}

constexpr std::array<MemoryType, 3> landing_order{MemoryType::DEVICE, MemoryType::PINNED_HOST,
                                                  MemoryType::HOST};
}  // namespace

struct Shuffler::Impl {
  Impl(Communicator& c, OpID o, std::uint8_t g, PartID t, BufferResource& b, PartitionOwner own)
      : comm{c},
        op{o},
        generation{g},
        total{t},
        br{b},
        owner_of(t),
        me{c.rank()},
        n{c.nranks()},
        outgoing_store{b},
        incoming_store{b},
        sent(static_cast<std::size_t>(c.nranks())),
        direct_groups(static_cast<std::size_t>(c.nranks()), 1) {
    for (PartID pid = 0; pid < total; ++pid) {
      const Rank r = own(pid, n);
      SPILLWAY_EXPECTS(r >= 0 && r < n, "the partition owner gave rank " + std::to_string(r) +
                                            " for partition " + std::to_string(pid));
      owner_of[pid] = r;
      if (r == me) local.push_back(pid);
    }
  }

  [[nodiscard]] Tag tag(std::uint8_t stage) const { return Tag{op, stage, generation}; }
  [[nodiscard]] Tag direct_tag(std::uint32_t group) const {
    return tag(static_cast<std::uint8_t>(stage_direct + group));
  }

  /// Under `mutex`.
  [[nodiscard]] bool complete(PartID pid) const {
    if (finishes != n) return false;
    const auto e = expected.find(pid);
    const auto r = received.find(pid);
    return (e == expected.end() ? 0 : e->second) == (r == received.end() ? 0 : r->second);
  }

  /// Under `mutex`: "; partition 3: 2 of 4 chunks, ..." for the incomplete local partitions
  /// ("2 chunks so far" while some ranks' counts have not arrived: the total is not known).
  [[nodiscard]] std::string missing() const {
    std::string out;
    for (PartID pid : local) {
      if (complete(pid) || out.size() > 200) continue;
      const auto e = expected.find(pid);
      const auto r = received.find(pid);
      out += "; partition " + std::to_string(pid) + ": " +
             std::to_string(r == received.end() ? 0 : r->second);
      out += finishes == n
                 ? " of " + std::to_string(e == expected.end() ? 0 : e->second) + " chunks"
                 : " chunks so far";
    }
    return out;
  }

  /// A direct chunk on its sender: its rows' layout and a view of each column's bytes.
  struct DirectChunk {
    detail::PackLayout layout;
    std::vector<std::unique_ptr<Buffer>> columns;
  };

  ProgressThread::Progress progress();
  [[nodiscard]] ProgressThread::Progress idle_or_busy(std::size_t moved_before) const {
    return moved == moved_before ? ProgressThread::Progress::idle : ProgressThread::Progress::busy;
  }
  void send_ready();
  void post_receives();
  void read_finishes();
  void complete_transfers();
  /// insert_finished(): counts this rank's chunks per partition, queues `chunks` (direct; their
  /// columns in `groups` groups, see group_of) and tells every rank.
  void finish(std::map<PartID, DirectChunk> chunks, std::uint32_t groups = 1);
  /// Once every rank has finished: allocates each direct partition's final buffer, in
  /// partition order, and posts the receives into it (and copies this rank's own chunk in).
  void post_direct();
  void complete_direct();
  struct DirectPartition;
  /// Calls fn(source rank, column, offset in the final buffer, bytes) for each nonempty
  /// column of each source's chunk of `d`.
  template <typename Fn>
  void for_each_piece(const DirectPartition& d, Fn&& fn);
  /// Copies this rank's own chunk of `d` into its final buffer (GPU copies on own_stream,
  /// recorded in d.copied).
  void copy_own(DirectPartition& d);
  /// Counts `bytes` received into `landing` as recv-into-host-memory when that is not the GPU.
  void count_landing(const Buffer& landing, std::size_t bytes) {
    if (landing.mem_type() != MemoryType::DEVICE && br.is_live(MemoryType::DEVICE)) {
      br.statistics().add_bytes("recv-into-host-memory", static_cast<double>(bytes));
    }
  }
  /// Reserves memory for an incoming payload in the first tier with room; nullopt while there
  /// is none (for up to the communicator's timeout, then out_of_memory).
  std::optional<MemoryReservation> reserve_landing(std::size_t bytes);

  Communicator& comm;
  const OpID op;
  const std::uint8_t generation;  // which use of `op` on this communicator (in every tag)
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

  /// A local partition with direct chunks: each sender's rank and layout (from its finish
  /// message), then the final buffer and the transfers into it.
  struct DirectPartition {
    std::vector<std::pair<Rank, detail::PackLayout>> sources;
    std::optional<DirectChunk> own;  // this rank's chunk, copied in by post_direct
    detail::PackLayout layout;       // the final buffer's
    std::unique_ptr<Buffer> buffer;  // set when its receives are posted; before `receives`,
                                     // which write into it
    std::vector<std::unique_ptr<Future>> receives;
    Event copied;  // this rank's own chunk copied in (GPU copies)
  };
  // Filled under `mutex` until every rank has finished; then used by the progress thread only.
  std::map<PartID, DirectPartition> direct;
  struct DirectPiece {
    Rank dst;
    std::uint8_t group;
    std::unique_ptr<Buffer> view;
  };
  std::deque<DirectPiece> direct_out;                 // under `mutex`
  std::vector<std::uint32_t> direct_groups;           // per sender, under `mutex`
  std::vector<std::unique_ptr<Future>> direct_sends;  // the progress thread's
  bool direct_started{false};                         // the progress thread's
  /// The progress thread's stream for copying this rank's own direct chunks: kept off the
  /// resource's stream, so that transfers posted later (whose start waits for what that
  /// stream holds) do not wait for them.
  std::optional<OwningStream> own_stream;
  /// The progress thread's stream for allocating direct partitions' final buffers: a receive
  /// waits for what its buffer's stream holds, and the resource's stream may hold this rank's
  /// own partitioning (insert_finished of a table to hash), which the peers' bytes need not
  /// wait for.
  std::optional<OwningStream> landing_stream;

  static std::size_t send_budget_of(const BufferResource& b) {
    std::size_t budget = unlimited_bytes;
    for (MemoryType t : {MemoryType::DEVICE, MemoryType::PINNED_HOST, MemoryType::HOST}) {
      if (b.is_live(t) && b.limit(t) != unlimited_bytes) budget = std::min(budget, b.limit(t) / 4);
    }
    return budget;
  }
  ProgressThread::FunctionID function{0};
  /// Things the progress function did (posts, completions, messages read): unchanged over a
  /// call, the call was idle and the progress thread may back off.
  std::size_t moved{0};
  double loop_seconds{0};  // the progress function's time and calls (event-loop-total)
  std::size_t loop_calls{0};
};

void Shuffler::Impl::send_ready() {
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
      throw corrupt_data_error("spillway: rank " + std::to_string(msg->source) +
                               " sent a chunk of partition " + std::to_string(h.pid) +
                               ", which rank " + std::to_string(owner_of[h.pid]) + " owns");
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

void Shuffler::Impl::read_finishes() {
  while (auto msg = comm.recv_any(tag(stage_finish))) {
    const auto f = detail::decode_finish(msg->data, total);
    const std::string from = "spillway: rank " + std::to_string(msg->source);
    std::map<PartID, std::uint64_t> counts;
    for (const auto& [pid, c] : f.counts) {
      if (owner_of[pid] != me) {
        throw corrupt_data_error(from + " counted chunks of partition " + std::to_string(pid) +
                                 ", which this rank does not own");
      }
      counts[pid] += c;
    }
    std::map<PartID, detail::PackLayout> layouts;
    for (const auto& h : f.direct) {
      const std::string what = from + " sent a direct chunk of partition " + std::to_string(h.pid);
      if (owner_of[h.pid] != me) throw corrupt_data_error(what + ", which this rank does not own");
      auto layout = detail::decode(h.metadata, h.payload_bytes);
      if (!direct_ok(layout)) {
        throw corrupt_data_error(what + " with a column that is not fixed-width without a mask");
      }
      if (layouts.count(h.pid) != 0 || counts[h.pid] == 0) {
        throw corrupt_data_error(what + " that its chunk counts do not account for");
      }
      --counts[h.pid];  // one direct chunk per partition and sender
      layouts.emplace(h.pid, std::move(layout));
    }
    std::lock_guard lock(mutex);
    for (const auto& [pid, c] : f.counts) expected[pid] += c;
    for (auto& [pid, l] : layouts) direct[pid].sources.emplace_back(msg->source, std::move(l));
    direct_groups[static_cast<std::size_t>(msg->source)] = f.direct_groups;
    ++finishes;
    ++moved;
    cv.notify_all();
  }
}

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
        throw corrupt_data_error("spillway: partition " + std::to_string(pid) + ": rank " +
                                 std::to_string(r) + "'s chunk has other columns than rank " +
                                 std::to_string(first) + "'s");
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
  // so that no transfer waits for them).
  for (DirectPartition* d : posted) copy_own(*d);
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

void Shuffler::Impl::copy_own(DirectPartition& d) {
  if (!d.own) return;
  bool gpu_copy = false;
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
    cuda::memcpy_async(d.buffer->data() + at, from.data(), bytes, own_stream->view());
  });
  if (gpu_copy) d.copied.record(own_stream->view());
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
      received[it->first] += d.sources.size();
      it = direct.erase(it);
    }
    ++moved;
    cv.notify_all();
  }
}

void Shuffler::Impl::complete_transfers() {
  moved += std::erase_if(sends, [&](const std::unique_ptr<Future>& f) {
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
    ++moved;
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
  const std::size_t moved_before = moved;
  try {
    // The progress thread may serve ranks on other GPUs: work on this rank's.
    if (br.device() >= 0 && cuda::current_device() != br.device()) cuda::set_device(br.device());
    send_ready();
    post_receives();
    read_finishes();
    post_direct();
    complete_transfers();
    complete_direct();
    std::lock_guard lock(mutex);
    if (!inserts_done || !outgoing.empty() || !sends.empty() || !receives.empty() ||
        !deferred.empty() || finishes != n || !direct_out.empty() || !direct_sends.empty() ||
        !direct.empty()) {
      return idle_or_busy(moved_before);
    }
    for (PartID pid : local) {
      if (!complete(pid)) return idle_or_busy(moved_before);
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
  const std::uint8_t generation = comm.claim_op(op_id);  // until this Shuffler is gone
  try {
    impl_ = std::make_shared<Impl>(comm, op_id, generation, total_partitions, br, std::move(owner));
    Impl* impl = impl_.get();
    impl_->function = comm.progress_thread().add_function([impl] { return impl->progress(); });
  } catch (...) {
    comm.release_op(op_id);
    throw;
  }
}

Shuffler::~Shuffler() {
  {
    // A rank may have all its own partitions before its chunks have reached the others: let
    // the sends finish (within the timeout) after a normal end, when every local partition
    // was handed out; not when the shuffle was abandoned (a wait_any that timed out, an
    // error of the caller's) or failed, which would cost a second timeout.
    std::unique_lock lock(impl_->mutex);
    if (impl_->inserts_done && impl_->handed_out.size() == impl_->local.size()) {
      impl_->cv.wait_for(lock, impl_->comm.timeout(),
                         [&] { return impl_->progress_done || impl_->error != nullptr; });
    }
  }
  try {
    impl_->comm.progress_thread().remove_function(impl_->function);
  } catch (...) {  // the error was already handed to wait_any, or nobody asked
  }
  if (impl_->own_stream) {  // an abandoned shuffle's copies into buffers that now go
    try {
      impl_->own_stream->view().synchronize();
    } catch (...) {
    }
  }
  impl_->br.statistics().add("event-loop-total", 0, impl_->loop_seconds, impl_->loop_calls);
  impl_->comm.release_op(impl_->op);  // the next Shuffler of this id takes the next generation
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
  s.comm.progress_thread().wake();
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
    ++finishes;
    cv.notify_all();
  }
  for (Rank r = 0; r < n; ++r) {
    if (r == me) continue;
    comm.send_message(detail::encode_finish(msgs[static_cast<std::size_t>(r)]), r,
                      tag(stage_finish));
  }
  comm.progress_thread().wake();
}

void Shuffler::insert_finished() {
  impl_->finish({});
}

void Shuffler::insert_finished(std::unordered_map<PartID, PackedData>&& chunks) {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mutex);
    SPILLWAY_EXPECTS(!s.inserts_done, "insert_finished() called twice");
  }
  // Every chunk is checked before any is taken, so that a bad one leaves them all with the caller.
  std::map<PartID, detail::PackLayout> layouts;
  for (auto& [pid, data] : chunks) {
    SPILLWAY_EXPECTS(pid < s.total, "insert_finished: partition " + std::to_string(pid) + " of " +
                                        std::to_string(s.total));
    SPILLWAY_EXPECTS(data.payload != nullptr, "insert_finished: a chunk without a payload");
    layouts.emplace(pid, detail::decode(data.metadata, data.payload->size()));
  }
  std::unordered_map<PartID, PackedData> plain;
  std::map<PartID, Impl::DirectChunk> direct;
  for (auto& [pid, layout] : layouts) {
    PackedData& data = chunks.at(pid);
    if (!direct_ok(layout) || data.payload->mem_type() == MemoryType::DISK) {
      plain.emplace(pid, std::move(data));
      continue;
    }
    std::shared_ptr<const Buffer> payload(std::move(data.payload));
    Impl::DirectChunk d{std::move(layout), {}};
    for (const auto& c : d.layout.columns) {
      d.columns.push_back(BufferResource::view(*payload, c.data.offset, c.data.size, payload));
    }
    direct.emplace(pid, std::move(d));
  }
  chunks.clear();
  if (!plain.empty()) insert(std::move(plain));
  s.finish(std::move(direct));
}

void Shuffler::insert_finished(std::shared_ptr<const Table> table,
                               std::span<const std::size_t> offsets) {
  Impl& s = *impl_;
  SPILLWAY_EXPECTS(table != nullptr, "insert_finished: no table");
  SPILLWAY_EXPECTS(offsets.size() == std::size_t{s.total} + 1,
                   "insert_finished: " + std::to_string(offsets.size()) + " offsets for " +
                       std::to_string(s.total) + " partitions (want one more than partitions)");
  SPILLWAY_EXPECTS(offsets.front() == 0 && offsets.back() == table->num_rows(),
                   "insert_finished: offsets from " + std::to_string(offsets.front()) + " to " +
                       std::to_string(offsets.back()) + " for a table of " +
                       std::to_string(table->num_rows()) + " rows");
  SPILLWAY_EXPECTS(std::is_sorted(offsets.begin(), offsets.end()),
                   "insert_finished: the offsets decrease");
  const TableView v = table->view();
  for (std::size_t c = 0; c < v.num_columns(); ++c) {
    SPILLWAY_EXPECTS(is_fixed_width(v.columns[c].type) && !v.columns[c].nullable(),
                     "insert_finished: column " + std::to_string(c) +
                         " is not fixed-width without a mask; pack the table (split_and_pack) "
                         "and insert its chunks");
  }
  std::map<PartID, Impl::DirectChunk> chunks;
  for (PartID pid = 0; pid < s.total; ++pid) {
    const std::size_t first = offsets[pid];
    const std::size_t rows = offsets[pid + 1] - first;
    Impl::DirectChunk d{detail::make_layout(v, rows, {}), {}};
    for (std::size_t c = 0; c < v.num_columns(); ++c) {
      const std::size_t width = size_of(v.columns[c].type);
      d.columns.push_back(
          BufferResource::view(table->column(c).data(), first * width, rows * width, table));
    }
    chunks.emplace(pid, std::move(d));
  }
  s.finish(std::move(chunks));
}

void Shuffler::insert_finished(Table&& table, std::span<const std::size_t> keys,
                               std::uint32_t seed) {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mutex);
    SPILLWAY_EXPECTS(!s.inserts_done, "insert_finished() called twice");
  }
  const TableView v = table.view();
  const auto on_device = [](const Column& c) { return c.data().mem_type() == MemoryType::DEVICE; };
  bool columnwise = v.num_rows() > 0 && v.num_columns() > 0;
  for (std::size_t c = 0; c < v.num_columns(); ++c) {
    columnwise = columnwise && on_device(table.column(c)) && is_fixed_width(v.columns[c].type) &&
                 !v.columns[c].nullable();
  }
  if (!columnwise) {
    const bool gpu = v.num_columns() > 0 && on_device(table.column(0));
    auto packed = gpu ? gpu::partition_and_pack(v, keys, s.total, s.br, s.br.stream(), seed)
                      : partition_and_pack(v, keys, s.total, s.br, seed);
    table = Table{};
    std::unordered_map<PartID, PackedData> chunks;
    for (PartID p = 0; p < s.total; ++p) chunks.emplace(p, std::move(packed[p]));
    insert_finished(std::move(chunks));
    return;
  }
  SPILLWAY_MEMORY_PROFILE(s.br.statistics().memory_profiler(), "partition_and_pack");
  const Stream stream = s.br.stream();
  gpu::PartitionPlan plan(v, keys, s.total, s.br, stream, seed);
  const std::vector<std::size_t>& offsets = plan.offsets();
  std::map<PartID, Impl::DirectChunk> chunks;
  for (PartID p = 0; p < s.total; ++p) {
    chunks.emplace(p,
                   Impl::DirectChunk{detail::make_layout(v, offsets[p + 1] - offsets[p], {}), {}});
  }
  // The columns are placed in a few groups (place_groups), each group's partitioned copy
  // replacing its input columns in stream order (its memory is theirs, freed just before). Its
  // views are on a stream of their own that waits for its placement alone: the group's sends
  // and own copies wait for nothing placed later.
  struct Placed {
    OwningStream ready;
    std::vector<std::unique_ptr<Buffer>> columns;  // freed on the resource's stream
  };
  std::vector<Column> inputs = std::move(table).release();
  const std::size_t ncols = inputs.size();
  const auto groups = static_cast<std::uint32_t>(std::min<std::size_t>(ncols, place_groups));
  for (std::size_t first = 0; first < ncols;) {
    std::size_t last = first;
    while (last < ncols && group_of(last, ncols, groups) == group_of(first, ncols, groups)) ++last;
    auto placed = std::make_shared<Placed>();
    std::vector<std::byte*> outs;
    for (std::size_t c = first; c < last; ++c) {
      placed->columns.push_back(
          s.br.allocate(MemoryType::DEVICE, v.num_rows() * size_of(v.columns[c].type), stream));
      outs.push_back(placed->columns.back()->data());
    }
    plan.place(first, last, outs, stream);
    Event done;
    done.record(stream);
    done.wait_on(placed->ready.view());
    for (std::size_t c = first; c < last; ++c) {
      // The input column is freed in order on its stream, after its placement.
      const Stream input_stream = inputs[c].data().stream();
      if (input_stream != stream) done.wait_on(input_stream);
      { Column consumed = std::move(inputs[c]); }
      const std::size_t width = size_of(v.columns[c].type);
      for (PartID p = 0; p < s.total; ++p) {
        chunks.at(p).columns.push_back(BufferResource::view(
            *placed->columns[c - first], offsets[p] * width, (offsets[p + 1] - offsets[p]) * width,
            placed, placed->ready.view()));
      }
    }
    first = last;
  }
  s.finish(std::move(chunks), groups);
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
  s.comm.progress_thread().wake();  // memory is free for chunks waiting to land
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
