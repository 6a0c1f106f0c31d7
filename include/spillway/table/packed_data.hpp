#pragma once
/// @file packed_data.hpp
/// A table packed for sending: self-describing host metadata plus one contiguous payload.

#include <spillway/memory/buffer.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace spillway {

/// Host metadata (versioned format: columns, types, names, where each buffer sits in the
/// payload) and one payload Buffer of any tier. Move-only.
struct PackedData {
  std::vector<std::uint8_t> metadata;
  std::unique_ptr<Buffer> payload;
};

}  // namespace spillway
