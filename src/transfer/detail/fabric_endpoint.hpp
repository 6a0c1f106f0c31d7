#pragma once
// One libfabric RDM endpoint and what it needs (internal): fabric, domain, completion queue,
// address vector, a counter of peers' writes where the provider has one, and the memory
// registered with it; and what the provider said it offers. A lane's (fabric_lane.hpp), which
// calls it from one thread at a time.

#include <spillway/transfer/engine.hpp>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace spillway::transfer::detail {

/// Where a lane's endpoint is: the provider, the address it binds to (tcp, verbs, sockets) or
/// the name of its shared-memory region (shm), and the transmit queue depth asked for (0: the
/// provider's). With `requested_keys` a region's key is its id on every lane (the key it was
/// exported with), else the provider's.
struct LaneOptions {
  std::string provider;
  std::string address;
  std::string name;
  std::size_t tx_queue_depth{0};
  bool requested_keys{false};
  /// A lane of one peer, whose address it takes from start_posting(): until then its
  /// endpoint may not exist, and it posts nothing.
  bool one_peer{false};
  /// Without a thread: a lane that only holds registrations (shm's first endpoint, which no
  /// peer writes to) and would otherwise poll for nothing a thousand times a second.
  bool threaded{true};
};

/// What peers address a region by on a lane.
struct LaneKey {
  std::uint64_t key{0};
  std::uint64_t address{0};
};

/// The most pieces one message carries (tcp and shm offer 4 iovs and 4 RMA iovs in 1.17).
inline constexpr std::size_t kFabricMaxPieces = 8;

/// Throws comm_error naming the call and libfabric's message when `rc` is an error.
void fabric_check(int rc, const char* call);

class FabricEndpoint {
 public:
  /// @throws spillway::comm_error naming the call that failed
  explicit FabricEndpoint(const LaneOptions& o);
  ~FabricEndpoint();
  FabricEndpoint(const FabricEndpoint&) = delete;
  FabricEndpoint& operator=(const FabricEndpoint&) = delete;

  /// Registers `r` (with the key r.id where keys are requested).
  /// @throws spillway::logic_error for device memory without FI_HMEM; spillway::comm_error
  LaneKey register_region(const Region& r);
  void deregister_region(std::uint64_t id) noexcept;
  /// The local descriptor of region `id`'s registration; nullptr when it has none.
  [[nodiscard]] void* desc_of(std::uint64_t id) const noexcept;
  /// @throws spillway::comm_error
  std::uint64_t add_peer(std::span<const std::uint8_t> address);
  void remove_peer(std::uint64_t peer) noexcept;
  /// Whether the thread may sleep on wait_fd now (fi_trywait).
  [[nodiscard]] bool may_sleep() const;

  std::string provider;
  std::vector<std::uint8_t> address;  ///< fi_getname
  fid_ep* ep{nullptr};
  fid_cq* cq{nullptr};
  fid_cntr* written{nullptr};  ///< peers' writes and reads here (FI_RMA_EVENT), or none
  int wait_fd{-1};             ///< the completion queue's, or -1 (polled)
  std::size_t max_msg{0};
  std::size_t iov_per_msg{1};  ///< pieces per message: the provider's iov and rma_iov limits
  std::size_t inject{0};       ///< the provider's inject size
  std::size_t tx_size{1};
  bool ordered{false};            ///< FI_ORDER_WAW
  bool delivery_complete{false};  ///< FI_DELIVERY_COMPLETE

 private:
  void open(const LaneOptions& o);
  void close_all() noexcept;

  bool requested_keys_;
  fi_info* info_{nullptr};
  fid_fabric* fabric_{nullptr};
  fid_domain* domain_{nullptr};
  fid_av* av_{nullptr};
  std::map<std::uint64_t, std::pair<fid_mr*, void*>> mrs_;  // by region id: handle, descriptor
};

}  // namespace spillway::transfer::detail
