// Tables kept spillable until they are taken (spillable_tables.hpp).
#include <spillway/table/spillable_tables.hpp>

#include <spillway/core/error.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/pack.hpp>

#include <string>
#include <utility>

namespace spillway {

SpillableTables::SpillableTables(BufferResource& br, int priority)
    : br_(br), store_(br, priority) {}

void SpillableTables::push(Table&& table) {
  Held h;
  h.names = table.names();
  std::vector<Column> columns = std::move(table).release();
  h.from_device = !columns.empty() && columns.front().data().mem_type() == MemoryType::DEVICE;
  for (Column& c : columns) {
    HeldColumn held{c.type(), c.size(), {}};
    Column::Buffers b = std::move(c).release();
    std::unique_ptr<Buffer>* parts[] = {&b.data, &b.offsets, &b.null_mask};
    for (std::size_t i = 0; i < 3; ++i) {
      if (*parts[i] == nullptr) continue;
      h.bytes += (*parts[i])->size();
      held.keys[i] = store_.insert(std::move(*parts[i]));
    }
    h.columns.push_back(held);
  }
  std::lock_guard lock(mutex_);
  held_.push_back(std::move(h));
}

void SpillableTables::push(PackedData&& packed) {
  SPILLWAY_EXPECTS(packed.payload != nullptr, "SpillableTables::push: a chunk without a payload");
  Held h;
  h.bytes = packed.payload->size();
  h.from_device = packed.payload->mem_type() == MemoryType::DEVICE;
  h.payload = store_.insert(std::move(packed.payload));
  h.metadata = std::move(packed.metadata);
  std::lock_guard lock(mutex_);
  held_.push_back(std::move(h));
}

std::optional<SpillableTables::Held> SpillableTables::take() {
  std::lock_guard lock(mutex_);
  if (held_.empty()) return std::nullopt;
  Held h = std::move(held_.front());
  held_.pop_front();
  return h;
}

void SpillableTables::clear() {
  while (std::optional<Held> h = take()) {
    if (h->payload) (void)store_.extract(*h->payload);
    for (const HeldColumn& c : h->columns) {
      for (const auto& key : c.keys) {
        if (key) (void)store_.extract(*key);
      }
    }
  }
}

void SpillableTables::put_back(Held&& h) {
  std::lock_guard lock(mutex_);
  held_.push_front(std::move(h));
}

Table SpillableTables::columns_of(Held&& h, MemoryType to) {
  std::vector<std::array<std::unique_ptr<Buffer>, 3>> up(h.columns.size());
  try {
    for (std::size_t c = 0; c < h.columns.size(); ++c) {
      for (std::size_t i = 0; i < 3; ++i) {
        std::optional<SpillableStore::Key>& key = h.columns[c].keys[i];
        if (!key) continue;
        up[c][i] = store_.extract(*key, to);  // moved up first, with spilling
        key.reset();
      }
    }
  } catch (...) {  // (the buffer that failed stayed in the store under its key)
    for (std::size_t c = 0; c < h.columns.size(); ++c) {
      for (std::size_t i = 0; i < 3; ++i) {
        if (up[c][i]) h.columns[c].keys[i] = store_.insert(std::move(up[c][i]));
      }
    }
    put_back(std::move(h));
    throw;
  }
  std::vector<Column> columns;
  columns.reserve(h.columns.size());
  for (std::size_t c = 0; c < h.columns.size(); ++c) {
    columns.emplace_back(h.columns[c].type, h.columns[c].rows, std::move(up[c][0]),
                         std::move(up[c][1]), std::move(up[c][2]));
  }
  return Table(std::move(columns), std::move(h.names));
}

std::optional<Table> SpillableTables::pop(MemoryType to) {
  SPILLWAY_EXPECTS(to == MemoryType::HOST || to == MemoryType::DEVICE,
                   "SpillableTables::pop: into HOST or DEVICE, not " + std::string(to_string(to)));
  std::optional<Held> h = take();
  if (!h) return std::nullopt;
  if (!h->payload) return columns_of(std::move(*h), to);
  std::unique_ptr<Buffer> payload;
  try {
    payload = store_.extract(*h->payload, to);  // moved up first, with spilling
  } catch (...) {                               // it stays kept, at the front
    put_back(std::move(*h));
    throw;
  }
  std::vector<PackedData> one;
  one.push_back(PackedData{std::move(h->metadata), std::move(payload)});
  return to == MemoryType::DEVICE ? gpu::unpack_and_concat(std::move(one), br_, br_.stream())
                                  : unpack_and_concat(std::move(one), br_);
}

std::optional<PackedData> SpillableTables::pop_packed() {
  std::optional<Held> h = take();
  if (!h) return std::nullopt;
  if (h->payload) return PackedData{std::move(h->metadata), store_.extract(*h->payload)};
  const bool device = h->from_device;
  const Table t = columns_of(std::move(*h), device ? MemoryType::DEVICE : MemoryType::HOST);
  const std::vector<std::size_t> whole;  // no splits: one part
  std::vector<PackedData> packed = device ? gpu::split_and_pack(t.view(), whole, br_, br_.stream())
                                          : split_and_pack(t.view(), whole, br_);
  return std::move(packed.front());
}

std::size_t SpillableTables::size() const {
  std::lock_guard lock(mutex_);
  return held_.size();
}

std::optional<std::size_t> SpillableTables::front_bytes() const {
  std::lock_guard lock(mutex_);
  if (held_.empty()) return std::nullopt;
  return held_.front().bytes;
}

std::size_t SpillableTables::bytes_in(MemoryType t) const {
  return store_.bytes_in(t);
}

}  // namespace spillway
