#pragma once
// One rank's part of a shuffle test, shared by the local and the MPI shuffle tests.

#include <spillway/comm/communicator.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/options.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/hashing.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/partition.hpp>

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace spillway::test {

/// How a rank hands its input to the Shuffler.
enum class Feed {
  streaming,      // hashed partitions with strings and nulls, in two insert() calls
  direct_chunks,  // hashed partitions of fixed-width columns, insert_finished(chunks)
  direct_table,   // the table itself, partition p one row range, insert_finished(table, offsets)
  hashed_table,   // the table itself, hashed by the Shuffler: insert_finished(table, keys)
};

/// The size of a shuffle_rank: rows of this rank's input and partitions; 0 for the defaults
/// (3000 + 1000 x rank rows, 3 x ranks + 1 partitions, so that one rank owns one more).
struct Shape {
  std::size_t rows{0};
  PartID partitions{0};
  std::uint64_t seed{0};  // added to the tables' seeds
};

/// Partitions a random table, shuffles it and checks every partition this rank receives;
/// returns the checksums of its input and of its output (their sums over all ranks must agree).
inline std::pair<TableChecksum, TableChecksum> shuffle_rank(Communicator& comm, BufferResource& br,
                                                            double skew, OpID op,
                                                            Feed feed = Feed::streaming,
                                                            Shape shape = {}) {
  const PartID total =
      shape.partitions > 0 ? shape.partitions : static_cast<PartID>(3 * comm.nranks() + 1);
  RandomTableOptions o;
  o.rows = shape.rows > 0 ? shape.rows : 3000 + 1000 * static_cast<std::size_t>(comm.rank());
  o.types = {TypeId::INT32, TypeId::STRING, TypeId::FLOAT64, TypeId::INT64};
  o.null_fraction = 0.1;
  if (feed != Feed::streaming) {  // what direct chunks take
    o.types = {TypeId::INT32, TypeId::FLOAT64, TypeId::BOOL8, TypeId::INT16};
    o.null_fraction = 0;
  }
  o.skew = skew;
  o.key_cardinality = 200;
  o.seed = 1000 * op + static_cast<std::uint64_t>(comm.rank()) + 7 * shape.seed;
  auto table = std::make_shared<Table>(random_table(o, br));
  const TableChecksum in = checksum(table->view(), 1);

  Shuffler shuffler(comm, op, total, br);
  if (feed == Feed::hashed_table) {
    const std::size_t keys[] = {0};
    shuffler.insert_finished(std::move(*table), keys, 7);
  } else if (feed == Feed::direct_table) {
    // Uneven ranges, one of them empty (not the last, which ends at the last row): partition p
    // holds rows [offsets[p], offsets[p + 1]).
    std::vector<std::size_t> offsets{0};
    for (PartID pid = 0; pid < total; ++pid) {
      offsets.push_back(pid == 1 && pid + 1 < total
                            ? offsets.back()
                            : table->num_rows() * (pid + 1) * (pid + 1) / (total * total));
    }
    shuffler.insert_finished(std::move(table), offsets);
  } else {
    auto packed = partition_and_pack(table->view(), std::vector<std::size_t>{0}, total, br, 7);
    table.reset();
    if (feed == Feed::direct_chunks) {
      std::unordered_map<PartID, PackedData> all;
      for (PartID pid = 0; pid < total; ++pid) all.emplace(pid, std::move(packed[pid]));
      shuffler.insert_finished(std::move(all));
    } else {
      // Streaming: even partitions first, then odd ones, in two inserts.
      for (int parity = 0; parity < 2; ++parity) {
        std::unordered_map<PartID, PackedData> batch;
        for (PartID pid = 0; pid < total; ++pid) {
          if (static_cast<int>(pid % 2) == parity) batch.emplace(pid, std::move(packed[pid]));
        }
        shuffler.insert(std::move(batch));
      }
      shuffler.insert_finished();
    }
  }

  TableChecksum mine_out;
  for (std::size_t i = 0; i < shuffler.local_partitions().size(); ++i) {
    const PartID pid = shuffler.wait_any(std::chrono::seconds(20));
    auto chunks = shuffler.extract(pid);
    // Direct chunks arrive as one, laid out as the concatenation of every rank's. These
    // tables' column pieces are far below any shuffle_direct_piece but 0: other feeds go
    // packed, a chunk from each rank.
    const bool direct = feed == Feed::direct_table ||
                        (feed != Feed::streaming && options::get().shuffle_direct_piece == 0);
    EXPECT_EQ(chunks.size(), direct ? 1U : static_cast<std::size_t>(comm.nranks()))
        << "partition " << pid;
    for (auto& c : chunks) {
      if (!is_host_accessible(c.payload->mem_type())) {  // spilled, or received on the GPU
        c.payload = br.move(std::move(c.payload), MemoryType::HOST, br.stream());
        br.stream().synchronize();
      }
      const UnpackedTable t = unpack(std::move(c));
      TableView key_view{{t.view().columns[0]}, {""}};
      for (std::size_t r = 0; r < t.view().num_rows() && feed != Feed::direct_table; ++r) {
        if (hash_row(key_view, r, 7) % total != pid) {
          ADD_FAILURE() << "row " << r << " of a chunk of partition " << pid
                        << " belongs to another partition";
          break;
        }
      }
      mine_out += checksum(t.view(), 1);
    }
  }
  EXPECT_TRUE(shuffler.finished());
  EXPECT_THROW((void)shuffler.wait_any(std::chrono::milliseconds(1)), logic_error);
  return {in, mine_out};
}

/// `shuffles` small shuffles one after another, all with op id `op`, each Shuffler destroyed
/// before the next is made, and no barrier between them (a rank may start the next while
/// another still finishes the last). Returns the checksums of this rank's inputs and outputs
/// summed over the shuffles.
inline std::pair<TableChecksum, TableChecksum> reuse_op_id(Communicator& comm, BufferResource& br,
                                                           OpID op, int shuffles) {
  const auto total = static_cast<PartID>(comm.nranks() + 1);
  TableChecksum in;
  TableChecksum out;
  for (int i = 0; i < shuffles; ++i) {
    RandomTableOptions o;
    o.rows = 40 + static_cast<std::size_t>(i % 7) * static_cast<std::size_t>(comm.rank() + 1);
    o.types = {TypeId::INT32, TypeId::INT64};
    o.seed = 7919 * static_cast<std::uint64_t>(i) + static_cast<std::uint64_t>(comm.rank());
    const Table table = random_table(o, br);
    in += checksum(table.view(), 1);
    auto packed = partition_and_pack(table.view(), std::vector<std::size_t>{0}, total, br, 3);
    Shuffler shuffler(comm, op, total, br);
    std::unordered_map<PartID, PackedData> all;
    for (PartID pid = 0; pid < total; ++pid) all.emplace(pid, std::move(packed[pid]));
    shuffler.insert(std::move(all));
    shuffler.insert_finished();
    while (!shuffler.finished()) {
      const PartID pid = shuffler.wait_any(comm.timeout());
      for (auto& c : shuffler.extract(pid)) {
        if (!is_host_accessible(c.payload->mem_type())) {
          c.payload = br.move(std::move(c.payload), MemoryType::HOST, br.stream());
          br.stream().synchronize();
        }
        out += checksum(unpack(std::move(c)).view(), 1);
      }
    }
  }
  return {in, out};
}

}  // namespace spillway::test
