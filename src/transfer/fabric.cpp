// The libfabric backend: FI_EP_RDM endpoints of a provider chosen by name (tcp, shm, verbs,
// efa, sockets), each driven by a thread of its own (a Lane, detail/fabric_lane.hpp), so that
// the engine's worker never enters the provider.
//
// tcp, verbs, efa and sockets: one endpoint for every peer. shm: an endpoint per peer. shm
// keeps spin locks in the memory it shares with a peer, and a peer killed (or stopped) while it
// holds one leaves every call on that memory spinning for ever: with one endpoint for all,
// one dead peer stopped the transfers to every other. Each pair of engines therefore meets on
// a pair of endpoints of its own, named after both: engine A's endpoint for B is "A.B", B's
// for A is "B.A", where A and B are the names in the engines' metadata. A side adds its peer's
// endpoint to its address vector, and posts to it, only once the peer has said that it is
// there (a backend message): libfabric 1.17's shm keeps a name added before its region exists
// unmapped, and then crashed on that peer's first message.
// Regions are registered on every endpoint with their ids as keys, so that the key a region
// was exported with holds on each.

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>

#include "transfer/detail/backend.hpp"
#include "transfer/detail/fabric_lane.hpp"

#include <unistd.h>

#include <array>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <vector>

namespace spillway::transfer::detail {

bool fabric_compiled() noexcept {
  return true;
}

namespace {

/// The message that says "my endpoint for you is there" (shm).
constexpr std::array<std::uint8_t, 1> kReady{'R'};

class FabricBackend final : public Backend {
 public:
  FabricBackend(BackendHost& host, const EngineOptions& options)
      : host_{host}, per_peer_{options.provider == "shm"} {
    base_.provider = options.provider;
    base_.address = options.address;
    base_.tx_queue_depth = options.tx_queue_depth;
    base_.requested_keys = per_peer_;
    if (per_peer_) {
      // A name of its own: shm names its region "<pid>:<domain>:<endpoint>" unless told
      // otherwise, and a process killed with one open leaves it in /dev/shm, so that a later
      // process with the same pid failed fi_enable with EBUSY.
      std::random_device rd;
      std::ostringstream name;
      name << "sw" << ::getpid() << '-' << std::hex << ((std::uint64_t{rd()} << 32) | rd());
      base_.name = name.str();
    }
    // The one endpoint of every peer; with shm the endpoint that regions are registered on
    // first (their keys checked there), which no peer writes to: it needs no thread.
    LaneOptions shared = base_;
    shared.threaded = !per_peer_;
    shared_ = std::make_unique<Lane>(host_, shared);
  }

  [[nodiscard]] std::string name() const override { return "libfabric/" + base_.provider; }
  [[nodiscard]] std::vector<std::uint8_t> address() const override {
    if (!per_peer_) return shared_->address();
    return {base_.name.begin(), base_.name.end()};
  }

  void register_region(RegionRecord& record) override {
    const LaneKey key = shared_->register_region(record.region);
    std::lock_guard lock(mutex_);
    for (auto& [handle, peer] : peers_) {
      try {
        peer.lane->register_region(record.region);
      } catch (const comm_error& e) {  // a lane stuck in the provider: its peer is gone
        SPILLWAY_LOG(warn, std::string("transfer: ") + e.what());
      }
    }
    regions_[record.region.id] = record.region;
    record.key = key.key;
    record.address = key.address;
  }

  void deregister_region(RegionRecord& record) noexcept override {
    shared_->deregister_region(record.region.id);
    std::lock_guard lock(mutex_);
    for (auto& [handle, peer] : peers_) peer.lane->deregister_region(record.region.id);
    regions_.erase(record.region.id);
  }

  std::uint64_t add_peer(std::span<const std::uint8_t> address) override {
    // Addresses differ in length by provider (a sockaddr for tcp, a name for shm).
    SPILLWAY_EXPECTS(!address.empty() && address.size() <= 1024,
                     "libfabric: a peer address of " + std::to_string(address.size()) +
                         " bytes (1 to 1024 expected)",
                     corrupt_data_error);
    if (!per_peer_) return shared_->add_peer(address);
    const std::string theirs(address.begin(), address.end());
    SPILLWAY_EXPECTS(theirs.find_first_of(std::string("\0./", 3)) == std::string::npos,
                     "libfabric/shm: a peer name with '.', '/' or NUL in it", corrupt_data_error);
    LaneOptions o = base_;
    o.name = base_.name + "." + theirs;
    o.one_peer = true;
    auto lane = std::make_unique<Lane>(host_, o);
    std::lock_guard lock(mutex_);
    for (const auto& [id, region] : regions_) lane->register_region(region);
    const std::uint64_t handle = next_handle_++;
    peers_.emplace(handle, PeerLane{std::move(lane), theirs + "." + base_.name});
    return handle;
  }

