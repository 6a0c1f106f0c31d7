// The loopback backend: engines of one process write into each other's registered memory
// directly, for tests and for ranks that are threads. The target's registration is checked on
// every chunk, so a region that is gone or a range outside it is never written.

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>

#include "transfer/detail/backend.hpp"

#include <cstring>
#include <map>
#include <mutex>

namespace spillway::transfer::detail {
namespace {

class LoopbackBackend;

/// The loopback backends of this process, by id.
struct Registry {
  std::mutex mutex;
  std::map<std::uint64_t, LoopbackBackend*> backends;
  std::uint64_t next_id{1};
};

Registry& registry() {
  static Registry r;
  return r;
}

void copy(void* dst, const void* src, std::size_t bytes, bool host_only) {
  if (host_only) {
    std::memcpy(dst, src, bytes);
  } else {
    cuda::memcpy_async(dst, src, bytes, Stream{});
    Stream{}.synchronize();
  }
}

class LoopbackBackend final : public Backend {
 public:
  explicit LoopbackBackend(BackendHost& host) : host_{host} {
    std::lock_guard lock(registry().mutex);
    id_ = registry().next_id++;
    registry().backends[id_] = this;
  }
  ~LoopbackBackend() override {
    std::lock_guard lock(registry().mutex);
    registry().backends.erase(id_);
  }

  [[nodiscard]] std::string name() const override { return "loopback"; }
  [[nodiscard]] std::vector<std::uint8_t> address() const override {
    std::vector<std::uint8_t> out(sizeof(id_));
    std::memcpy(out.data(), &id_, sizeof(id_));
    return out;
  }

  void register_region(RegionRecord& record) override {
    record.key = record.region.id;
    record.address = reinterpret_cast<std::uintptr_t>(record.region.ptr);
    std::lock_guard lock(mutex_);
    regions_[record.region.id] = record.region;
  }
  void deregister_region(RegionRecord& record) noexcept override {
    std::lock_guard lock(mutex_);
    regions_.erase(record.region.id);
  }

  std::uint64_t add_peer(std::span<const std::uint8_t> address) override {
    std::uint64_t id = 0;
    SPILLWAY_EXPECTS(
        address.size() == sizeof(id),
        "loopback peer address of " + std::to_string(address.size()) + " bytes (8 expected)",
        corrupt_data_error);
    std::memcpy(&id, address.data(), sizeof(id));
    std::lock_guard lock(registry().mutex);
    SPILLWAY_EXPECTS(registry().backends.contains(id),
                     "loopback peer " + std::to_string(id) +
                         " is not an engine of this process (loopback works within one)",
                     comm_error);
    return id;
  }
  void remove_peer(std::uint64_t /*backend_peer*/) noexcept override {}

  void post(std::shared_ptr<Op> op) override {
    std::string why;
    {
      std::lock_guard lock(registry().mutex);  // keeps the target alive while copying
      const auto it = registry().backends.find(op->backend_peer);
      if (it == registry().backends.end()) {
        op->ticket->finish(Status::peer_gone, "loopback peer's engine is gone");
        return;
      }
      why = it->second->transfer(*op);
    }
    if (!why.empty()) {
      op->ticket->finish(Status::error, why);
      return;
    }
    ++counters_.chunks_posted;
    op->completed = op->chunks.size();
    if (op->imm) {
      std::lock_guard lock(registry().mutex);
      const auto it = registry().backends.find(op->backend_peer);
      if (it != registry().backends.end()) it->second->host_.deliver_imm(*op->imm);
    }
    op->ticket->finish(Status::ok);
  }
  bool progress() override { return false; }
  [[nodiscard]] EngineCounters counters() const override { return counters_; }

 private:
  /// Moves `op`'s chunks between its local region and this backend's region; an error
  /// message when the target region is not (or no longer) registered or is too small.
  std::string transfer(const Op& op) {
    std::lock_guard lock(mutex_);
    const auto it = regions_.find(op.remote.region_id);
    if (it == regions_.end()) {
      return "target region " + std::to_string(op.remote.region_id) + " is not registered";
    }
    const Region& target = it->second;
    const bool host_only =
        target.type != MemoryType::DEVICE && op.local.region.type != MemoryType::DEVICE;
    auto* remote = static_cast<std::uint8_t*>(target.ptr) + op.remote.offset;
    auto* local = static_cast<std::uint8_t*>(op.local.region.ptr);
    for (const Chunk& c : op.chunks) {
      const std::size_t remote_at = op.is_read ? c.src_offset : c.dst_offset;
      const std::size_t local_at = op.is_read ? c.dst_offset : c.src_offset;
      if (op.remote.offset + remote_at + c.length > target.bytes) {
        return "chunk at " + std::to_string(remote_at) + " of " + std::to_string(c.length) +
               " bytes is outside the target's region of " + std::to_string(target.bytes);
      }
      if (op.is_read) {
        copy(local + local_at, remote + remote_at, c.length, host_only);
      } else {
        copy(remote + remote_at, local + local_at, c.length, host_only);
      }
    }
    return {};
  }

  BackendHost& host_;
  std::uint64_t id_{0};
  std::mutex mutex_;
  std::map<std::uint64_t, Region> regions_;
  EngineCounters counters_;
};

}  // namespace

std::unique_ptr<Backend> make_loopback_backend(BackendHost& host) {
  return std::make_unique<LoopbackBackend>(host);
}

}  // namespace spillway::transfer::detail
