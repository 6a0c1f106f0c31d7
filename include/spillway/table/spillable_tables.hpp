#pragma once
/// @file spillable_tables.hpp
/// Tables kept spillable until they are taken: a consumer that holds many chunks (a join's
/// output, the groups of many partitions) beyond its memory keeps them here, packed in a
/// SpillableStore, and the tiers move them down to disk when another step needs the memory.

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/memory/spillable_store.hpp>
#include <spillway/table/packed_data.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace spillway {

/// A first-in first-out queue of tables, each held as one packed payload in a SpillableStore
/// of the buffer resource. Thread-safe.
class SpillableTables {
 public:
  /// @param priority the store's spill priority (higher spills first)
  explicit SpillableTables(BufferResource& br, int priority = 0);

  /// Packs `table` (on the GPU, on the resource's stream, for a table in device memory, whose
  /// payload then starts in DEVICE memory) and keeps it; the table is freed.
  /// @throws spillway::out_of_memory when the packed copy finds no room even after spilling
  void push(Table&& table);
  /// Keeps a table packed already (a shuffle's chunk, say), its payload in whatever tier it is.
  /// @throws spillway::logic_error for a chunk without a payload
  void push(PackedData&& packed);
  /// The oldest table kept, its payload moved up into `to` (HOST or DEVICE, spilling others to
  /// make room) and viewed there without a copy (DEVICE: valid on the resource's stream);
  /// nullopt when none is kept.
  /// @throws spillway::logic_error for another tier; spillway::out_of_memory when `to` cannot
  ///         hold it even after spilling (it then stays kept, still the oldest)
  std::optional<Table> pop(MemoryType to);

  /// The oldest table kept as it is held, its payload in whatever tier it is now; nullopt when
  /// none is kept.
  std::optional<PackedData> pop_packed();

  /// Tables kept.
  [[nodiscard]] std::size_t size() const;
  /// Bytes of the oldest table's payload; nullopt when none is kept.
  [[nodiscard]] std::optional<std::size_t> front_bytes() const;
  /// Bytes of the packed tables kept that are in tier `t` right now.
  [[nodiscard]] std::size_t bytes_in(MemoryType t) const;

 private:
  struct Held {
    SpillableStore::Key key;
    std::vector<std::uint8_t> metadata;
    std::size_t bytes;
  };

  /// The oldest, taken off the queue; nullopt when none.
  std::optional<Held> take();

  BufferResource& br_;
  mutable std::mutex mutex_;
  std::deque<Held> held_;
  SpillableStore store_;
};

}  // namespace spillway
