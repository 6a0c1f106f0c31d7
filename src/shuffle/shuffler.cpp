// The Shuffler's public calls and its progress function; finish counting is in finishes.cpp,
// the two protocols in plain_chunks.cpp and direct_chunks.cpp, the state in
// detail/shuffler_impl.hpp.
#include "detail/shuffler_impl.hpp"

#include <spillway/core/cuda.hpp>
#include <spillway/stats/memory_profiler.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/partition.hpp>

#include <spillway/table/partition_order.hpp>
#include "core/detail/nvtx.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace spillway {

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
    const std::vector<Rank> left = left_while_awaited();
    send_ready();
    send_payloads();
    post_receives();
    read_finishes();
    post_direct();
    complete_transfers();
    complete_direct();
    check_left(left);
    std::lock_guard lock(mutex);
    note_oldest_transfer();
    if (!inserts_done || outgoing_count != 0 || announced_count != 0 || !sends.empty() ||
        !receives.empty() || !deferred.empty() || finishes != n || !direct_out.empty() ||
        !direct_sends.empty() || !direct.empty() || incomplete != 0) {
      return idle_or_busy(moved_before);
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
    if (impl_->inserts_done && impl_->handed_out == impl_->local.size()) {
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
  std::uint64_t chunks = 0;
  {
    std::lock_guard lock(impl_->mutex);
    chunks = std::accumulate(impl_->received.begin(), impl_->received.end(), std::uint64_t{0});
  }
  if (chunks > 0) {
    impl_->br.statistics().add(
        "shuffle-chunks", 0,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->started).count(),
        chunks);
  }
  impl_->comm.release_op(impl_->op);  // the next Shuffler of this id takes the next generation
}

