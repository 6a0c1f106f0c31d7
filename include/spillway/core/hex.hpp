#pragma once
/// @file hex.hpp
/// Bytes as lowercase hex text and back: how binary addresses (a transfer engine's metadata,
/// an exported region) travel through text channels such as a rendezvous file.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace spillway {

/// Two lowercase hex digits per byte.
std::string to_hex(std::span<const std::uint8_t> bytes);
/// The bytes of `text`. @throws spillway::corrupt_data_error for an odd length or a character
/// that is not a hex digit (the message names it and where it is)
std::vector<std::uint8_t> from_hex(std::string_view text);

}  // namespace spillway
