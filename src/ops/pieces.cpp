// What the distributed operators share (ops/detail/pieces.hpp).
#include "ops/detail/pieces.hpp"

#include <spillway/comm/collectives.hpp>
#include <spillway/core/error.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/gpu_join.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/partition.hpp>

#include <cstring>
#include <string>

namespace spillway::ops::detail {

bool in_device_memory(const Table& t) {
  return t.num_columns() > 0 && t.column(0).data().mem_type() == MemoryType::DEVICE;
}

Table empty_like(const TableView& schema, bool device, BufferResource& br) {
  return device ? gpu::gather(schema, nullptr, 0, false, br, br.stream()) : gather(schema, {}, br);
}

Table first_piece(const TableSource& next, const char* what) {
  std::optional<Table> t = next();
  SPILLWAY_EXPECTS(t.has_value(), std::string("the ") + what +
                                      " source gave no table (give one without rows for none)");
  return std::move(*t);
}

void check_piece(const Table& piece, const Table& schema, bool device) {
  SPILLWAY_EXPECTS(in_device_memory(piece) == device || piece.num_columns() == 0,
                   "a source's pieces are in different kinds of memory");
  SPILLWAY_EXPECTS(piece.num_columns() == schema.num_columns(),
                   "a source's pieces have " + std::to_string(piece.num_columns()) + " and " +
                       std::to_string(schema.num_columns()) + " columns");
  for (std::size_t c = 0; c < schema.num_columns(); ++c) {
    SPILLWAY_EXPECTS(piece.column(c).type() == schema.column(c).type(),
                     "a source's pieces differ in the type of column " + std::to_string(c));
  }
}

std::unordered_map<PartID, PackedData> partitioned(const TableView& table,
                                                   std::span<const std::size_t> keys,
                                                   std::uint32_t partitions, bool device,
                                                   BufferResource& br, std::uint32_t seed) {
  auto packed = device ? gpu::partition_and_pack(table, keys, partitions, br, br.stream(), seed)
                       : partition_and_pack(table, keys, partitions, br, seed);
  std::unordered_map<PartID, PackedData> chunks;
  for (PartID p = 0; p < partitions; ++p) {
    if (packed[p].payload != nullptr && packed[p].payload->size() > 0) {
      chunks.emplace(p, std::move(packed[p]));
    }
  }
  return chunks;
}

Table concatenated(std::span<const TableView> tables, bool device, BufferResource& br) {
  return device ? gpu::concat(tables, br, br.stream()) : concat(tables, br);
}

Table unpacked(std::vector<PackedData> chunks, bool device, BufferResource& br) {
  return device ? gpu::unpack_and_concat(std::move(chunks), br, br.stream())
                : unpack_and_concat(std::move(chunks), br);
}

Table extract_table(Shuffler& s, PartID pid, const Table& schema, bool device, BufferResource& br) {
  Table t = s.extract_table(pid, device ? MemoryType::DEVICE : MemoryType::HOST);
  return t.num_columns() == 0 ? empty_like(schema.view(), device, br) : std::move(t);
}

namespace {

/// An error's message without the "spillway: " that SPILLWAY_FAIL puts before it again.
std::string without_prefix(const char* what) {
  const std::string m = what;
  const std::string prefix = "spillway: ";
  return m.starts_with(prefix) ? m.substr(prefix.size()) : m;
}

}  // namespace

Table allgather_table(Communicator& comm, BufferResource& br, const TableView& mine, bool device,
                      OpID op) {
  const std::vector<std::size_t> whole;  // no splits: one part
  std::vector<PackedData> packed =
      device ? gpu::split_and_pack(mine, whole, br, br.stream()) : split_and_pack(mine, whole, br);
  if (device) br.stream().synchronize();
  const std::vector<std::uint8_t>& meta = packed.front().metadata;
  auto meta_buf = br.allocate(MemoryType::HOST, meta.size());
  if (!meta.empty()) std::memcpy(meta_buf->data(), meta.data(), meta.size());
  auto metas = allgather(comm, op, *meta_buf, br, MemoryType::HOST);
  auto payloads = allgather(comm, op, *packed.front().payload, br,
                            device ? MemoryType::DEVICE : MemoryType::HOST);
  packed.clear();
  std::vector<PackedData> all(static_cast<std::size_t>(comm.nranks()));
  for (std::size_t r = 0; r < all.size(); ++r) {
    const auto* m = reinterpret_cast<const std::uint8_t*>(metas[r]->data());
    all[r].metadata.assign(m, m + metas[r]->size());
    all[r].payload = std::move(payloads[r]);
  }
  metas.clear();
  return unpacked(std::move(all), device, br);
}

void name_failed_peer(const Communicator& comm, std::initializer_list<const Shuffler*> shuffles,
                      const std::exception& oom) {
  for (const Shuffler* s : shuffles) {
    const std::exception_ptr failed = s->failure(comm.timeout());
    if (!failed) continue;
    try {
      std::rethrow_exception(failed);
    } catch (const comm_error& e) {
      SPILLWAY_FAIL(without_prefix(e.what()) +
                        "; before that, this rank ran out of memory: " + without_prefix(oom.what()),
                    comm_error);
    } catch (...) {  // another kind of failure: the out_of_memory is reported
    }
  }
}

}  // namespace spillway::ops::detail
