#pragma once
/// @file memory_reservation.hpp
/// Bytes promised by one tier of a BufferResource, counted against that tier's limit.

#include <spillway/memory/memory_type.hpp>

#include <cstddef>
#include <utility>

namespace spillway {

class BufferResource;

/// A move-only claim on `size()` bytes of one tier. Allocations draw from it; what is left is
/// returned to the tier by the destructor (or `release()`). Not thread-safe: one owner.
class MemoryReservation {
 public:
  MemoryReservation() noexcept = default;
  ~MemoryReservation() { release(); }
  MemoryReservation(const MemoryReservation&) = delete;
  MemoryReservation& operator=(const MemoryReservation&) = delete;
  MemoryReservation(MemoryReservation&& o) noexcept
      : br_{std::exchange(o.br_, nullptr)}, type_{o.type_}, size_{std::exchange(o.size_, 0)} {}
  MemoryReservation& operator=(MemoryReservation&& o) noexcept {
    if (this != &o) {
      release();
      br_ = std::exchange(o.br_, nullptr);
      type_ = o.type_;
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }

  [[nodiscard]] MemoryType mem_type() const noexcept { return type_; }
  /// Bytes still reserved (not yet drawn by allocations).
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] BufferResource* resource() const noexcept { return br_; }
  /// Returns the remaining bytes to the tier now. Never throws.
  void release() noexcept;

 private:
  friend class BufferResource;
  MemoryReservation(BufferResource* br, MemoryType type, std::size_t size) noexcept
      : br_{br}, type_{type}, size_{size} {}

  BufferResource* br_{nullptr};
  MemoryType type_{MemoryType::HOST};
  std::size_t size_{0};
};

}  // namespace spillway
