// The shuffle between processes: over the MPI communicator (ctest runs it under mpirun -np 2,
// 3 and 4) and over the transfer communicator (under spillway-run, SPILLWAY_TEST_COMM=transfer):
// the checksums of all ranks' inputs and outputs, summed over the ranks, agree.
#include "mpi_test_main.hpp"
#include "shuffle/shuffle_common.hpp"
#include "shuffle/soak_common.hpp"

#include <array>

using namespace spillway;

namespace {

Communicator* comm_ = nullptr;
BufferResource* br_ = nullptr;

TableChecksum sum_over_ranks(TableChecksum c) {
  const std::array<std::uint64_t, 2> v{c.rows, c.sum};
  constexpr OpID kSums = 64000;  // an op id no shuffle here uses
  const auto all = allreduce(*comm_, kSums, std::span(v), ReduceOp::sum);
  return {all[0], all[1]};
}

void check(double skew, OpID op, test::Feed feed = test::Feed::streaming) {
  const auto [in, out] = test::shuffle_rank(*comm_, *br_, skew, op, feed);
  const TableChecksum all_in = sum_over_ranks(in);
  const TableChecksum all_out = sum_over_ranks(out);
  EXPECT_GT(all_in.rows, 0U);
  EXPECT_EQ(all_in, all_out) << "rows in " << all_in.rows << ", out " << all_out.rows;
  comm_->barrier();
}

}  // namespace

TEST(MpiShuffle, EveryRowArrivesOnceAtItsOwner) {
  check(0, 1);
}

TEST(MpiShuffle, AllRowsInOnePartition) {
  check(1.0, 2);
}

// The tests' column pieces are small: direct only with shuffle_direct_piece 0 (set on every
// rank, as each runs the same tests).
TEST(MpiShuffle, DirectChunksLandInOneBuffer) {
  OptionsGuard guard;
  options::set_shuffle_direct_piece(0);
  check(0, 3, test::Feed::direct_chunks);
}

TEST(MpiShuffle, DirectRowRangesOfTheInputTable) {
  check(0.5, 4, test::Feed::direct_table);
}

TEST(MpiShuffle, ATableHashedByTheShuffler) {
  OptionsGuard guard;
  options::set_shuffle_direct_piece(0);
  check(0.5, 5, test::Feed::hashed_table);
}

TEST(MpiShuffle, SmallColumnPiecesGoPacked) {
  check(0.5, 8, test::Feed::hashed_table);
}

// 500 shuffles one after another on one op id (under mpirun -np 2, 3 and 4).
TEST(MpiShuffle, FiveHundredShufflesOnOneOpId) {
  const auto [in, out] = test::reuse_op_id(*comm_, *br_, 6, 500);
  const TableChecksum all_in = sum_over_ranks(in);
  const TableChecksum all_out = sum_over_ranks(out);
  EXPECT_GT(all_in.rows, 0U);
  EXPECT_EQ(all_in, all_out) << "rows in " << all_in.rows << ", out " << all_out.rows;
  comm_->barrier();
}

// The soak under mpirun (scripts/soak.sh runs it long): random shapes, feeds and skew, one
// after another on one op id; after each, every tier's used bytes are back where they were
// before the first (the communicator holds its CUDA IPC window on a GPU for its lifetime).
TEST(MpiShuffle, SoakOfRandomShapesLeavesNothingBehind) {
  const int shuffles = test::soak_shuffles(10);
  std::array<std::size_t, 4> before{};
  for (MemoryType t : all_memory_types) before[index(t)] = br_->used(t);
  for (int i = 0; i < shuffles; ++i) {
    const test::SoakCase c = test::soak_case(2, i);  // the same on every rank
    const auto [in, out] = test::shuffle_rank(*comm_, *br_, c.skew, 7, c.feed, c.shape);
    const TableChecksum all_in = sum_over_ranks(in);
    const TableChecksum all_out = sum_over_ranks(out);
    ASSERT_EQ(all_in, all_out) << "shuffle " << i << ": rows in " << all_in.rows << ", out "
                               << all_out.rows;
    for (MemoryType t : all_memory_types) {
      EXPECT_EQ(br_->used(t), before[index(t)]) << "shuffle " << i << ": " << to_string(t);
    }
  }
  comm_->barrier();
}

int main(int argc, char** argv) {
  return test::run_mpi_tests(argc, argv, [](Communicator& comm, BufferResource& br) {
    comm_ = &comm;
    br_ = &br;
  });
}
