#pragma once
/// @file spillable_tables.hpp
/// Tables kept spillable until they are taken: a consumer that holds many chunks (a join's
/// output, the groups of many partitions, a shuffle's kept output partitions) beyond its
/// memory keeps them here, in a SpillableStore, and the tiers move them down to disk when
/// another step needs the memory.

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/memory/spillable_store.hpp>
#include <spillway/table/packed_data.hpp>
#include <spillway/table/table.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace spillway {

/// A first-in first-out queue of tables, each held in a SpillableStore of the buffer resource:
/// a table as its columns' own buffers (no copy: it is spillable from the moment it is pushed,
/// and takes no more memory than it did), a packed table as its payload. Thread-safe.
class SpillableTables {
 public:
  /// @param priority the store's spill priority (higher spills first)
  explicit SpillableTables(BufferResource& br, int priority = 0);

  /// Keeps `table`'s buffers as they are, in whatever tier they are (the table is left empty).
  /// A table whose columns share one block (gpu::concat's output) frees that block only once
  /// all of them have spilled. Queued writes into the table must be on the resource's stream
  /// or done.
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
  /// none is kept. A table pushed unpacked is brought into the tier it was pushed from (DEVICE
  /// or HOST) and packed there.
  /// @throws spillway::out_of_memory as pop() does
  std::optional<PackedData> pop_packed();

  /// Frees every table kept, in whatever tier it is (nothing is moved).
  void clear();

  /// Tables kept.
  [[nodiscard]] std::size_t size() const;
  /// Bytes of the oldest table (its payload, or its buffers); nullopt when none is kept.
  [[nodiscard]] std::optional<std::size_t> front_bytes() const;
  /// Bytes of the tables kept that are in tier `t` right now.
  [[nodiscard]] std::size_t bytes_in(MemoryType t) const;

 private:
  /// A column kept unpacked: its data, offsets and mask buffers' keys (absent: no such buffer).
  struct HeldColumn {
    DataType type;
    std::size_t rows{0};
    std::array<std::optional<SpillableStore::Key>, 3> keys;
  };
  /// A packed table (`payload` and `metadata`) or a table's columns (`columns`, `names`).
  struct Held {
    std::size_t bytes{0};
    std::optional<SpillableStore::Key> payload;
    std::vector<std::uint8_t> metadata;
    std::vector<HeldColumn> columns;
    std::vector<std::string> names;
    bool from_device{false};
  };

  /// The oldest, taken off the queue; nullopt when none.
  std::optional<Held> take();
  /// `h` back at the front of the queue.
  void put_back(Held&& h);
  /// The table of columns `h`, its buffers moved up into `to`. If one cannot be, those
  /// already up go back into the store, `h` goes back to the front, and this throws.
  Table columns_of(Held&& h, MemoryType to);

  BufferResource& br_;
  mutable std::mutex mutex_;
  std::deque<Held> held_;
  SpillableStore store_;
};

}  // namespace spillway
