#pragma once
/// @file spill_manager.hpp
/// Registered spill functions and the optional background thread that keeps headroom.

#include <spillway/memory/memory_type.hpp>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace spillway {

/// Knows every holder of spillable buffers. A spill function is asked to move at least `bytes`
/// out of `tier` (down to lower tiers) and returns how many bytes it freed there; it may free
/// less. Functions run in priority order (higher first), without any SpillManager lock held,
/// so a function may itself reserve memory (and so cause spilling of a lower tier).
/// Thread-safe.
class SpillManager {
 public:
  using SpillFunction = std::function<std::size_t(MemoryType tier, std::size_t bytes)>;
  using FunctionId = std::size_t;
  /// Bytes still free in a tier (limit - used); given by the BufferResource.
  using AvailableFn = std::function<std::size_t(MemoryType)>;

  explicit SpillManager(AvailableFn available) : available_{std::move(available)} {}
  ~SpillManager();
  SpillManager(const SpillManager&) = delete;
  SpillManager& operator=(const SpillManager&) = delete;
  SpillManager(SpillManager&&) = delete;
  SpillManager& operator=(SpillManager&&) = delete;

  /// Registers `fn`; functions of equal priority run in registration order.
  FunctionId add_spill_function(SpillFunction fn, int priority);
  /// Unregisters; waits until no call of that function is running.
  void remove_spill_function(FunctionId id);

  /// Asks the functions, highest priority first, to free `bytes` in `tier`; stops once enough
  /// was freed. Returns the bytes freed (possibly fewer than asked; 0 when nothing could move).
  /// Exceptions from a function (e.g. spillway::io_error when the disk is full) propagate.
  std::size_t spill(MemoryType tier, std::size_t bytes);

  /// Starts a thread that every `period` spills any tier whose free bytes are below its
  /// `headroom` (bytes, per tier) back up to the headroom. Restarts it if already running.
  void start_background(std::chrono::milliseconds period, std::array<std::size_t, 4> headroom);
  /// Stops the background thread (also done by the destructor).
  void stop_background();

 private:
  struct Entry {
    SpillFunction fn;
    int priority;
    std::size_t running{0};
  };

  AvailableFn available_;
  std::mutex mutex_;
  std::condition_variable idle_cv_;
  std::map<FunctionId, Entry> functions_;
  FunctionId next_id_{0};

  std::mutex bg_mutex_;
  std::condition_variable bg_cv_;
  bool bg_stop_{false};
  std::thread bg_thread_;
};

/// Registers a spill function for the lifetime of this object (RAII).
class SpillFunctionHandle {
 public:
  SpillFunctionHandle() noexcept = default;
  SpillFunctionHandle(SpillManager& sm, SpillManager::SpillFunction fn, int priority)
      : sm_{&sm}, id_{sm.add_spill_function(std::move(fn), priority)} {}
  ~SpillFunctionHandle() { reset(); }
  SpillFunctionHandle(const SpillFunctionHandle&) = delete;
  SpillFunctionHandle& operator=(const SpillFunctionHandle&) = delete;
  SpillFunctionHandle(SpillFunctionHandle&& o) noexcept : sm_{o.sm_}, id_{o.id_} {
    o.sm_ = nullptr;
  }
  SpillFunctionHandle& operator=(SpillFunctionHandle&& o) noexcept {
    if (this != &o) {
      reset();
      sm_ = o.sm_;
      id_ = o.id_;
      o.sm_ = nullptr;
    }
    return *this;
  }
  void reset() noexcept {
    if (sm_ != nullptr) sm_->remove_spill_function(id_);
    sm_ = nullptr;
  }

 private:
  SpillManager* sm_{nullptr};
  SpillManager::FunctionId id_{0};
};

}  // namespace spillway
