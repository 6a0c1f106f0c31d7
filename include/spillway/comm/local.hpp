#pragma once
/// @file local.hpp
/// N ranks as threads of one process: the embedded default, no launcher needed. Buffers move
/// by memcpy (host to host) or cudaMemcpyAsync (anything involving a GPU; device to device
/// over NVLink, peer access enabled between all GPUs).

#include <spillway/comm/communicator.hpp>

#include <memory>
#include <vector>

namespace spillway {

namespace detail {
struct LocalHub;
class LocalRequest;
}  // namespace detail

class LocalCommunicator final : public Communicator {
 public:
  /// The communicators of one group of `nranks` ranks: hand element i to the thread of rank i.
  /// Enables peer access between all visible GPUs. @throws spillway::logic_error for nranks < 1
  static std::vector<std::unique_ptr<Communicator>> create(int nranks);
  /// The GPU of rank `rank`: rank % device count (-1 without a GPU).
  static int device_of(Rank rank) noexcept;

  /// Leaves the group: peers waiting on this rank get a comm_error instead of hanging.
  ~LocalCommunicator() override;
  /// Leaves the group now (as the destructor does), for a rank that failed but whose
  /// communicator lives on (a Python object, say). Idempotent.
  void leave() noexcept;

  [[nodiscard]] const char* kind() const noexcept override { return "local"; }

  LocalCommunicator(std::shared_ptr<detail::LocalHub> hub, Rank rank);

 private:
  std::unique_ptr<Future> do_send(std::unique_ptr<Buffer> buffer, Rank dst, Tag tag) override;
  std::unique_ptr<Future> do_recv(Rank src, Tag tag, std::unique_ptr<Buffer> buffer) override;
  void do_send_message(std::vector<std::uint8_t> data, Rank dst, Tag tag) override;
  std::optional<Message> do_recv_any(Tag tag) override;
  void do_barrier() override;
  [[nodiscard]] bool do_has_left(Rank peer) const noexcept override;

  /// Matches `req` with the other side or queues it.
  std::unique_ptr<Future> post(std::shared_ptr<detail::LocalRequest> req,
                               std::unique_ptr<Buffer> buffer);

  std::shared_ptr<detail::LocalHub> hub_;
};

}  // namespace spillway
