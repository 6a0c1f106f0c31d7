#pragma once
// Private to the shuffle: the Shuffler's state and the steps of its protocols, whose
// definitions are split by concept: shuffler.cpp (the public calls, finish counting and the
// progress function), plain_chunks.cpp (the postboxes with the send budget, each payload sent
// once its owner is ready for it, and the landing of incoming chunks in the first tier with
// room) and direct_chunks.cpp (chunks received straight into their partition's final buffer).

#include <spillway/comm/progress_thread.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/event.hpp>
#include <spillway/core/options.hpp>
#include <spillway/memory/spillable_store.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/table/gpu.hpp>

#include <spillway/table/pack_format.hpp>
#include "shuffle/detail/wire.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace spillway {

struct Shuffler::Impl {
  static constexpr std::uint8_t stage_chunk = 0;
  static constexpr std::uint8_t stage_payload = 1;
  static constexpr std::uint8_t stage_finish = 2;
  static constexpr std::uint8_t stage_ready = 3;
  static constexpr std::uint8_t stage_direct =
      4;  // the columns of direct chunks (4 + column group)
  /// Column groups insert_finished places a table to hash in (gpu::place_partitions): more start
  /// the first sends sooner, but each repeats the place pass's per-row work and the last ones
  /// finish every partition at about the same time; 5 measured best
  /// (docs/decisions/shuffle.md).
  static constexpr std::size_t place_groups = 5;
  /// Chunks for the same peer smaller than this go several to a message while they wait
  /// together: their payloads are gathered into one buffer of up to batch_bytes (and the send
  /// budget), sent and received as one, and split into views of it on arrival. A message, a
  /// receive and a landing allocation each cost tens of us a chunk, far more than copying
  /// ~100 KiB (docs/decisions/shuffle.md). A chunk that waits alone goes as it is.
  static constexpr std::size_t batch_below = std::size_t{4} << 20;
  static constexpr std::size_t batch_bytes = std::size_t{8} << 20;

  /// Whether `bytes` in `chunks` chunks of `columns` columns are better sent packed. Direct
  /// chunks go a message per column; below options' shuffle_direct_piece bytes a column on
  /// average, those messages cost more than packed chunks' concatenation at the owner
  /// (docs/decisions/shuffle.md).
  [[nodiscard]] bool pieces_too_small(std::size_t bytes, std::size_t chunks,
                                      std::size_t columns) const {
    return chunks > 0 && columns > 0 && bytes / chunks / columns < direct_piece;
  }

  /// Whether a chunk of this layout can go straight into its owner's final buffer: every
  /// column's rows are one run of bytes there (no mask bits or string offsets to shift).
  static bool direct_ok(const detail::PackLayout& l) {
    return std::all_of(l.columns.begin(), l.columns.end(), [](const detail::ColumnLayout& c) {
      return is_fixed_width(c.type) && !c.nullable;
    });
  }

  /// The group of column `c` of `columns` when a sender sends its direct chunks' columns in
  /// `groups` groups: each group's pieces carry the tag stage stage_direct + group, so that a
  /// group placed early need not wait behind one placed later (insert_finished of a table to
  /// hash), whatever order the owner posts its receives in.
  static std::uint8_t group_of(std::size_t c, std::size_t columns, std::uint32_t groups) {
    return static_cast<std::uint8_t>(gpu::column_group(c, columns, groups));
  }

  static bool same_schema(const detail::PackLayout& a, const detail::PackLayout& b) {
    return std::equal(a.columns.begin(), a.columns.end(), b.columns.begin(), b.columns.end(),
                      [](const detail::ColumnLayout& x, const detail::ColumnLayout& y) {
                        return x.type == y.type && x.nullable == y.nullable && x.name == y.name;
                      });
  }

  /// The columns and names of `l`, without rows (what make_layout needs).
  static TableView schema_of(const detail::PackLayout& l) {
    TableView v;
    for (const auto& c : l.columns) {
      v.columns.push_back(ColumnView{.type = c.type});
      v.names.push_back(c.name);
    }
    return v;
  }