void Shuffler::insert(std::unordered_map<PartID, PackedData>&& chunks) {
  Impl& s = *impl_;
  for (auto& [pid, data] : chunks) {
    SPILLWAY_EXPECTS(pid < s.total,
                     "insert: partition " + std::to_string(pid) + " of " + std::to_string(s.total));
    SPILLWAY_EXPECTS(data.payload != nullptr, "insert: a chunk without a payload");
  }
  const auto order = s.in_partition_order(chunks);
  std::lock_guard lock(s.mutex);
  SPILLWAY_EXPECTS(!s.inserts_done, "insert after insert_finished()");
  s.joined = true;
  for (const auto& [pid, follows] : order) {
    PackedData& data = chunks.at(pid);
    const Rank dst = s.owner_of[pid];
    ++s.sent[static_cast<std::size_t>(dst)][pid];
    if (dst == s.me) {  // stays here
      const auto key = s.incoming_store.insert(std::move(data.payload));
      s.incoming[pid].push_back({std::move(data.metadata), key});
      s.arrived(pid, 1);
    } else {
      const std::size_t bytes = data.payload->size();
      const auto key = s.outgoing_store.insert(std::move(data.payload));
      s.outgoing[static_cast<std::size_t>(dst)].push_back(
          {pid, std::move(data.metadata), key, bytes, follows});
      ++s.outgoing_count;
    }
  }
  chunks.clear();
  s.cv.notify_all();
  s.comm.progress_thread().wake();
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
  // Direct only where the column pieces are large enough to be worth a message each.
  std::size_t bytes = 0;
  std::size_t columns = 0;
  for (const auto& [pid, layout] : layouts) {
    bytes += layout.payload_size;
    columns = std::max(columns, layout.columns.size());
  }
  const bool packed = s.pieces_too_small(bytes, layouts.size(), columns);
  std::unordered_map<PartID, PackedData> plain;
  std::map<PartID, Impl::DirectChunk> direct;
  for (auto& [pid, layout] : layouts) {
    PackedData& data = chunks.at(pid);
    if (packed || !Impl::direct_ok(layout) || data.payload->mem_type() == MemoryType::DISK) {
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
  // Many small column pieces go packed (see insert_finished(chunks)) when the GPU has room for
  // the packed copy beside the table without spilling; placed column by column they would need
  // no second copy, but a message per column and partition.
  std::size_t bytes = 0;
  for (std::size_t c = 0; c < v.num_columns(); ++c) bytes += table.column(c).data().size();
  if (columnwise && s.pieces_too_small(bytes, s.total, v.num_columns()) &&
      s.br.available(MemoryType::DEVICE) >= bytes + s.br.headroom(MemoryType::DEVICE)) {
    columnwise = false;
  }
  if (!columnwise) {
    const bool gpu = v.num_columns() > 0 && on_device(table.column(0));
    // On the CPU each peer's partitions are placed one after another, so that its chunks
    // travel joined, not gathered (send_chunks).
    auto packed = gpu ? gpu::partition_and_pack(v, keys, s.total, s.br, s.br.stream(), seed)
                      : detail::partition_and_pack_ordered(v, keys, s.total, s.br, seed, 0,
                                                           s.partitions_by_owner());
    table = Table{};
    std::unordered_map<PartID, PackedData> chunks;
    for (PartID p = 0; p < s.total; ++p) chunks.emplace(p, std::move(packed[p]));
    insert_finished(std::move(chunks));
    return;
  }
  // Each column group goes out as soon as it is placed (place_groups).
  auto placed = gpu::place_partitions(std::move(table), keys, s.total, s.br, s.br.stream(), seed,
                                      Impl::place_groups);
  std::map<PartID, Impl::DirectChunk> chunks;
  for (PartID p = 0; p < s.total; ++p) {
    chunks.emplace(
        p, Impl::DirectChunk{detail::make_layout(v, placed.offsets[p + 1] - placed.offsets[p], {}),
                             std::move(placed.parts[p])});
  }
  s.finish(std::move(chunks), placed.groups);
}

std::exception_ptr Shuffler::failure(std::chrono::milliseconds timeout) const {
  Impl& s = *impl_;
  std::unique_lock lock(s.mutex);
  for (;;) {
    if (s.error) return s.error;
    const std::shared_ptr<const detail::Request> o = s.oldest_transfer;
    if (!o) return nullptr;
    const auto now = std::chrono::steady_clock::now();
    if (now - o->posted >= timeout) {
      try {
        SPILLWAY_FAIL(s.comm.logger().prefix() + "shuffle: the " + o->describe() +
                          " has not completed in " + std::to_string(timeout.count()) +
                          " ms: the peer is dead or stuck",
                      comm_error);
      } catch (...) {
        return std::current_exception();
      }
    }
    // In slices: the progress thread notes its transfers on each pass, without a notification.
    s.cv.wait_for(lock, std::min<std::chrono::steady_clock::duration>(
                            o->posted + timeout - now, std::chrono::milliseconds(10)));
  }
}

std::optional<PartID> Shuffler::try_wait_any(std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  std::unique_lock lock(s.mutex);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (s.error) std::rethrow_exception(s.error);
    SPILLWAY_EXPECTS(s.handed_out < s.local.size(),
                     "wait_any: every local partition was returned already");
    while (!s.ready.empty()) {
      const PartID pid = s.ready.front();
      s.ready.pop_front();
      if (s.handed[pid]) continue;  // extract() took it first
      s.handed[pid] = 1;
      ++s.handed_out;
      return pid;
    }
    if (s.cv.wait_until(lock, deadline) == std::cv_status::timeout) return std::nullopt;
  }
}

PartID Shuffler::wait_any(std::chrono::milliseconds timeout) {
  if (const auto pid = try_wait_any(timeout)) return *pid;
  SPILLWAY_FAIL(impl_->comm.logger().prefix() + "shuffle op " + std::to_string(impl_->op) +
                    ": no partition completed within " + std::to_string(timeout.count()) + " ms " +
                    status(),
                comm_error);
}

std::string Shuffler::status() const {
  const Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  std::string oldest;
  if (s.oldest_transfer) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - s.oldest_transfer->posted);
    oldest = "; in flight the longest: the " + s.oldest_transfer->describe() + ", for " +
             std::to_string(ms.count()) + " ms";
  }
  const std::size_t announced = s.announced_count.load();
  return "(" + std::to_string(s.finishes) + " of " + std::to_string(s.n) +
         " ranks finished inserting; " + std::to_string(s.outgoing_count) +
         " chunks still to send" +
         (announced == 0 ? ""
                         : "; " + std::to_string(announced) +
                               " payloads announced, waiting for their owners to be ready") +
         oldest + ")" + s.missing();
}

Table Shuffler::extract_table(PartID pid, MemoryType to) {
  SPILLWAY_EXPECTS(to == MemoryType::HOST || to == MemoryType::DEVICE,
                   "extract_table: into HOST or DEVICE, not " + std::string(to_string(to)));
  std::vector<PackedData> chunks = extract(pid);
  if (chunks.empty()) return Table();
  BufferResource& br = impl_->br;
  return to == MemoryType::DEVICE ? gpu::unpack_and_concat(std::move(chunks), br, br.stream())
                                  : unpack_and_concat(std::move(chunks), br);
}

std::vector<PackedData> Shuffler::extract(PartID pid) {
  SPILLWAY_NVTX_RANGE("shuffle: extract");
  Impl& s = *impl_;
  std::vector<Impl::Incoming> parts;
  {
    std::lock_guard lock(s.mutex);
    SPILLWAY_EXPECTS(pid < s.total && s.owner_of[pid] == s.me,
                     "extract: partition " + std::to_string(pid) + " is not local");
    SPILLWAY_EXPECTS(!s.extracted[pid],
                     "extract: partition " + std::to_string(pid) + " was extracted already");
    SPILLWAY_EXPECTS(s.complete(pid),
                     "extract: partition " + std::to_string(pid) + " is not complete yet");
    s.extracted[pid] = 1;
    ++s.extracted_count;
    if (!s.handed[pid]) {
      s.handed[pid] = 1;
      ++s.handed_out;
    }
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
  return impl_->extracted_count == impl_->local.size();
}

}  // namespace spillway
