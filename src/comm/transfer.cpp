#include <spillway/comm/transfer.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/hex.hpp>
#include <spillway/core/options.hpp>

#include "comm/detail/transfer_core.hpp"

#include <algorithm>
#include <map>
#include <mutex>

namespace spillway {

namespace {

using namespace std::chrono_literals;
namespace tx = transfer;
using detail::TransferCore;

/// How many transfer communicators this rank of `launch` made before: every rank makes them in
/// the same order, so the count names this one's files in the rendezvous directory.
int use_of(const LaunchInfo& launch) {
  static std::mutex mutex;
  static std::map<std::string, int> uses;
  std::lock_guard lock(mutex);
  return uses[launch.dir + "/" + launch.token + "/" + std::to_string(launch.rank)]++;
}

class TransferCommunicator final : public Communicator {
 public:
  TransferCommunicator(BufferResource& br, const LaunchInfo& launch,
                       const TransferCommOptions& options)
      : Communicator(launch.rank, launch.nranks) {
    const OptionValues& o = options::get();
    tx::EngineOptions host;
    host.backend = options.backend.empty() ? o.transfer_backend : options.backend;
    host.provider = options.provider.empty() ? o.transfer_provider : options.provider;
    host.address = options.address.empty() ? o.transfer_address : options.address;
    host.device = br.device();
    // A killed peer closes its connection at once; silence means a stuck or cut-off one.
    host.peer_timeout = std::min<std::chrono::milliseconds>(timeout(), 30s);
    std::optional<tx::EngineOptions> device;
    if (br.is_live(MemoryType::DEVICE) && br.device() >= 0) {
      device = host;
      device->backend = "cuda_ipc";
    }
    core_ = std::make_shared<TransferCore>(br, rank(), nranks(), logger().prefix(), host, device,
                                           options.ipc_window.value_or(o.transfer_ipc_window));

    const std::string key = "transfer-" + std::to_string(use_of(launch)) + "-";
    const auto [mine, mine_device] = core_->metadata();
    bootstrap::publish(launch, key + std::to_string(rank()), to_hex(mine));
    bootstrap::publish(launch, key + "device-" + std::to_string(rank()), to_hex(mine_device));
    const auto n = static_cast<std::size_t>(nranks());
    std::vector<std::vector<std::uint8_t>> metadata(n), device_metadata(n);
    for (Rank r = 0; r < nranks(); ++r) {
      if (r == rank()) continue;
      const auto i = static_cast<std::size_t>(r);
      metadata[i] = from_hex(bootstrap::lookup(launch, key + std::to_string(r), r, timeout()));
      device_metadata[i] =
          from_hex(bootstrap::lookup(launch, key + "device-" + std::to_string(r), r, timeout()));
    }
    core_->connect(metadata, device_metadata);
    core_->barrier(timeout());
  }

  [[nodiscard]] const char* kind() const noexcept override { return "transfer"; }

 private:
  std::unique_ptr<Future> do_send(std::unique_ptr<Buffer> buffer, Rank dst, Tag tag) override {
    auto r = core_->post_send(buffer.get(), dst, tag);
    return std::make_unique<Future>(std::move(r), std::move(buffer));
  }
  std::unique_ptr<Future> do_recv(Rank src, Tag tag, std::unique_ptr<Buffer> buffer) override {
    auto r = core_->post_recv(buffer.get(), src, tag);
    return std::make_unique<Future>(std::move(r), std::move(buffer));
  }
  void do_send_message(std::vector<std::uint8_t> data, Rank dst, Tag tag) override {
    core_->send_message(std::move(data), dst, tag);
  }
  std::optional<Message> do_recv_any(Tag tag) override { return core_->recv_any(tag); }
  void do_barrier() override { core_->barrier(timeout()); }
  /// A peer the engines report failed (its connection closed, or silent past the peer
  /// timeout) or that sent a bad control message.
  [[nodiscard]] bool do_has_left(Rank peer) const noexcept override {
    try {
      return !core_->death_of(peer).empty();
    } catch (...) {
      return false;  // (no memory for the reason's copy: the transfers' own errors still come)
    }
  }

  std::shared_ptr<TransferCore> core_;
};

}  // namespace

std::unique_ptr<Communicator> make_transfer_communicator(BufferResource& br,
                                                         const LaunchInfo& launch,
                                                         const TransferCommOptions& options) {
  SPILLWAY_EXPECTS(launch.nranks >= 1 && launch.rank >= 0 && launch.rank < launch.nranks,
                   "make_transfer_communicator: rank " + std::to_string(launch.rank) + " of " +
                       std::to_string(launch.nranks));
  return std::make_unique<TransferCommunicator>(br, launch, options);
}

}  // namespace spillway
