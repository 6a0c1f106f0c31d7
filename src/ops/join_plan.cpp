// The distributed hash join's plan (join_plan.hpp, ops/detail/join_plan.hpp).
#include <spillway/ops/join_plan.hpp>

#include <spillway/comm/collectives.hpp>
#include <spillway/core/units.hpp>

#include "ops/detail/join_plan.hpp"

#include <algorithm>
#include <sstream>
#include <vector>

namespace spillway::ops {

std::string to_string(const JoinPlan& plan) {
  std::ostringstream s;
  const char* where = plan.device ? " on the GPU" : "";
  if (plan.kind == JoinPlan::Kind::broadcast) {
    s << "broadcast join" << where << ": the right side (" << format_bytes(double(plan.right_bytes))
      << " in all) allgathered, each rank's left rows joined against it";
  } else {
    s << "shuffle join" << where << ": both sides hashed into " << plan.partitions << " partitions";
    if (plan.sizes_known) {
      s << " of about " << format_bytes(double(plan.right_bytes) / plan.partitions)
        << " of the right side";
    }
    s << ", each pair joined as it arrives";
  }
  if (plan.sizes_known) {
    s << " (left " << format_bytes(double(plan.left_bytes)) << ", right "
      << format_bytes(double(plan.right_bytes)) << ")";
  }
  s << "; output in chunks of at most " << plan.chunk_rows << " rows";
  return s.str();
}

namespace detail {

namespace {

/// Bytes of one row of a table of this schema: fixed widths, 16 per string (offsets and some
/// characters), a byte for a mask.
std::size_t row_bytes(const Table& schema) {
  std::size_t n = 0;
  for (std::size_t c = 0; c < schema.num_columns(); ++c) {
    const DataType t = schema.column(c).type();
    n += is_fixed_width(t) ? size_of(t) : 16;
    n += 1;
  }
  return std::max<std::size_t>(n, 1);
}

/// `wanted` (or `fallback` for 0), at most limit / share.
std::size_t capped(std::size_t wanted, std::size_t fallback, std::size_t limit, std::size_t share) {
  const std::size_t v = wanted != 0 ? wanted : fallback;
  return limit == unlimited_bytes ? v : std::max<std::size_t>(1, std::min(v, limit / share));
}

}  // namespace

JoinPlan choose_plan(Communicator& comm, const BufferResource& br, const HashJoinOptions& options,
                     const Table& left_schema, const Table& right_schema, bool device,
                     std::optional<SideBytes> sizes) {
  JoinPlan plan;
  plan.device = device;
  const MemoryType tier = device ? MemoryType::DEVICE : MemoryType::HOST;
  std::size_t limit = br.limit(tier);
  if (sizes) {
    // Every rank plans alike: the same sizes and the smallest limit.
    const std::vector<std::uint64_t> mine{sizes->left, sizes->right};
    const auto all =
        allreduce(comm, static_cast<OpID>(options.op + 2), std::span(mine), ReduceOp::sum);
    const std::vector<std::uint64_t> lim{limit};
    limit = allreduce(comm, static_cast<OpID>(options.op + 2), std::span(lim), ReduceOp::min)[0];
    plan.left_bytes = all[0];
    plan.right_bytes = all[1];
    plan.sizes_known = true;
  }
  const auto nranks = static_cast<std::uint64_t>(comm.nranks());
  const bool pairs = options.type != JoinType::left_semi && options.type != JoinType::left_anti;
  const std::size_t row = row_bytes(left_schema) + (pairs ? row_bytes(right_schema) : 0);
  const std::size_t chunk_bytes =
      capped(options.output_chunk_bytes, device ? std::size_t{256} << 20 : std::size_t{64} << 20,
             limit, 8);
  plan.chunk_rows = std::max<std::size_t>(1, chunk_bytes / row);
  const std::size_t broadcast_max = limit == unlimited_bytes
                                        ? options.broadcast_bytes
                                        : std::min(options.broadcast_bytes, limit / 8);
  if (!plan.sizes_known && options.right_bytes != 0) plan.right_bytes = options.right_bytes;
  const bool right_known = plan.sizes_known || options.right_bytes != 0;
  if (right_known && options.partitions == 0 && options.type != JoinType::full &&
      options.broadcast_bytes != 0 && plan.right_bytes <= broadcast_max) {
    plan.kind = JoinPlan::Kind::broadcast;
    return plan;
  }
  if (options.partitions != 0) {
    plan.partitions = options.partitions;
  } else if (!plan.sizes_known && plan.right_bytes == 0) {  // a source of unknown size
    plan.partitions = static_cast<std::uint32_t>(16 * nranks);
  } else {
    const std::size_t budget = capped(
        options.partition_bytes, device ? std::size_t{512} << 20 : std::size_t{2} << 20, limit, 16);
    const std::uint64_t wanted = (plan.right_bytes + budget - 1) / budget;
    plan.partitions = static_cast<std::uint32_t>(
        std::clamp<std::uint64_t>(wanted, nranks, std::uint64_t{1} << 20));
  }
  return plan;
}

}  // namespace detail

}  // namespace spillway::ops