  static constexpr std::array<MemoryType, 3> landing_order{
      MemoryType::DEVICE, MemoryType::PINNED_HOST, MemoryType::HOST};

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
        announced_store{b, -1},
        outgoing(static_cast<std::size_t>(c.nranks())),
        sent(static_cast<std::size_t>(c.nranks())),
        announced(static_cast<std::size_t>(c.nranks())),
        readies(static_cast<std::size_t>(c.nranks()), 0),
        finished_from(static_cast<std::size_t>(c.nranks()), 0),
        posted_from(static_cast<std::size_t>(c.nranks()), 0),
        direct_groups(static_cast<std::size_t>(c.nranks()), 1) {
    for (PartID pid = 0; pid < total; ++pid) {
      const Rank r = own(pid, n);
      SPILLWAY_EXPECTS(r >= 0 && r < n, "the partition owner gave rank " + std::to_string(r) +
                                            " for partition " + std::to_string(pid));
      owner_of[pid] = r;
      if (r == me) local.push_back(pid);
    }
    for (auto* v : {&queued, &handed, &extracted}) v->assign(total, 0);
    received.assign(total, 0);
    expected.assign(total, 0);
    incomplete = local.size();
  }

  [[nodiscard]] Tag tag(std::uint8_t stage) const { return Tag{op, stage, generation}; }
  [[nodiscard]] Tag direct_tag(std::uint32_t group) const {
    return tag(static_cast<std::uint8_t>(stage_direct + group));
  }

  /// Under `mutex`.
  [[nodiscard]] bool complete(PartID pid) const {
    return finishes == n && expected[pid] == received[pid];
  }

  /// Under `mutex`, by the progress thread: oldest_transfer, from every send and receive.
  void note_oldest_transfer() {
    const detail::Request* oldest = nullptr;
    std::shared_ptr<const detail::Request> keep;
    const auto consider = [&](const Future& f) {
      if (oldest == nullptr || f.request().posted < oldest->posted) {
        oldest = &f.request();
        keep = f.shared_request();
      }
    };
    for (const auto& f : sends) consider(*f);
    for (const auto& f : direct_sends) consider(*f);
    for (const auto& r : receives) consider(*r.future);
    for (const auto& [pid, d] : direct) {
      for (const auto& f : d.receives) consider(*f);
    }
    oldest_transfer = std::move(keep);
  }

  /// Under `mutex`: `chunks` more chunks of local partition `pid` arrived.
  void arrived(PartID pid, std::uint64_t chunks) {
    received[pid] += chunks;
    queue_if_complete(pid);
  }
  /// Under `mutex`: one more rank's finish message was counted (every local partition's
  /// total is known once all have been).
  void finish_counted() {
    if (++finishes == n) {
      for (PartID pid : local) queue_if_complete(pid);
    }
    cv.notify_all();
  }
  /// Under `mutex`: queues `pid` for wait_any the first time it is complete, so that waiting
  /// and the progress function's end test cost constant time per partition (not a scan of
  /// every local partition per call).
  void queue_if_complete(PartID pid) {
    if (queued[pid] || !complete(pid)) return;
    queued[pid] = 1;
    ready.push_back(pid);
    --incomplete;
  }

