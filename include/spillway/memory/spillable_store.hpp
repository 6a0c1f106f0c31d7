#pragma once
/// @file spillable_store.hpp
/// A keyed collection of buffers that the SpillManager may move down the tiers.

#include <spillway/memory/buffer.hpp>
#include <spillway/memory/spill_manager.hpp>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace spillway {

class BufferResource;

/// Holds buffers until they are extracted and registers a spill function that moves the oldest
/// of them one tier down when their tier is short of memory. A buffer moves back up only when
/// it is extracted into a tier that needs it. Thread-safe: a buffer being spilled is not
/// handed out until its move has finished.
class SpillableStore {
 public:
  using Key = std::uint64_t;

  /// @param priority the spill function's priority (higher spills first).
  explicit SpillableStore(BufferResource& br, int priority = 0);
  ~SpillableStore();
  SpillableStore(const SpillableStore&) = delete;
  SpillableStore& operator=(const SpillableStore&) = delete;
  SpillableStore(SpillableStore&&) = delete;
  SpillableStore& operator=(SpillableStore&&) = delete;

  /// Takes ownership of `buf` (moving it onto the resource's stream, see Buffer::set_stream);
  /// returns its key. @throws spillway::logic_error for nullptr.
  Key insert(std::unique_ptr<Buffer> buf);
  /// Removes and returns the buffer; when `target` is given and differs from the buffer's tier,
  /// moves it there first (reserving with spilling). @throws spillway::logic_error for an
  /// unknown key, spillway::out_of_memory when the target tier cannot take it (the buffer then
  /// stays in the store under the same key).
  std::unique_ptr<Buffer> extract(Key key, std::optional<MemoryType> target = std::nullopt);

  [[nodiscard]] std::size_t size() const;
  [[nodiscard]] std::vector<Key> keys() const;
  /// Bytes held per tier right now (buffers in the middle of a move are not counted).
  [[nodiscard]] std::size_t bytes_in(MemoryType t) const;

  /// The spill function: moves buffers of `tier` down until `bytes` are freed or none can move.
  std::size_t spill(MemoryType tier, std::size_t bytes);

 private:
  struct Entry {
    std::unique_ptr<Buffer> buf;
    bool busy{false};
  };

  BufferResource& br_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::map<Key, Entry> entries_;
  Key next_key_{0};
  SpillFunctionHandle handle_;  // last: unregistered before the entries go
};

}  // namespace spillway
