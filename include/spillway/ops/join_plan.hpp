#pragma once
/// @file join_plan.hpp
/// How the distributed hash join runs, chosen from its options, the sides' global sizes and
/// the memory limits of the tier it works in, and reported back to the caller.

#include <cstddef>
#include <cstdint>
#include <string>

namespace spillway::ops {

struct JoinPlan {
  enum class Kind : std::uint8_t {
    shuffle,    ///< both sides hashed into `partitions`, each partition pair joined
    broadcast,  ///< the right side allgathered, each rank's left rows joined against all of it
  };
  Kind kind{Kind::shuffle};
  /// Partitions of the shuffle plan (0 for the broadcast plan).
  std::uint32_t partitions{0};
  /// The sides' bytes over all ranks; 0 when the sides came as sources (not known ahead).
  std::uint64_t left_bytes{0};
  std::uint64_t right_bytes{0};
  /// Whether the sizes above were known when the plan was chosen.
  bool sizes_known{false};
  /// The most rows of one output chunk.
  std::size_t chunk_rows{0};
  /// Whether the join runs on the GPU.
  bool device{false};
};

/// One line: "shuffle join on the GPU: 115 partitions of about 2.00 MiB of the right side, ...".
std::string to_string(const JoinPlan& plan);

}  // namespace spillway::ops