  void remove_peer(std::uint64_t backend_peer) noexcept override {
    if (!per_peer_) {
      shared_->remove_peer(backend_peer);
      return;
    }
    // The whole endpoint goes (shm's fi_av_remove unmaps the peer's memory while its queue
    // still refers to it, and a later fi_cq_read faulted), once its thread has stopped: the
    // engine's worker, which calls this, does not wait for it. A lane stuck on the dead
    // peer's lock waits for the backend's end, which leaves it behind.
    std::lock_guard lock(mutex_);
    const auto it = peers_.find(backend_peer);
    if (it == peers_.end()) return;
    it->second.lane->retire();
    retired_.push_back({std::move(it->second.lane), Clock::now(), false});
    peers_.erase(it);
  }

  void post(std::shared_ptr<Op> op) override {
    if (!per_peer_) {
      shared_->post(std::move(op));
      return;
    }
    std::lock_guard lock(mutex_);
    const auto it = peers_.find(op->backend_peer);
    if (it == peers_.end()) {
      op->ticket->finish(Status::peer_gone, "libfabric/shm: the peer was removed");
      return;
    }
    it->second.lane->post(std::move(op));
  }

  void peer_added(std::uint64_t backend_peer) override {
    if (per_peer_) host_.send_to_peer(backend_peer, kReady);  // its endpoint for this peer is there
  }

  void on_message(std::uint64_t backend_peer, std::span<const std::uint8_t> body) override {
    SPILLWAY_EXPECTS(per_peer_ && body.size() == 1 && body[0] == kReady[0],
                     "libfabric: a backend message of " + std::to_string(body.size()) +
                         " bytes that is not the peer's ready",
                     corrupt_data_error);
    std::lock_guard lock(mutex_);
    const auto it = peers_.find(backend_peer);
    if (it == peers_.end()) return;
    const std::string& to = it->second.endpoint;  // its address: the name, with its NUL
    it->second.lane->start_posting(
        std::span(reinterpret_cast<const std::uint8_t*>(to.c_str()), to.size() + 1));
  }

  /// The lanes' threads post and poll. Here, on the engine's worker: retired lanes whose
  /// threads have stopped go, and one still running a second after it was told to stop (stuck
  /// in the provider: it would spin for ever) is moved to idle priority.
  bool progress() override {
    if (!per_peer_) return false;
    const auto now = Clock::now();
    std::lock_guard lock(mutex_);
    std::erase_if(retired_, [](const Retired& r) { return r.lane->stopped(); });
    for (Retired& r : retired_) {
      if (!r.demoted && now - r.since > std::chrono::seconds(1)) {
        r.lane->demote();
        r.demoted = true;
      }
    }
    return false;
  }
  [[nodiscard]] bool self_driven() const override { return true; }

  [[nodiscard]] EngineCounters counters() const override {
    EngineCounters c;
    shared_->add_counters(c);
    std::lock_guard lock(mutex_);
    for (const auto& [handle, peer] : peers_) peer.lane->add_counters(c);
    return c;
  }

 private:
  struct PeerLane {
    std::unique_ptr<Lane> lane;
    std::string endpoint;  // the name of the peer's endpoint for this engine
  };

  BackendHost& host_;
  const bool per_peer_;
  LaneOptions base_;
  std::unique_ptr<Lane> shared_;
  mutable std::mutex mutex_;  // over peers_ and regions_
  std::map<std::uint64_t, PeerLane> peers_;
  struct Retired {
    std::unique_ptr<Lane> lane;
    Clock::time_point since;  // told to stop
    bool demoted;
  };
  std::vector<Retired> retired_;  // lanes of peers that are gone
  std::map<std::uint64_t, Region> regions_;
  std::uint64_t next_handle_{0};
};

}  // namespace

std::unique_ptr<Backend> make_fabric_backend(BackendHost& host, const EngineOptions& options) {
  return std::make_unique<FabricBackend>(host, options);
}

}  // namespace spillway::transfer::detail
