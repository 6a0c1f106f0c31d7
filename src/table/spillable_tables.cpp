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
  const bool device =
      table.num_columns() > 0 && table.column(0).data().mem_type() == MemoryType::DEVICE;
  const std::vector<std::size_t> whole;  // no splits: one part
  std::vector<PackedData> packed = device
                                       ? gpu::split_and_pack(table.view(), whole, br_, br_.stream())
                                       : split_and_pack(table.view(), whole, br_);
  if (device) br_.stream().synchronize();  // the payload is complete before the table goes
  table = Table();
  push(std::move(packed.front()));
}

void SpillableTables::push(PackedData&& packed) {
  SPILLWAY_EXPECTS(packed.payload != nullptr, "SpillableTables::push: a chunk without a payload");
  const std::size_t bytes = packed.payload->size();
  Held h{store_.insert(std::move(packed.payload)), std::move(packed.metadata), bytes};
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

std::optional<Table> SpillableTables::pop(MemoryType to) {
  SPILLWAY_EXPECTS(to == MemoryType::HOST || to == MemoryType::DEVICE,
                   "SpillableTables::pop: into HOST or DEVICE, not " + std::string(to_string(to)));
  std::optional<Held> h = take();
  if (!h) return std::nullopt;
  std::unique_ptr<Buffer> payload;
  try {
    payload = store_.extract(h->key, to);  // moved up first, with spilling
  } catch (...) {                          // it stays kept, at the front
    std::lock_guard lock(mutex_);
    held_.push_front(std::move(*h));
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
  return PackedData{std::move(h->metadata), store_.extract(h->key)};
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
