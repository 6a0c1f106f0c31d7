#pragma once
// One endpoint of the libfabric backend and the thread that drives it (internal).
//
// A lane owns a whole libfabric stack (fabric, domain, completion queue, address vector,
// endpoint, its own registration of every region) and a thread that alone posts and polls it.
// Registrations and address inserts from other threads wait for the lane's lock a bounded
// time. A provider call that never returns (shm spins for ever on a lock that a killed peer
// held in memory they shared) stops only its own lane: the engine's worker, which keeps
// deadlines and finds dead peers, never enters the provider, and the backend gives shm a lane
// per peer, so that a dead peer's lane holds up no other. A lane stuck so is left behind at
// its end, with everything its thread uses, and its thread at idle priority.

#include "transfer/detail/backend.hpp"
#include "transfer/detail/fabric_endpoint.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace spillway::transfer::detail {

class LaneState;

class Lane {
 public:
  /// Opens the endpoint and starts its thread. @throws spillway::comm_error naming the call
  Lane(BackendHost& host, const LaneOptions& options);
  /// Stops the thread and closes the endpoint; a thread that does not come back from the
  /// provider within a second is left behind, with the lane's state, and logged.
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  /// The endpoint's address (fi_getname).
  [[nodiscard]] std::vector<std::uint8_t> address() const;
  /// Registers `region` (with the key region.id where keys are requested).
  /// @throws spillway::logic_error for device memory the provider cannot take;
  ///         spillway::comm_error when the provider refuses or the lane is stuck in it
  LaneKey register_region(const Region& region);
  /// Forgets the region (nothing when the lane is stuck).
  void deregister_region(std::uint64_t region_id) noexcept;
  /// The handle of the peer at `address`. @throws spillway::comm_error
  std::uint64_t add_peer(std::span<const std::uint8_t> address);
  /// Removes the peer from the address vector (not for shm, which faults later: see there).
  void remove_peer(std::uint64_t backend_peer) noexcept;
  /// Queues the op for the lane's thread, which finishes its ticket.
  void post(std::shared_ptr<Op> op);
  /// The peer of a lane of one peer is at `address`, its endpoint there: what is queued goes.
  /// @throws spillway::comm_error
  void start_posting(std::span<const std::uint8_t> address);
  /// Adds the lane's counts to `c`.
  void add_counters(EngineCounters& c) const;
  /// Tells the thread to stop, without waiting (the lane of a peer that is gone, destroyed
  /// later); what it still holds ends with it.
  void retire() noexcept;
  /// Whether the thread has stopped (a retired lane that can go without a wait).
  [[nodiscard]] bool stopped() const noexcept;
  /// Runs the thread at idle priority (SCHED_IDLE): one that spins in the provider for ever
  /// then takes only CPU time nothing else wants.
  void demote() noexcept;

 private:
  std::shared_ptr<LaneState> state_;
  std::thread thread_;
};

}  // namespace spillway::transfer::detail
