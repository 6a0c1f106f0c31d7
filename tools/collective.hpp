#pragma once
/// @file collective.hpp
/// The benchmarks' collectives over a communicator's small messages (op id 0xFFFF, one stage
/// per round): allgather of everyone's figures, gather to rank 0 of what only it needs (the
/// per-partition checksums, the statistics for the JSON), broadcast of its verdict.

#include <spillway/comm/communicator.hpp>
#include <spillway/core/error.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace spillway::tools {

/// Collectives over the communicator's small messages (op id 0xFFFF, one stage per round).
class Collective {
 public:
  explicit Collective(Communicator& comm) : comm_{comm} {}

  /// Every rank gets every rank's bytes.
  std::vector<std::vector<std::uint8_t>> allgather(const std::vector<std::uint8_t>& mine) {
    const Tag tag = next_tag();
    const int n = comm_.nranks();
    std::vector<std::vector<std::uint8_t>> all(static_cast<std::size_t>(n));
    all[static_cast<std::size_t>(comm_.rank())] = mine;
    for (Rank r = 0; r < n; ++r) {
      if (r != comm_.rank()) comm_.send_message(mine, r, tag);
    }
    for_each_message(tag, n - 1, [&](std::vector<std::uint8_t>& b, Rank from) {
      all[static_cast<std::size_t>(from)] = std::move(b);
    });
    comm_.barrier();  // nobody starts the next round before all have this one
    return all;
  }

  /// Rank 0 gets every rank's bytes, one message at a time through fn(bytes, source rank),
  /// its own first; the others send theirs.
  template <typename Fn>
  void gather(const std::vector<std::uint8_t>& mine, Fn&& fn) {
    const Tag tag = next_tag();
    if (comm_.rank() != 0) {
      comm_.send_message(mine, 0, tag);
      comm_.barrier();
      return;
    }
    std::vector<std::uint8_t> own = mine;
    fn(own, comm_.rank());
    for_each_message(tag, comm_.nranks() - 1, fn);
    comm_.barrier();
  }

  /// Rank 0's bytes, on every rank.
  std::vector<std::uint8_t> broadcast(const std::vector<std::uint8_t>& from_root) {
    const Tag tag = next_tag();
    if (comm_.rank() == 0) {
      for (Rank r = 1; r < comm_.nranks(); ++r) comm_.send_message(from_root, r, tag);
      comm_.barrier();
      return from_root;
    }
    std::vector<std::uint8_t> got;
    for_each_message(tag, 1,
                     [&](std::vector<std::uint8_t>& b, Rank /*from*/) { got = std::move(b); });
    comm_.barrier();  // as allgather: the next round's messages cannot meet this one's
    return got;
  }

 private:
  Tag next_tag() { return Tag{0xFFFF, static_cast<std::uint8_t>(round_++ & 0xFF)}; }

  /// Hands `count` messages of `tag` to fn(bytes, source) as they come.
  /// @throws spillway::comm_error when they have not all come within the timeout
  template <typename Fn>
  void for_each_message(Tag tag, int count, Fn&& fn) {
    const auto deadline = std::chrono::steady_clock::now() + comm_.timeout();
    for (int got = 0; got < count;) {
      if (auto m = comm_.recv_any(tag)) {
        fn(m->data, m->source);
        ++got;
      } else if (std::chrono::steady_clock::now() > deadline) {
        throw comm_error(comm_.logger().prefix() + "no figures from " +
                         std::to_string(count - got) + " rank(s) within the timeout");
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  Communicator& comm_;
  unsigned round_{0};
};

}  // namespace spillway::tools
