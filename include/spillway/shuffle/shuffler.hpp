#pragma once
/// @file shuffler.hpp
/// The out-of-core all-to-all shuffle of packed partitions between the ranks of a communicator.
///
/// Each rank inserts packed chunks of any partition (many times, as data streams in), then
/// calls insert_finished(). Chunks of partitions owned by other ranks are sent from the
/// communicator's progress thread (a small metadata message, then the payload); the receiver
/// reserves the payload where there is room (DEVICE, else PINNED_HOST, else HOST: data lands
/// on the host instead of evicting the GPU) and posts the receive, once this rank has joined
/// the shuffle (its first insert() or insert_finished()): until then its memory belongs to
/// the work that makes its input, and peers' chunks wait where they are. Finish messages carry how
/// many chunks each rank sent for each partition, so a rank knows when a partition is
/// complete. Chunks waiting to be sent and chunks received but not yet extracted are
/// spillable (SpillableStore). Several shuffles with different op ids can share a
/// communicator. Destroy a Shuffler before its communicator.
///
/// Direct chunks. A rank that has all its input at once can hand it over with one of the
/// insert_finished overloads that take data: a chunk of fixed-width columns without validity
/// masks then goes straight from the sender's memory into the owner's final buffer of the
/// partition, laid out as the concatenation of every rank's chunk in rank order. Nothing is
/// packed for it, nothing is concatenated after the last byte arrives, and extract() hands the
/// partition over as that one chunk (which unpacks without a copy). The owner allocates the
/// final buffer once every rank has finished inserting (it then knows the sizes), in the first
/// tier with room, as for any chunk; the sender's memory stays in use until its columns have
/// gone.

#include <spillway/comm/communicator.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/shuffle/partition_owner.hpp>
#include <spillway/table/hashing.hpp>
#include <spillway/table/packed_data.hpp>
#include <spillway/table/table.hpp>

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace spillway {

class Shuffler {
 public:
  /// @throws spillway::logic_error for no partitions
  Shuffler(Communicator& comm, OpID op_id, PartID total_partitions, BufferResource& br,
           PartitionOwner owner = partition_owner::round_robin);
  /// After insert_finished(), first waits (up to the communicator's timeout) until this rank's
  /// chunks have been sent and its partitions have arrived; then stops its progress function.
  /// A shuffle abandoned before insert_finished() stops at once and sends nothing more.
  ~Shuffler();
  Shuffler(const Shuffler&) = delete;
  Shuffler& operator=(const Shuffler&) = delete;

  /// Takes packed chunks of any partitions. @throws spillway::logic_error for a partition id
  /// out of range, a chunk without payload, or an insert after insert_finished()
  void insert(std::unordered_map<PartID, PackedData>&& chunks);
  /// No more inserts from this rank.
  void insert_finished();
  /// insert(chunks) then insert_finished(), except that each chunk of fixed-width columns
  /// without masks is sent as a direct chunk (see above). The others go as insert() sends them.
  /// @throws spillway::logic_error as insert() and insert_finished() do;
  ///         spillway::corrupt_data_error for metadata that does not describe its payload
  void insert_finished(std::unordered_map<PartID, PackedData>&& chunks);
  /// This rank's whole input as one table whose rows are grouped by partition: partition p is
  /// rows [offsets[p], offsets[p + 1]), so `offsets` has total_partitions + 1 entries, from 0
  /// to the row count, never decreasing. Every partition's rows go as a direct chunk read
  /// straight from the table's columns, which must be fixed-width without masks (pack other
  /// tables with split_and_pack and use the overload above); `table` is held until they have
  /// gone. Then insert_finished(). Queued writes into the table must be done or on the
  /// buffer resource's stream.
  /// @throws spillway::logic_error for other columns, bad offsets, or a call after
  ///         insert_finished()
  void insert_finished(std::shared_ptr<const Table> table, std::span<const std::size_t> offsets);
  /// This rank's whole input, hash-partitioned here on `keys` into the total partitions (the
  /// partitions of partition_and_pack with `seed`), then insert_finished(). A table in device
  /// memory of fixed-width columns without masks is partitioned a column at a time
  /// (gpu::PartitionPlan) into buffers its partitions go from as direct chunks: each column is
  /// on its way as soon as it is placed, while the next ones are placed, and each input column
  /// is freed once placed, so the input and its partitioned copy take about one table's
  /// memory, not two. Other tables are packed (partition_and_pack, on the GPU for device
  /// memory) and inserted as insert_finished(chunks) does. Queued writes into the table must
  /// be done or on the buffer resource's stream.
  /// @throws spillway::logic_error for bad keys or a call after insert_finished() (the table
  ///         is left with the caller); spillway::out_of_memory when a group's buffers find no
  ///         room even after spilling (the table is then consumed and the shuffle unusable)
  void insert_finished(Table&& table, std::span<const std::size_t> keys,
                       std::uint32_t seed = default_hash_seed);
  /// A local partition whose chunks have all arrived and that wait_any has not returned yet.
  /// @throws spillway::comm_error on timeout or when the shuffle failed (a peer, a transfer);
  ///         spillway::logic_error when every local partition was returned already
  PartID wait_any(std::chrono::milliseconds timeout);
  /// wait_any, but nullopt when no partition completed within `timeout` (for a caller that
  /// waits in slices, to answer a signal in between). Errors throw as for wait_any.
  std::optional<PartID> try_wait_any(std::chrono::milliseconds timeout);
  /// Why the shuffle cannot go on, for a caller whose step ran out of memory: a transfer with a
  /// dead peer (a receive it will never fill, a send it will never take) holds its buffer for
  /// ever, and that peer is then the cause to report. The shuffle's failure if it has one;
  /// else, while transfers are in flight, waits until the oldest has been in flight for
  /// `timeout` (a comm_error naming it and its peer), has completed (the next oldest is waited
  /// for), or none is left (nullptr). Waits at most `timeout`.
  [[nodiscard]] std::exception_ptr failure(std::chrono::milliseconds timeout) const;
  /// Where the shuffle stands, for an error message: how many ranks finished inserting, the
  /// chunks still to send, and the incomplete local partitions with their chunks so far.
  [[nodiscard]] std::string status() const;
  /// Hands over a complete partition's chunks (in no particular order).
  /// @throws spillway::logic_error when it is not local, not complete or already extracted
  std::vector<PackedData> extract(PartID pid);

  /// A complete partition as one table in `to` memory, for a consumer that takes partitions
  /// one at a time while the rest wait spillable: extract()'s chunks unpacked and concatenated
  /// there (HOST: on the CPU, a chunk spilled to disk or landed on the GPU read into host
  /// memory; DEVICE: on the GPU, on the buffer resource's stream). A partition no rank had rows
  /// of is a table without columns.
  /// @throws as extract(); spillway::out_of_memory when `to` cannot hold it even after
  ///         spilling; spillway::logic_error for another tier
  Table extract_table(PartID pid, MemoryType to);
  /// The partitions this rank owns.
  [[nodiscard]] const std::vector<PartID>& local_partitions() const noexcept;
  /// Whether every local partition has been extracted.
  [[nodiscard]] bool finished() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace spillway
