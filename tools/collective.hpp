#pragma once
/// @file collective.hpp
/// The benchmarks' collectives over a communicator's small messages (op id 0xFFFF, one stage
/// per round): allgather of everyone's figures, gather to rank 0 of what only it needs (the
/// per-partition checksums, the statistics for the JSON), broadcast of its verdict.

#include <spillway/comm/collectives.hpp>
#include <spillway/comm/communicator.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace spillway::tools {

/// Collectives over the communicator's small messages (op id 0xFFFF, one stage per round).
class Collective {
 public:
  explicit Collective(Communicator& comm) : comm_{comm} {}

  /// Every rank gets every rank's bytes.
  std::vector<std::vector<std::uint8_t>> allgather(const std::vector<std::uint8_t>& mine) {
    auto all = exchange_messages(comm_, next_tag(), mine);
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
    receive_from_each(comm_, tag, others(), [&](Message& m) { fn(m.data, m.source); });
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
    const Rank root = 0;
    receive_from_each(comm_, tag, std::span(&root, 1),
                      [&](Message& m) { got = std::move(m.data); });
    comm_.barrier();  // as allgather: the next round's messages cannot meet this one's
    return got;
  }

 private:
  Tag next_tag() { return Tag{0xFFFF, static_cast<std::uint8_t>(round_++ & 0xFF)}; }

  /// Every rank but this one. (receive_from_each fails at once when one of them has left, so
  /// that a rank that failed does not keep the others waiting out the timeout.)
  std::vector<Rank> others() const {
    std::vector<Rank> out;
    for (Rank r = 0; r < comm_.nranks(); ++r) {
      if (r != comm_.rank()) out.push_back(r);
    }
    return out;
  }

  Communicator& comm_;
  unsigned round_{0};
};

}  // namespace spillway::tools
