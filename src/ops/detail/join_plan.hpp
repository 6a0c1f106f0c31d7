#pragma once
// How the distributed hash join chooses its plan (internal to ops/).

#include <spillway/comm/communicator.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/ops/hash_join.hpp>
#include <spillway/ops/join_plan.hpp>
#include <spillway/table/table.hpp>

#include <cstdint>
#include <optional>

namespace spillway::ops::detail {

/// The sides' bytes on this rank.
struct SideBytes {
  std::uint64_t left{0};
  std::uint64_t right{0};
};

/// The plan of a join of sides of these schemas: with `sizes` (tables), collective (an
/// allreduce of the sizes and of the limits over op + 2, so that every rank plans alike), the
/// broadcast plan when the options allow it and the right side is small, else the shuffle plan
/// with the partitions `partition_bytes` asks for; without (sources), the same from
/// options.right_bytes when it is given, else the shuffle plan with options.partitions or 16
/// per rank. The output chunk's rows come from `output_chunk_bytes` and the schemas' row width.
JoinPlan choose_plan(Communicator& comm, const BufferResource& br, const HashJoinOptions& options,
                     const Table& left_schema, const Table& right_schema, bool device,
                     std::optional<SideBytes> sizes);

}  // namespace spillway::ops::detail
