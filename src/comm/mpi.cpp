#include <spillway/comm/bootstrap.hpp>
#include <spillway/comm/mpi.hpp>
#include <spillway/comm/mpi_world.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/event.hpp>
#include <spillway/core/options.hpp>
#include <spillway/core/units.hpp>

#include "comm/detail/mpi_ipc.hpp"
#include "comm/detail/mpi_request.hpp"

#include <mpi.h>

#include <cstdlib>
#include <cstring>

#include <array>
#include <climits>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <mutex>
#include <thread>

namespace spillway {

namespace {

using detail::MpiRequest;
using detail::MpiState;
using detail::PostKey;
using detail::start;

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(std::shared_ptr<MpiState> st)
      : Communicator(st->rank, st->size), st_{std::move(st)} {}

  ~MpiCommunicator() override {
    // Small messages still on their way: give them the timeout, then let go.
    const auto deadline = std::chrono::steady_clock::now() + timeout();
    auto pending = [&] {
      std::lock_guard out(outgoing_mutex_);
      return !outgoing_.empty();
    };
    while (pending() && std::chrono::steady_clock::now() < deadline) {
      reap();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    auto g = st_->lock();
    MPI_Comm_free(&st_->comm);
  }

  [[nodiscard]] const char* kind() const noexcept override { return "mpi"; }

 private:
  std::unique_ptr<Future> do_send(std::unique_ptr<Buffer> buffer, Rank dst, Tag tag) override {
    if (buffer->mem_type() == MemoryType::PINNED_HOST) {  // MPI reads it: writes must land
      buffer->wait();
      buffer->stream().synchronize();
    } else if (buffer->mem_type() == MemoryType::DEVICE) {
      buffer->wait();  // then the bounce copies wait for its stream on the GPU
    }
    st_->cancel_wait_ms = timeout().count();
    auto req = start(true, dst, tag, *buffer, st_);
    return std::make_unique<Future>(std::move(req), std::move(buffer));
  }

  std::unique_ptr<Future> do_recv(Rank src, Tag tag, std::unique_ptr<Buffer> buffer) override {
    st_->cancel_wait_ms = timeout().count();
    auto req = start(false, src, tag, *buffer, st_);
    return std::make_unique<Future>(std::move(req), std::move(buffer));
  }

  void do_send_message(std::vector<std::uint8_t> data, Rank dst, Tag tag) override {
    SPILLWAY_EXPECTS(data.size() <= static_cast<std::size_t>(INT_MAX),
                     "send_message: messages are limited to 2 GiB; send a Buffer instead");
    reap();
    std::lock_guard out(outgoing_mutex_);  // several threads send messages
    auto g = st_->lock();
    outgoing_.emplace_back(std::move(data), MPI_REQUEST_NULL);
    auto& [bytes, req] = outgoing_.back();
    SPILLWAY_MPI_TRY(MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, dst,
                               MpiState::message_tag(tag), st_->comm, &req),
                     st_->rank, "MPI_Isend of a message");
  }

  std::optional<Message> do_recv_any(Tag tag) override {
    reap();
    auto g = st_->lock();
    int flag = 0;
    MPI_Status status;
    SPILLWAY_MPI_TRY(
        MPI_Iprobe(MPI_ANY_SOURCE, MpiState::message_tag(tag), st_->comm, &flag, &status),
        st_->rank, "MPI_Iprobe");
    if (flag == 0) return std::nullopt;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    Message m{status.MPI_SOURCE, std::vector<std::uint8_t>(static_cast<std::size_t>(count))};
    SPILLWAY_MPI_TRY(MPI_Recv(m.data.data(), count, MPI_BYTE, status.MPI_SOURCE,
                              MpiState::message_tag(tag), st_->comm, MPI_STATUS_IGNORE),
                     st_->rank, "MPI_Recv of a message");
    return m;
  }

  void do_barrier() override {
    MPI_Request req = MPI_REQUEST_NULL;
    {
      auto g = st_->lock();
      SPILLWAY_MPI_TRY(MPI_Ibarrier(st_->comm, &req), st_->rank, "MPI_Ibarrier");
    }
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout();
    for (;;) {
      int flag = 0;
      {
        auto g = st_->lock();
        SPILLWAY_MPI_TRY(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), st_->rank, "MPI_Test (barrier)");
      }
      if (flag != 0) return;
      MpiRequest::progress_stepped(*st_);  // transfers still on their way need this rank
      const auto now = std::chrono::steady_clock::now();
      if (now > deadline) {
        SPILLWAY_FAIL(logger().prefix() + "barrier timed out after " +
                          std::to_string(timeout().count()) + " ms: a peer is dead or stuck",
                      comm_error);
      }
      if (now - start < std::chrono::milliseconds(2)) {  // as Communicator::wait
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
  }

 private:
  /// Frees the small messages that have been sent.
  void reap() {
    std::lock_guard out(outgoing_mutex_);
    auto g = st_->lock();
    for (auto it = outgoing_.begin(); it != outgoing_.end();) {
      int flag = 0;
      MPI_Test(&it->second, &flag, MPI_STATUS_IGNORE);
      it = flag != 0 ? outgoing_.erase(it) : std::next(it);
    }
  }

  std::shared_ptr<MpiState> st_;
  std::mutex outgoing_mutex_;
  std::list<std::pair<std::vector<std::uint8_t>, MPI_Request>> outgoing_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(BufferResource& br) {
  const MPI_Comm world = mpi::world();
  return make_mpi_communicator(br, &world);
}

std::unique_ptr<Communicator> make_mpi_communicator(BufferResource& br, const void* mpi_comm) {
  SPILLWAY_EXPECTS(mpi_comm != nullptr, "make_mpi_communicator: no MPI communicator");
  int initialized = 0;
  MPI_Initialized(&initialized);
  SPILLWAY_EXPECTS(initialized != 0, "make_mpi_communicator: MPI is not initialized (mpi::init)");
  auto st = std::make_shared<MpiState>();
  int level = 0;
  MPI_Query_thread(&level);
  SPILLWAY_EXPECTS(level >= MPI_THREAD_SERIALIZED,
                   "the MPI communicator needs MPI_THREAD_SERIALIZED or better");
  st->serialize = level < MPI_THREAD_MULTIPLE;
  SPILLWAY_EXPECTS(*static_cast<const MPI_Comm*>(mpi_comm) != MPI_COMM_NULL,
                   "make_mpi_communicator: MPI_COMM_NULL");
  SPILLWAY_MPI_TRY(MPI_Comm_dup(*static_cast<const MPI_Comm*>(mpi_comm), &st->comm), st->rank,
                   "MPI_Comm_dup");
  MPI_Comm_set_errhandler(st->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(st->comm, &st->rank);
  MPI_Comm_size(st->comm, &st->size);
  void* ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);  // set on the world only
  const long tag_ub = found != 0 ? *static_cast<int*>(ub) : 32767;
  SPILLWAY_EXPECTS(  // Tag::value() has 27 bits; two more say what a message is
      tag_ub >= (1L << 29) - 1,
      "this MPI allows tags up to " + std::to_string(tag_ub) + "; spillway needs 2^29 - 1");
  st->br = &br;
  if (br.is_live(MemoryType::DEVICE)) st->stream = OwningStream(/*high_priority=*/true);
  st->ipc = std::make_unique<detail::IpcWindows>(st->comm, st->rank, st->size, br);
  SPILLWAY_LOG(info, "[rank " << st->rank << "] CUDA IPC windows of " << st->ipc->mapped_peers()
                              << " peers mapped");
  return std::make_unique<MpiCommunicator>(std::move(st));
}

}  // namespace spillway
