#pragma once
/// @file limit.hpp
/// A memory limit given either in bytes or as a fraction of a tier's capacity.

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>

namespace spillway {

/// A limit for one memory tier: unlimited, an absolute byte count, or a fraction of the tier's
/// capacity (resolved when the BufferResource is created). A value type; thread-compatible.
class Limit {
 public:
  /// No limit (the default).
  constexpr Limit() noexcept = default;
  static constexpr Limit unlimited() noexcept { return Limit{}; }
  /// An absolute limit in bytes.
  static constexpr Limit bytes(std::size_t n) noexcept { return Limit{Kind::bytes, n, 0}; }
  /// A fraction of the tier's capacity, 0 ≤ f ≤ 1.
  /// @throws spillway::logic_error when f is outside [0, 1].
  static Limit fraction(double f);
  /// Parses "unlimited", a byte size ("512MiB", "1073741824") or a percentage ("50%").
  /// @throws spillway::logic_error naming `what` on bad input.
  static Limit parse(std::string_view text, std::string_view what = "limit");

  [[nodiscard]] bool is_unlimited() const noexcept { return kind_ == Kind::unlimited; }
  /// The limit in bytes for a tier with `capacity` bytes (SIZE_MAX when unlimited).
  [[nodiscard]] std::size_t resolve(std::size_t capacity) const noexcept;
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Limit&, const Limit&) = default;

 private:
  enum class Kind { unlimited, bytes, fraction };
  constexpr Limit(Kind k, std::size_t b, double f) noexcept : kind_{k}, bytes_{b}, fraction_{f} {}
  Kind kind_{Kind::unlimited};
  std::size_t bytes_{0};
  double fraction_{0};
};

/// The byte count meaning "no limit".
inline constexpr std::size_t unlimited_bytes = std::numeric_limits<std::size_t>::max();

}  // namespace spillway
