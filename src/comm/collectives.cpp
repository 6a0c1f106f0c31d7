// allgather and allreduce over a communicator's transfers and small messages (collectives.hpp).
// Stage 0 of the call's tag carries the small messages (sizes, values), stage 1 the buffers.
#include <spillway/comm/collectives.hpp>

#include <spillway/core/error.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

namespace spillway {

namespace {

/// Holds `op` for one collective call: the call's tags carry this use's generation.
class OpClaim {
 public:
  OpClaim(Communicator& comm, OpID op) : comm_{comm}, op_{op}, generation_{comm.claim_op(op)} {}
  ~OpClaim() { comm_.release_op(op_); }
  OpClaim(const OpClaim&) = delete;
  OpClaim& operator=(const OpClaim&) = delete;
  [[nodiscard]] Tag tag(std::uint8_t stage) const { return Tag{op_, stage, generation_}; }

 private:
  Communicator& comm_;
  OpID op_;
  std::uint8_t generation_;
};

template <typename T>
std::vector<T> reduce(Communicator& comm, OpID op, std::span<const T> values, ReduceOp how) {
  const OpClaim claim(comm, op);
  std::vector<std::uint8_t> mine(values.size_bytes());
  if (!mine.empty()) std::memcpy(mine.data(), values.data(), mine.size());
  const auto all = exchange_messages(comm, claim.tag(0), mine);
  for (std::size_t r = 0; r < all.size(); ++r) {
    SPILLWAY_EXPECTS(all[r].size() == mine.size(),
                     comm.logger().prefix() + "allreduce: rank " + std::to_string(r) + " gave " +
                         std::to_string(all[r].size() / sizeof(T)) + " values, this rank " +
                         std::to_string(values.size()));
  }
  std::vector<T> out(values.size());
  for (std::size_t r = 0; r < all.size(); ++r) {  // in rank order: the same bits everywhere
    for (std::size_t i = 0; i < out.size(); ++i) {
      T v;
      std::memcpy(&v, all[r].data() + i * sizeof(T), sizeof(T));
      if (r == 0) {
        out[i] = v;
      } else if (how == ReduceOp::sum) {
        out[i] += v;
      } else if (how == ReduceOp::min) {
        out[i] = std::min(out[i], v);
      } else {
        out[i] = std::max(out[i], v);
      }
    }
  }
  return out;
}

}  // namespace

void receive_from_each(Communicator& comm, Tag tag, std::span<const Rank> from,
                       const std::function<void(Message&)>& fn) {
  const auto n = static_cast<std::size_t>(comm.nranks());
  std::vector<bool> awaited(n, false);
  for (const Rank r : from) {
    SPILLWAY_EXPECTS(r >= 0 && r < comm.nranks() && r != comm.rank(),
                     "receive_from_each: rank " + std::to_string(r) + " of " +
                         std::to_string(comm.nranks()) + " (this is rank " +
                         std::to_string(comm.rank()) + ")");
    awaited[static_cast<std::size_t>(r)] = true;
  }
  std::size_t missing = static_cast<std::size_t>(std::count(awaited.begin(), awaited.end(), true));
  const auto not_heard = [&] {
    std::string who;
    for (std::size_t r = 0; r < n; ++r) {
      if (awaited[r]) who += (who.empty() ? "" : ", ") + std::to_string(r);
    }
    return comm.logger().prefix() + "collective (" + to_string(tag) + "): nothing from rank(s) " +
           who;
  };
  const auto take = [&](Message& m) {
    const auto src = static_cast<std::size_t>(m.source);
    SPILLWAY_EXPECTS(src < n && awaited[src],
                     comm.logger().prefix() + "a message of " + to_string(tag) + " from rank " +
                         std::to_string(m.source) + ", which was not awaited (a second one?)",
                     comm_error);
    awaited[src] = false;
    --missing;
    fn(m);
  };
  const auto deadline = std::chrono::steady_clock::now() + comm.timeout();
  auto pause = std::chrono::microseconds(1);
  while (missing > 0) {
    if (auto m = comm.recv_any(tag)) {
      take(*m);
      pause = std::chrono::microseconds(1);
      continue;
    }
    // A rank that left has sent all it ever will, before it left: one more look, then an
    // error naming it instead of the rest of the timeout.
    const auto left = std::find_if(from.begin(), from.end(), [&](Rank r) {
      return awaited[static_cast<std::size_t>(r)] && comm.has_left(r);
    });
    if (left != from.end()) {
      if (auto m = comm.recv_any(tag)) {
        take(*m);
        continue;
      }
      SPILLWAY_FAIL(not_heard() + "; rank " + std::to_string(*left) + " left the communicator",
                    comm_error);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      SPILLWAY_FAIL(
          not_heard() + " within the timeout of " + std::to_string(comm.timeout().count()) + " ms",
          comm_error);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(200));
  }
}

std::vector<std::vector<std::uint8_t>> exchange_messages(Communicator& comm, Tag tag,
                                                         const std::vector<std::uint8_t>& mine) {
  std::vector<std::vector<std::uint8_t>> all(static_cast<std::size_t>(comm.nranks()));
  all[static_cast<std::size_t>(comm.rank())] = mine;
  std::vector<Rank> others;
  for (Rank r = 0; r < comm.nranks(); ++r) {
    if (r == comm.rank()) continue;
    comm.send_message(mine, r, tag);
    others.push_back(r);
  }
  receive_from_each(comm, tag, others, [&](Message& m) {
    all[static_cast<std::size_t>(m.source)] = std::move(m.data);
  });
  return all;
}

std::vector<std::unique_ptr<Buffer>> allgather(Communicator& comm, OpID op, const Buffer& mine,
                                               BufferResource& br, MemoryType into) {
  SPILLWAY_EXPECTS(into != MemoryType::DISK, "allgather into DISK (receive into a memory tier)");
  SPILLWAY_EXPECTS(mine.mem_type() != MemoryType::DISK,
                   "allgather of a DISK buffer (move it to a memory tier first)");
  const OpClaim claim(comm, op);
  std::vector<std::uint8_t> size(8);
  const std::uint64_t n = mine.size();
  std::memcpy(size.data(), &n, 8);
  const auto sizes = exchange_messages(comm, claim.tag(0), size);
  const auto nranks = static_cast<std::size_t>(comm.nranks());
  std::vector<std::unique_ptr<Buffer>> out(nranks);
  std::vector<std::unique_ptr<Future>> recvs(nranks);
  std::vector<std::unique_ptr<Future>> sends;
  for (std::size_t r = 0; r < nranks; ++r) {
    if (static_cast<Rank>(r) == comm.rank()) continue;
    SPILLWAY_EXPECTS(
        sizes[r].size() == 8,
        comm.logger().prefix() + "allgather: a malformed size from rank " + std::to_string(r),
        comm_error);
    std::uint64_t bytes = 0;
    std::memcpy(&bytes, sizes[r].data(), 8);
    recvs[r] = comm.recv(static_cast<Rank>(r), claim.tag(1), br.allocate(into, bytes, br.stream()));
  }
  for (std::size_t r = 0; r < nranks; ++r) {
    if (static_cast<Rank>(r) == comm.rank()) continue;
    sends.push_back(
        comm.send(BufferResource::view(mine, 0, mine.size()), static_cast<Rank>(r), claim.tag(1)));
  }
  auto res = br.reserve(into, mine.size());
  out[static_cast<std::size_t>(comm.rank())] = br.copy(mine, res, br.stream());
  for (auto& s : sends) comm.wait(*s);
  for (std::size_t r = 0; r < nranks; ++r) {
    if (!recvs[r]) continue;
    comm.wait(*recvs[r]);
    out[r] = comm.release(std::move(recvs[r]));
  }
  out[static_cast<std::size_t>(comm.rank())]->wait();  // (a copy through the GPU is async)
  return out;
}

std::vector<std::int64_t> allreduce(Communicator& comm, OpID op,
                                    std::span<const std::int64_t> values, ReduceOp how) {
  return reduce(comm, op, values, how);
}
std::vector<std::uint64_t> allreduce(Communicator& comm, OpID op,
                                     std::span<const std::uint64_t> values, ReduceOp how) {
  return reduce(comm, op, values, how);
}
std::vector<double> allreduce(Communicator& comm, OpID op, std::span<const double> values,
                              ReduceOp how) {
  return reduce(comm, op, values, how);
}

}  // namespace spillway
