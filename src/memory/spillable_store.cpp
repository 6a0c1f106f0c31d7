#include <spillway/memory/spillable_store.hpp>

#include <spillway/core/error.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include "core/detail/nvtx.hpp"

namespace spillway {

SpillableStore::SpillableStore(BufferResource& br, int priority)
    : br_{br},
      handle_{br.spill_manager(),
              [this](MemoryType tier, std::size_t bytes) { return spill(tier, bytes); }, priority} {
}

SpillableStore::~SpillableStore() {
  handle_.reset();
}

SpillableStore::Key SpillableStore::insert(std::unique_ptr<Buffer> buf) {
  SPILLWAY_EXPECTS(buf != nullptr, "cannot insert a null buffer");
  // The store may keep the buffer longer than the caller's stream lives.
  buf->set_stream(br_.stream());
  std::lock_guard lock(mutex_);
  const Key k = next_key_++;
  entries_.emplace(k, Entry{std::move(buf), false});
  return k;
}

std::unique_ptr<Buffer> SpillableStore::extract(Key key, std::optional<MemoryType> target) {
  SPILLWAY_NVTX_RANGE("extract from a spillable store");
  std::unique_ptr<Buffer> buf;
  {
    std::unique_lock lock(mutex_);
    auto it = entries_.find(key);
    SPILLWAY_EXPECTS(it != entries_.end(), "no buffer with key " + std::to_string(key));
    cv_.wait(lock, [&] { return !it->second.busy; });
    buf = std::move(it->second.buf);
    entries_.erase(it);
  }
  if (target && *target != buf->mem_type()) {
    try {
      auto moved = br_.move(std::move(buf), *target);
      return moved;
    } catch (...) {
      // The move failed and left the buffer with us: keep it in the store, nothing is lost.
      std::lock_guard lock(mutex_);
      entries_.emplace(key, Entry{std::move(buf), false});
      throw;
    }
  }
  return buf;
}

std::size_t SpillableStore::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

std::vector<SpillableStore::Key> SpillableStore::keys() const {
  std::lock_guard lock(mutex_);
  std::vector<Key> out;
  out.reserve(entries_.size());
  for (const auto& [k, e] : entries_) out.push_back(k);
  return out;
}

std::size_t SpillableStore::bytes_in(MemoryType t) const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [k, e] : entries_) {
    if (e.buf && e.buf->mem_type() == t) n += e.buf->size();
  }
  return n;
}

std::size_t SpillableStore::spill(MemoryType tier, std::size_t bytes) {
  std::size_t freed = 0;
  while (freed < bytes) {
    Key key{};
    std::unique_ptr<Buffer> buf;
    {
      std::lock_guard lock(mutex_);
      for (auto& [k, e] : entries_) {  // oldest first
        if (!e.busy && e.buf && e.buf->mem_type() == tier) {
          key = k;
          e.busy = true;
          buf = std::move(e.buf);
          break;
        }
      }
    }
    if (!buf) break;
    const std::size_t n = buf->size();
    bool moved = false;
    auto put_back = [&] {
      std::lock_guard lock(mutex_);
      auto& e = entries_.at(key);
      e.buf = std::move(buf);
      e.busy = false;
      cv_.notify_all();
    };
    try {
      // No lock is held here: the move may reserve memory and so spill this store again.
      moved = br_.spill_down(buf);
    } catch (...) {
      put_back();
      throw;
    }
    put_back();
    if (!moved) break;
    freed += n;
  }
  return freed;
}

}  // namespace spillway
