#pragma once
// What the distributed operators share (internal to ops/): pieces of input, their checks, and
// the way a partition goes into and comes out of a shuffle, on the CPU or the GPU.

#include <spillway/comm/communicator.hpp>
#include <spillway/core/error.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/ops/table_source.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/table/table.hpp>

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <span>
#include <unordered_map>
#include <vector>

namespace spillway::ops::detail {

/// Whether a table's columns are in device memory.
bool in_device_memory(const Table& t);

/// The columns of `schema` with no rows, in device memory when `device`.
Table empty_like(const TableView& schema, bool device, BufferResource& br);

/// The first piece of a source. @throws spillway::logic_error when it has none
Table first_piece(const TableSource& next, const char* what);

/// Checks that a further piece of a source has its first piece's schema and kind of memory.
/// @throws spillway::logic_error naming the difference
void check_piece(const Table& piece, const Table& schema, bool device);

/// The partitions of `table` that have rows, packed (on the GPU when `device`, on the buffer
/// resource's stream), by hash(keys) % partitions with `seed`.
std::unordered_map<PartID, PackedData> partitioned(const TableView& table,
                                                   std::span<const std::size_t> keys,
                                                   std::uint32_t partitions, bool device,
                                                   BufferResource& br, std::uint32_t seed);

/// Tables of one schema concatenated into one (on the GPU, on the resource's stream, when
/// `device`).
Table concatenated(std::span<const TableView> tables, bool device, BufferResource& br);

/// Packed chunks unpacked and concatenated into one table (on the GPU when `device`).
Table unpacked(std::vector<PackedData> chunks, bool device, BufferResource& br);

/// A complete partition's chunks unpacked into one table (on the GPU when `device`), or
/// `schema` without rows when no rank had any.
Table extract_table(Shuffler& s, PartID pid, const Table& schema, bool device, BufferResource& br);

/// Every rank's `mine` (packed here, in its memory), unpacked and concatenated into one table
/// in the same memory, in rank order (a broadcast join's right side, a sort's samples).
/// Collective over `op`. @throws spillway::comm_error for a dead or stuck peer
Table allgather_table(Communicator& comm, BufferResource& br, const TableView& mine, bool device,
                      OpID op);

/// For an out_of_memory `oom` of an operator's step: when one of `shuffles` cannot go on
/// (Shuffler::failure within the communicator's timeout: a failed peer, or a send that has not
/// completed in that time and holds its buffer), throws that comm_error, saying that memory
/// ran out first; else returns, for the caller to rethrow `oom`.
void name_failed_peer(const Communicator& comm, std::initializer_list<const Shuffler*> shuffles,
                      const std::exception& oom);

/// Runs `body`, an operator's steps with `shuffles`: an out_of_memory in it that a failed peer
/// caused becomes that peer's comm_error (name_failed_peer).
template <class Body>
void naming_failed_peers(const Communicator& comm, std::initializer_list<const Shuffler*> shuffles,
                         Body&& body) {
  try {
    body();
  } catch (const out_of_memory& oom) {
    name_failed_peer(comm, shuffles, oom);
    throw;
  }
}

}  // namespace spillway::ops::detail
