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

#include <spillway/comm/communicator.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/shuffle/partition_owner.hpp>
#include <spillway/table/packed_data.hpp>

#include <chrono>
#include <memory>
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
  /// A local partition whose chunks have all arrived and that wait_any has not returned yet.
  /// @throws spillway::comm_error on timeout or when the shuffle failed (a peer, a transfer);
  ///         spillway::logic_error when every local partition was returned already
  PartID wait_any(std::chrono::milliseconds timeout);
  /// Hands over a complete partition's chunks (in no particular order).
  /// @throws spillway::logic_error when it is not local, not complete or already extracted
  std::vector<PackedData> extract(PartID pid);

  /// The partitions this rank owns.
  [[nodiscard]] const std::vector<PartID>& local_partitions() const noexcept;
  /// Whether every local partition has been extracted.
  [[nodiscard]] bool finished() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace spillway
