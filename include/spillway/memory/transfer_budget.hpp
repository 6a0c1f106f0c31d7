#pragma once
/// @file transfer_budget.hpp
/// The part of a rank's memory that may wait on its peers.

#include <atomic>
#include <cstddef>
#include <optional>
#include <utility>

namespace spillway {

/// Memory a rank holds for a transfer it has asked a peer to make (a shuffle's landing for a
/// payload whose sender it told to go ahead) frees only when that peer sends, and the peer may
/// need memory of its own first (a spilled payload brought back). Were all of two ranks' memory
/// held so, each would wait on the other forever. Such memory is therefore taken from this
/// budget, one per rank (BufferResource::transfer_budget), shared by all its shuffles: up to
/// limit() bytes, and any one share while none is held. Thread-safe.
class TransferBudget {
 public:
  /// A move-only share of the budget, returned by its destructor.
  class Share {
   public:
    Share() noexcept = default;
    ~Share() { release(); }
    Share(const Share&) = delete;
    Share& operator=(const Share&) = delete;
    Share(Share&& o) noexcept
        : budget_{std::exchange(o.budget_, nullptr)}, bytes_{std::exchange(o.bytes_, 0)} {}
    Share& operator=(Share&& o) noexcept {
      if (this != &o) {
        release();
        budget_ = std::exchange(o.budget_, nullptr);
        bytes_ = std::exchange(o.bytes_, 0);
      }
      return *this;
    }
    [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
    void release() noexcept {
      if (budget_ != nullptr) budget_->taken_.fetch_sub(bytes_, std::memory_order_acq_rel);
      budget_ = nullptr;
      bytes_ = 0;
    }

   private:
    friend class TransferBudget;
    Share(TransferBudget* b, std::size_t bytes) noexcept : budget_{b}, bytes_{bytes} {}
    TransferBudget* budget_{nullptr};
    std::size_t bytes_{0};
  };

  explicit TransferBudget(std::size_t limit) noexcept : limit_{limit} {}
  TransferBudget(const TransferBudget&) = delete;
  TransferBudget& operator=(const TransferBudget&) = delete;
  ~TransferBudget() = default;

  /// `bytes` of the budget when they fit in what is left, or when nothing is taken; nullopt
  /// otherwise (the caller tries again once shares have been returned).
  [[nodiscard]] std::optional<Share> try_take(std::size_t bytes) noexcept {
    std::size_t now = taken_.load(std::memory_order_acquire);
    do {
      if (now != 0 && (bytes > limit_ || now > limit_ - bytes)) return std::nullopt;
    } while (!taken_.compare_exchange_weak(now, now + bytes, std::memory_order_acq_rel));
    return Share(this, bytes);
  }
  [[nodiscard]] std::size_t limit() const noexcept { return limit_; }
  [[nodiscard]] std::size_t taken() const noexcept {
    return taken_.load(std::memory_order_acquire);
  }

 private:
  const std::size_t limit_;
  std::atomic<std::size_t> taken_{0};
};

}  // namespace spillway
