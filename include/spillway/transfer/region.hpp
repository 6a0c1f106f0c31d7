#pragma once
/// @file region.hpp
/// Registered memory: a `Region` is memory of this process the engine may read from or write
/// into; a `RemoteRegion` is part of a peer's region, handed over as bytes, that this engine
/// may write into or read from.

#include <spillway/memory/memory_type.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace spillway::transfer {

/// Memory of this process registered with an engine (TransferEngine::register_memory).
struct Region {
  std::uint64_t id{0};  ///< the engine's id of the registration; 0 for none
  void* ptr{nullptr};
  std::size_t bytes{0};
  MemoryType type{MemoryType::HOST};
  int device{-1};  ///< the GPU of device memory, else -1
};

/// How one backend of the exporting engine addresses a remote range.
struct RemoteKey {
  std::string backend;             ///< the backend's name ("libfabric/tcp", "cuda_ipc", ...)
  std::uint64_t address{0};        ///< what the backend addresses the range's first byte by
  std::uint64_t key{0};            ///< the backend's remote key
  std::vector<std::uint8_t> blob;  ///< backend-specific (a CUDA IPC handle, say)
};

/// A range of a peer's registered region. It names the engine that exported it, so that a
/// region of a peer that has since left is refused, never written, and carries a key for each
/// backend of that engine the region is registered with: the writer's engine picks one that
/// it shares with the peer.
struct RemoteRegion {
  std::array<std::uint8_t, 16> engine{};  ///< the exporting engine's identity
  std::uint64_t region_id{0};
  std::uint64_t length{0};  ///< bytes of the range
  MemoryType type{MemoryType::HOST};
  int device{-1};
  std::uint64_t offset{0};      ///< where the range starts in the registration
  std::vector<RemoteKey> keys;  ///< one per backend, in the exporter's order of preference

  /// The serialised form: versioned, length-checked and checksummed.
  [[nodiscard]] std::vector<std::uint8_t> to_bytes() const;
  /// @throws spillway::corrupt_data_error naming what is wrong with `bytes` (truncated, a bad
  /// magic, version or checksum, a field out of range)
  static RemoteRegion from_bytes(std::span<const std::uint8_t> bytes);
};

}  // namespace spillway::transfer
