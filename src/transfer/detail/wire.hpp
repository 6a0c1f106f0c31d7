#pragma once
// What transfer engines send each other as bytes: an engine's metadata, and the checksummed
// envelope around it and around a RemoteRegion (internal).

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::transfer::detail {

using EngineId = std::array<std::uint8_t, 16>;

/// One backend of an engine: its name and its address.
struct BackendAddress {
  std::string name;                   ///< "loopback", "libfabric/<provider>", "cuda_ipc"
  std::vector<std::uint8_t> address;  ///< fi_getname's bytes, the loopback id, ...
};

/// An engine's address, as TransferEngine::metadata() hands it out.
struct EngineMetadata {
  EngineId engine{};
  std::string control;                   ///< "host:port" of the control channel
  std::vector<BackendAddress> backends;  ///< in the engine's order of preference

  /// The address of the backend named `name`, or nullptr.
  [[nodiscard]] const BackendAddress* backend(std::string_view name) const;
  /// The backends' names, comma-separated.
  [[nodiscard]] std::string backend_names() const;

  [[nodiscard]] std::vector<std::uint8_t> to_bytes() const;
  /// @throws spillway::corrupt_data_error naming what is wrong
  static EngineMetadata from_bytes(std::span<const std::uint8_t> bytes);
};

/// `magic`, a version, the body and a checksum of both.
std::vector<std::uint8_t> seal(std::uint32_t magic, const std::vector<std::uint8_t>& body);
/// The body of sealed bytes. @throws spillway::corrupt_data_error, prefixed with `what`, for a
/// short input, another magic or version, or a checksum that does not match
std::span<const std::uint8_t> unseal(std::uint32_t magic, std::span<const std::uint8_t> bytes,
                                     const std::string& what);

/// The most backends an engine has (and a RemoteRegion carries keys of).
inline constexpr std::size_t kMaxBackends = 8;

/// A random engine identity.
EngineId random_engine_id();
/// Its first 8 bytes in hex, for messages.
std::string to_string(const EngineId& id);

}  // namespace spillway::transfer::detail
