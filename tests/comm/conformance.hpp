#pragma once
// The conformance suite every communicator passes (test_comm_local runs it on threads,
// test_comm_mpi under mpirun): each case runs on every rank with that rank's communicator and
// BufferResource.

#include <spillway/comm/collectives.hpp>
#include <spillway/comm/communicator.hpp>
#include <spillway/core/error.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include "common.hpp"

#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace spillway::test {

struct CommCase {
  std::string name;
  std::function<void(Communicator&, BufferResource&)> body;
};

/// The memory tiers live in `br` that a communicator moves (not DISK).
inline std::vector<MemoryType> comm_tiers(const BufferResource& br) {
  std::vector<MemoryType> out;
  for (MemoryType t : {MemoryType::DEVICE, MemoryType::PINNED_HOST, MemoryType::HOST}) {
    if (br.is_live(t)) out.push_back(t);
  }
  return out;
}

/// A pattern seed for the buffer `src` sends `dst` as message `i`.
inline std::uint64_t seed_of(Rank src, Rank dst, std::uint64_t i) {
  return (static_cast<std::uint64_t>(src) << 40) ^ (static_cast<std::uint64_t>(dst) << 20) ^ i;
}

/// Posts a receive into a fresh buffer of tier `t`.
inline std::unique_ptr<Future> recv_into(Communicator& comm, BufferResource& br, MemoryType t,
                                         std::size_t n, Rank src, Tag tag) {
  return comm.recv(src, tag, br.allocate(t, n, br.stream()));
}

/// Waits for every future and checks each received buffer against its seed.
inline void wait_and_verify(Communicator& comm, BufferResource& br,
                            std::vector<std::unique_ptr<Future>>& sends,
                            std::vector<std::unique_ptr<Future>>& recvs,
                            const std::vector<std::uint64_t>& seeds) {
  for (auto& f : sends) comm.wait(*f);
  for (std::size_t i = 0; i < recvs.size(); ++i) {
    comm.wait(*recvs[i]);
    auto buf = comm.release(std::move(recvs[i]));
    EXPECT_EQ(verify(br, *buf, seeds[i]), buf->size())
        << comm.logger().prefix() << "receive " << i << " differs";
  }
}