  /// Under `mutex`: "; partition 3: 2 of 4 chunks, ..." for the incomplete local partitions
  /// ("2 chunks so far" while some ranks' counts have not arrived: the total is not known).
  [[nodiscard]] std::string missing() const {
    std::string out;
    for (PartID pid : local) {
      if (complete(pid) || out.size() > 200) continue;
      out += "; partition " + std::to_string(pid) + ": " + std::to_string(received[pid]);
      out += finishes == n ? " of " + std::to_string(expected[pid]) + " chunks" : " chunks so far";
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
  /// The peers that have left (Communicator::has_left) while this rank waits on them without
  /// a transfer posted: for their finish message, or for their ready for payloads announced to
  /// them. Taken before their messages are read, which a peer sent before it left.
  [[nodiscard]] std::vector<Rank> left_while_awaited() const;
  /// Fails the shuffle if one of `left` (left_while_awaited) is still awaited after its
  /// messages were read: it will never send what is missing.
  void check_left(const std::vector<Rank>& left) const;
  /// Whether this rank waits on rank `i` for a message: its finish, or its ready for payloads
  /// announced to it.
  [[nodiscard]] bool awaits(std::size_t i) const {
    return finished_from[i] == 0 || announced[i].size() > readies[i];
  }
  void send_ready();
  /// Sends the payloads whose receivers are ready for them (their ready messages).
  void send_payloads();
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
  /// Copies between device buffers of this rank's own chunks, issued as one kernel
  /// (gpu::copy_batch) for up to own_batch_bytes: a cudaMemcpyAsync each costs the progress
  /// thread microseconds a piece, and `-o 512` has thousands. Which pieces go by the kernel is
  /// the transfer engine's choice between device memory (transfer::detail::choose, as the
  /// local communicator's copies).
  struct OwnCopies {
    std::vector<void*> dsts;
    std::vector<const void*> srcs;
    std::vector<std::size_t> sizes;
    std::size_t bytes{0};
  };
  static constexpr std::size_t own_batch_bytes = std::size_t{64} << 20;
  /// Copies this rank's own chunk of `d` into its final buffer: host memory at once, GPU copies
  /// on own_stream (after what the buffers' streams hold; d.on_gpu set), the small ones between
  /// device buffers added to `batch` for the caller to issue (then recording d.copied).
  void copy_own(DirectPartition& d, OwnCopies& batch);
  /// Counts `bytes` received into `landing` as recv-into-host-memory when that is not the GPU.
  void count_landing(const Buffer& landing, std::size_t bytes) {
    if (landing.mem_type() != MemoryType::DEVICE && br.is_live(MemoryType::DEVICE)) {
      br.statistics().add_bytes("recv-into-host-memory", static_cast<double>(bytes));
    }
  }
  /// Reserves memory for an incoming payload in the first tier with room; nullopt while there
  /// is none (for up to the communicator's timeout, then out_of_memory).
  std::optional<MemoryReservation> reserve_landing(std::size_t bytes);
  /// Brings `buf` back to host memory when it was spilled to disk (a payload to send): false,
  /// `buf` untouched, while there is no room (for up to the communicator's timeout, then
  /// out_of_memory).
  bool unspill(std::unique_ptr<Buffer>& buf);
  /// `attempt()`, a reservation that may spill, or nullopt while it gives none: for up to the
  /// communicator's timeout since `since` (when it first gave none), then `last()`, the limit
  /// error or room at last.
  template <typename Attempt, typename Last>
  std::optional<MemoryReservation> reserve_soon(
      std::optional<std::chrono::steady_clock::time_point>& since, Attempt&& attempt, Last&& last) {
    if (auto res = attempt()) {
      since.reset();
      return res;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!since) since = now;
    if (now - *since <= comm.timeout()) return std::nullopt;
    since.reset();
    return last();
  }

  Communicator& comm;
  const OpID op;
  const std::uint8_t generation;  // which use of `op` on this communicator (in every tag)
  const PartID total;
  BufferResource& br;
  std::vector<Rank> owner_of;
  const Rank me;
  const int n;
  const std::size_t direct_piece{options::get().shuffle_direct_piece};  // pieces_too_small
  std::vector<PartID> local;
  SpillableStore outgoing_store;
  SpillableStore incoming_store;
  /// The payloads announced to their owners, which leave as soon as the owners are ready for
  /// them: spilled last, after every other store's buffers (a spilled one costs a copy down
  /// and a slower send).
  SpillableStore announced_store;

  struct Outgoing {
    PartID pid;
    std::vector<std::uint8_t> metadata;
    SpillableStore::Key key;
    std::size_t bytes;
    /// When inserted, its payload lay right after that of the chunk before it for the same peer
    /// in the same insert (Buffer::follows; CPU partition_and_pack_ordered places them so): a
    /// batch that starts a chain of such chunks ends with it, and goes without a gather.
    bool follows{false};
  };
  /// The partitions grouped by owner (rank 0's first), each group in partition order: the
  /// order in which CPU partition_and_pack_ordered places payloads for the Shuffler.
  [[nodiscard]] std::vector<std::uint32_t> partitions_by_owner() const;
  /// The partitions of `chunks` in order, each with whether its payload lies right after the
  /// one before it for the same peer (Outgoing::follows).
  [[nodiscard]] std::vector<std::pair<PartID, bool>> in_partition_order(
      const std::unordered_map<PartID, PackedData>& chunks) const;
  /// Announces `batch` (chunks for `dst`) as one chunks message, their payloads joined into one
  /// view where they lie one after another (BufferResource::join) or else gathered into one,
  /// or a message each where they cannot be gathered; the payloads wait in announced_store for
  /// `dst` to be ready for them.
  void send_chunks(Rank dst, std::vector<Outgoing> batch);
  void announce(Rank dst, std::span<const detail::ChunkHeader> chunks,
                std::unique_ptr<Buffer> payload);
  /// The payloads of `chunks` in one new buffer of their tier, at their chunk_offsets(), or
  /// null (and `bufs` untouched) where they are in different tiers or there is no room.
  std::unique_ptr<Buffer> gather(std::span<const detail::ChunkHeader> chunks,
                                 std::vector<std::unique_ptr<Buffer>>& bufs);
  struct Incoming {
    std::vector<std::uint8_t> metadata;
    SpillableStore::Key key;
  };
  mutable std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::deque<Outgoing>> outgoing;  // per destination rank, in insert order
  std::size_t outgoing_count{0};               // chunks in `outgoing`
  std::map<PartID, std::vector<Incoming>> incoming;
  // Per partition (only local ones used): chunks arrived, chunks sent to us (summed over finish
  // messages), queued in `ready` once complete, returned by wait_any or extracted, extracted.
  std::vector<std::uint64_t> received;
  std::vector<std::uint64_t> expected;
  std::vector<std::uint8_t> queued;
  std::vector<std::uint8_t> handed;
  std::vector<std::uint8_t> extracted;
  std::deque<PartID> ready;        // complete, in completion order; wait_any pops
  std::size_t incomplete{0};       // local partitions not complete yet
  std::size_t handed_out{0};       // local partitions `handed`
  std::size_t extracted_count{0};  // local partitions extracted
  int finishes{0};                 // finish messages seen (our own included)
  std::vector<std::map<PartID, std::uint64_t>> sent;  // per destination rank
  bool joined{false};  // insert() or insert_finished() was called: receives may be posted
  bool inserts_done{false};
  bool progress_done{false};  // every chunk sent and every local partition complete
  std::exception_ptr error;
  /// The transfer in flight the longest at the progress thread's last pass (none: null).
  std::shared_ptr<const detail::Request> oldest_transfer;

  // Used by the progress thread only.
  /// Payloads announced to a peer, waiting (spillable, in announced_store) for its ready
  /// message; per destination rank, in the order announced, which is the order it answers in.
  struct Announced {
    SpillableStore::Key key;
    std::size_t bytes;
  };
  std::vector<std::deque<Announced>> announced;
  std::vector<std::size_t> readies;             // per destination: ready messages not yet served
  std::atomic<std::size_t> announced_count{0};  // (also read by status())
  std::vector<std::uint8_t> finished_from;      // per rank: its finish message was read
  std::vector<std::unique_ptr<Future>> sends;
  std::size_t send_bytes{0};  // payload bytes announced and not yet sent (`sends` included)
  /// At most this many payload bytes are announced and not yet sent (always at least one
  /// chunk's): the transfer budget's limit (a quarter of the smallest limit of a memory tier).
  /// The other chunks wait in outgoing_store, one message each; gathered, fewer and larger.
  std::size_t send_budget{br.transfer_budget().limit()};
  Rank next_dst{0};  // the destination send_ready serves first next time (each in turn)
  struct Receive {
    std::unique_ptr<Future> future;
    std::vector<detail::ChunkHeader> chunks;  // whose payloads it brings, one after another
    TransferBudget::Share share;              // its landing's memory, waiting on the sender
  };
  std::vector<Receive> receives;
  /// Chunk messages whose payload could not be given memory yet (every tier full of data that
  /// cannot spill, such as transfers in flight); retried, in arrival order, on every round.
  struct Deferred {
    Rank source;
    std::vector<detail::ChunkHeader> chunks;
  };
  std::deque<Deferred> deferred;
  /// Per source: the receives post_receives() posted this round (all zero between rounds).
  std::vector<std::uint32_t> posted_from;
  std::optional<std::chrono::steady_clock::time_point> deferred_since;  // memory short since
  std::optional<std::chrono::steady_clock::time_point> unspill_since;   // the same, to send

  /// A local partition with direct chunks: each sender's rank and layout (from its finish
  /// message), then the final buffer and the transfers into it.
  struct DirectPartition {
    std::vector<std::pair<Rank, detail::PackLayout>> sources;
    std::optional<DirectChunk> own;  // this rank's chunk, copied in by post_direct
    detail::PackLayout layout;       // the final buffer's
    std::unique_ptr<Buffer> buffer;  // set when its receives are posted; before `receives`,
                                     // which write into it
    std::vector<std::unique_ptr<Future>> receives;
    Event copied;        // this rank's own chunk copied in (GPU copies)
    bool on_gpu{false};  // some of those copies are on own_stream
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

  ProgressThread::FunctionID function{0};
  /// Things the progress function did (posts, completions, messages read): unchanged over a
  /// call, the call was idle and the progress thread may back off.
  std::size_t moved{0};
  double loop_seconds{0};  // the progress function's time and calls (event-loop-total)
  std::size_t loop_calls{0};
  // When the shuffle began: shuffle-chunks, its time over the chunks its partitions received
  // (`received`), recorded by ~Shuffler.
  std::chrono::steady_clock::time_point started{std::chrono::steady_clock::now()};
};

}  // namespace spillway