inline std::vector<CommCase> conformance_cases() {
  std::vector<CommCase> cases;

  cases.push_back(
      {"PointToPointInEveryTierCombination", [](Communicator& comm, BufferResource& br) {
         const Rank me = comm.rank();
         const int n = comm.nranks();
         const Rank to = (me + 1) % n;
         const Rank from = (me + n - 1) % n;
         std::uint64_t i = 0;
         for (MemoryType st : comm_tiers(br)) {
           for (MemoryType rt : comm_tiers(br)) {
             for (std::size_t bytes : {std::size_t{1}, std::size_t{3} * MiB + 5, 40 * MiB + 3}) {
               const Tag tag{7, static_cast<std::uint8_t>(i % 256)};
               std::vector<std::unique_ptr<Future>> sends, recvs;
               recvs.push_back(recv_into(comm, br, rt, bytes, from, tag));
               sends.push_back(comm.send(make_in(br, st, bytes, seed_of(me, to, i)), to, tag));
               SCOPED_TRACE(std::string(to_string(st)) + " -> " + std::string(to_string(rt)) +
                            ", " + std::to_string(bytes) + " bytes");
               wait_and_verify(comm, br, sends, recvs, {seed_of(from, me, i)});
               ++i;
             }
           }
         }
       }});

  cases.push_back({"SameTagTransfersArriveInOrder", [](Communicator& comm, BufferResource& br) {
                     // Several multi-piece buffers with one tag in flight at once, the tiers mixed
                     // on both sides: the k-th receive gets the k-th send whole (pieces never cross
                     // transfers).
                     const Rank me = comm.rank();
                     const int n = comm.nranks();
                     const Rank to = (me + 1) % n;
                     const Rank from = (me + n - 1) % n;
                     const auto tiers = comm_tiers(br);
                     const std::size_t count = 4;
                     std::vector<std::unique_ptr<Future>> sends, recvs;
                     std::vector<std::uint64_t> seeds;
                     // Two pieces each (MPI moves 16 MiB per piece), all sizes different.
                     auto bytes = [](std::size_t k) { return 16 * MiB + 1 + k * 4099; };
                     for (std::size_t k = 0; k < count; ++k) {
                       recvs.push_back(recv_into(comm, br, tiers[(k + 1) % tiers.size()], bytes(k),
                                                 from, Tag{9, 0}));
                       seeds.push_back(seed_of(from, me, 100 + k));
                     }
                     for (std::size_t k = 0; k < count; ++k) {
                       sends.push_back(comm.send(
                           make_in(br, tiers[k % tiers.size()], bytes(k), seed_of(me, to, 100 + k)),
                           to, Tag{9, 0}));
                     }
                     wait_and_verify(comm, br, sends, recvs, seeds);
                   }});

  cases.push_back({"ZeroLengthMessages", [](Communicator& comm, BufferResource& br) {
                     const Rank to = (comm.rank() + 1) % comm.nranks();
                     const Rank from = (comm.rank() + comm.nranks() - 1) % comm.nranks();
                     for (MemoryType t : comm_tiers(br)) {
                       auto r = recv_into(comm, br, t, 0, from, Tag{1, 0});
                       auto s = comm.send(br.allocate(t, 0, br.stream()), to, Tag{1, 0});
                       comm.wait(*s);
                       comm.wait(*r);
                       EXPECT_EQ(comm.release(std::move(r))->size(), 0U);
                     }
                   }});

  cases.push_back(
      {"AllToAllWithContentsVerified", [](Communicator& comm, BufferResource& br) {
         const Rank me = comm.rank();
         const auto tiers = comm_tiers(br);
         std::vector<std::unique_ptr<Future>> sends, recvs;
         std::vector<std::uint64_t> seeds;
         for (Rank p = 0; p < comm.nranks(); ++p) {
           const MemoryType t = tiers[static_cast<std::size_t>(p) % tiers.size()];
           recvs.push_back(
               recv_into(comm, br, t, 256 * KiB + static_cast<std::size_t>(p), p, Tag{2, 0}));
           seeds.push_back(seed_of(p, me, 0));
         }
         for (Rank p = 0; p < comm.nranks(); ++p) {
           const MemoryType t = tiers[static_cast<std::size_t>(me) % tiers.size()];
           sends.push_back(comm.send(
               make_in(br, t, 256 * KiB + static_cast<std::size_t>(me), seed_of(me, p, 0)), p,
               Tag{2, 0}));
         }
         wait_and_verify(comm, br, sends, recvs, seeds);
       }});

  cases.push_back({"ManyTagsMatchedOutOfOrder", [](Communicator& comm, BufferResource& br) {
                     // Every rank sends 40 tagged buffers to every rank; the receives are posted in
                     // reverse tag order, after the sends.
                     const Rank me = comm.rank();
                     constexpr int tags = 40;
                     std::vector<std::unique_ptr<Future>> sends, recvs;
                     std::vector<std::uint64_t> seeds;
                     for (Rank p = 0; p < comm.nranks(); ++p) {
                       for (int k = 0; k < tags; ++k) {
                         sends.push_back(comm.send(
                             make_in(br, MemoryType::HOST, 1000 + static_cast<std::size_t>(k),
                                     seed_of(me, p, static_cast<std::uint64_t>(k))),
                             p, Tag{3, static_cast<std::uint8_t>(k)}));
                       }
                     }
                     for (Rank p = comm.nranks() - 1; p >= 0; --p) {
                       for (int k = tags - 1; k >= 0; --k) {
                         recvs.push_back(recv_into(comm, br, MemoryType::HOST,
                                                   1000 + static_cast<std::size_t>(k), p,
                                                   Tag{3, static_cast<std::uint8_t>(k)}));
                         seeds.push_back(seed_of(p, me, static_cast<std::uint64_t>(k)));
                       }
                     }
                     wait_and_verify(comm, br, sends, recvs, seeds);
                   }});

  cases.push_back(
      {"SameTagArrivesInOrder", [](Communicator& comm, BufferResource& br) {
         const Rank me = comm.rank();
         const Rank to = (me + 1) % comm.nranks();
         const Rank from = (me + comm.nranks() - 1) % comm.nranks();
         std::vector<std::unique_ptr<Future>> sends, recvs;
         std::vector<std::uint64_t> seeds;
         for (std::uint64_t k = 0; k < 8; ++k) {
           sends.push_back(
               comm.send(make_in(br, MemoryType::HOST, 4096, seed_of(me, to, k)), to, Tag{4, 0}));
         }
         for (std::uint64_t k = 0; k < 8; ++k) {
           recvs.push_back(recv_into(comm, br, MemoryType::HOST, 4096, from, Tag{4, 0}));
           seeds.push_back(seed_of(from, me, k));
         }
         wait_and_verify(comm, br, sends, recvs, seeds);
       }});

  cases.push_back(
      {"ConcurrentOperationsKeepApart", [](Communicator& comm, BufferResource& br) {
         // Two operations (op ids 10 and 11) with the same stage; receives of op 11 posted first.
         const Rank me = comm.rank();
         const Rank to = (me + 1) % comm.nranks();
         const Rank from = (me + comm.nranks() - 1) % comm.nranks();
         std::vector<std::unique_ptr<Future>> sends, recvs;
         for (OpID op : {OpID{10}, OpID{11}}) {
           sends.push_back(comm.send(make_in(br, MemoryType::HOST, 10000, seed_of(me, to, op)), to,
                                     Tag{op, 1}));
         }
         recvs.push_back(recv_into(comm, br, MemoryType::HOST, 10000, from, Tag{11, 1}));
         recvs.push_back(recv_into(comm, br, MemoryType::HOST, 10000, from, Tag{10, 1}));
         wait_and_verify(comm, br, sends, recvs, {seed_of(from, me, 11), seed_of(from, me, 10)});
       }});

  cases.push_back(
      {"SmallMessagesFromAnyRank", [](Communicator& comm, BufferResource& /*br*/) {
         const Rank me = comm.rank();
         for (Rank p = 0; p < comm.nranks(); ++p) {
           comm.send_message({static_cast<std::uint8_t>(me), static_cast<std::uint8_t>(p), 42}, p,
                             Tag{5, 2});
         }
         std::vector<int> seen(static_cast<std::size_t>(comm.nranks()), 0);
         const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
         int got = 0;
         while (got < comm.nranks() && std::chrono::steady_clock::now() < deadline) {
           if (auto m = comm.recv_any(Tag{5, 2})) {
             ASSERT_EQ(m->data.size(), 3U);
             EXPECT_EQ(m->data[0], m->source);
             EXPECT_EQ(m->data[1], me);
             EXPECT_EQ(m->data[2], 42);
             ++seen[static_cast<std::size_t>(m->source)];
             ++got;
           } else {
             std::this_thread::sleep_for(std::chrono::microseconds(50));
           }
         }
         for (int s : seen) EXPECT_EQ(s, 1);
         EXPECT_FALSE(comm.recv_any(Tag{5, 3}).has_value());  // nothing under another tag
         comm.barrier();
       }});

  cases.push_back(
      {"SizeMismatchIsAnError", [](Communicator& comm, BufferResource& br) {
         if (comm.nranks() < 2) GTEST_SKIP() << "needs two ranks";
         if (comm.rank() == 0) {
           auto s = comm.send(make_in(br, MemoryType::HOST, 100, 1), 1, Tag{6, 0});
           try {
             comm.wait(*s);  // the local communicator fails both sides; MPI completes the send
           } catch (const comm_error&) {
           }
         } else if (comm.rank() == 1) {
           auto r = recv_into(comm, br, MemoryType::HOST, 64, 0, Tag{6, 0});
           EXPECT_THROW(comm.wait(*r), comm_error);
         }
         comm.barrier();
       }});

  cases.push_back(
      {"AStuckPeerGivesAnErrorWithinTheTimeout", [](Communicator& comm, BufferResource& br) {
         if (comm.nranks() < 2) GTEST_SKIP() << "needs two ranks";
         if (comm.rank() == 0) {
           const auto saved = comm.timeout();
           comm.set_timeout(std::chrono::milliseconds(500));
           auto r = recv_into(comm, br, MemoryType::HOST, 64, 1, Tag{9, 9});  // never sent
           const auto t0 = std::chrono::steady_clock::now();
           EXPECT_THROW(comm.wait(*r), comm_error);
           EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
           comm.set_timeout(saved);
         }
         comm.barrier();
       }});

  cases.push_back(
      {"BadArgumentsAreClearErrors", [](Communicator& comm, BufferResource& br) {
         EXPECT_THROW(comm.send(make_in(br, MemoryType::HOST, 8, 0), comm.nranks(), Tag{}),
                      logic_error);
         EXPECT_THROW(comm.recv(-1, Tag{}, br.allocate(MemoryType::HOST, 8)), logic_error);
         EXPECT_THROW(comm.send(nullptr, 0, Tag{}), logic_error);
       }});

  cases.push_back(
      {"AllgatherBringsEveryRanksBufferIntoTheTierAsked",
       [](Communicator& comm, BufferResource& br) {
         // Sizes differ by rank (one rank's is empty, one spans pieces), the senders' tiers and
         // the receivers' chosen tiers vary; two calls in a row share the op id.
         const auto tiers = comm_tiers(br);
         const auto size_of_rank = [](Rank r, std::size_t round) -> std::size_t {
           if (r == 1) return 0;
           return (r == 2 ? 17 * MiB : 4096 * (r + 1)) + 7 * round;
         };
         std::size_t round = 0;
         for (MemoryType from : tiers) {
           for (MemoryType into : tiers) {
             SCOPED_TRACE(std::string(to_string(from)) + " -> " + std::string(to_string(into)));
             const std::size_t n = size_of_rank(comm.rank(), round);
             const auto mine = make_in(br, from, n, seed_of(comm.rank(), 0, round));
             auto all = allgather(comm, 40, *mine, br, into);
             ASSERT_EQ(all.size(), static_cast<std::size_t>(comm.nranks()));
             for (Rank r = 0; r < comm.nranks(); ++r) {
               const Buffer& b = *all[static_cast<std::size_t>(r)];
               EXPECT_EQ(b.mem_type(), into);
               ASSERT_EQ(b.size(), size_of_rank(r, round)) << "from rank " << r;
               EXPECT_EQ(verify(br, b, seed_of(r, 0, round)), b.size()) << "from rank " << r;
             }
             ++round;
           }
         }
       }});

  cases.push_back({"AllreduceSumsMinimaAndMaxima", [](Communicator& comm, BufferResource&) {
                     const auto n = comm.nranks();
                     const auto me = comm.rank();
                     const std::vector<std::int64_t> ints{me - 5, std::int64_t{1} << 40, 3 * me};
                     const std::vector<std::uint64_t> uints{std::uint64_t(me) * 7, ~0ULL - me};
                     const std::vector<double> reals{0.1 * me, -1.5, me == 0 ? 1e300 : 1.0};
                     std::int64_t sum0 = 0;
                     double rsum = 0;
                     for (Rank r = 0; r < n; ++r) {
                       sum0 += r - 5;
                       rsum += 0.1 * r;
                     }
                     EXPECT_EQ(allreduce(comm, 41, std::span(ints), ReduceOp::sum),
                               (std::vector<std::int64_t>{sum0, std::int64_t(n) << 40,
                                                          3 * std::int64_t(n) * (n - 1) / 2}));
                     EXPECT_EQ(allreduce(comm, 41, std::span(ints), ReduceOp::min),
                               (std::vector<std::int64_t>{-5, std::int64_t{1} << 40, 0}));
                     EXPECT_EQ(allreduce(comm, 41, std::span(uints), ReduceOp::max),
                               (std::vector<std::uint64_t>{std::uint64_t(n - 1) * 7, ~0ULL}));
                     const auto got = allreduce(comm, 41, std::span(reals), ReduceOp::sum);
                     EXPECT_EQ(got[0], rsum);  // (in rank order, as here: the same bits)
                     EXPECT_EQ(got[1], -1.5 * n);
                     EXPECT_EQ(allreduce(comm, 41, std::span(reals), ReduceOp::max)[2], 1e300);
                     EXPECT_TRUE(
                         allreduce(comm, 41, std::span<const double>{}, ReduceOp::sum).empty());
                   }});

  cases.push_back(
      {"CollectiveMisuseAndAStuckPeerAreErrors", [](Communicator& comm, BufferResource& br) {
         // Lengths that differ: an error on every rank, which then go on together.
         const std::vector<std::int64_t> v(comm.rank() == 0 ? 2 : 3, 1);
         if (comm.nranks() > 1) {
           EXPECT_THROW(allreduce(comm, 42, std::span(v), ReduceOp::sum), logic_error);
         }
         const auto mine = make_in(br, MemoryType::HOST, 8, 1);
         EXPECT_THROW(allgather(comm, 42, *mine, br, MemoryType::DISK), logic_error);
         comm.barrier();
         if (comm.nranks() < 2) return;
         // Rank 1 never calls: the others fail within the timeout, naming it.
         if (comm.rank() != 1) {
           const auto saved = comm.timeout();
           comm.set_timeout(std::chrono::milliseconds(500));
           const auto t0 = std::chrono::steady_clock::now();
           try {
             (void)allgather(comm, 43, *mine, br, MemoryType::HOST);
             ADD_FAILURE() << "an allgather without rank 1 completed";
           } catch (const comm_error& e) {
             EXPECT_NE(std::string(e.what()).find("nothing from rank(s) 1"), std::string::npos)
                 << e.what();
           }
           EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
           comm.set_timeout(saved);
         }
         comm.barrier();
       }});

  return cases;
}

}  // namespace spillway::test
