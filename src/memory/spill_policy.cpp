// The spill policy, all of it: when a tier is short, which buffers move, in what order, to
// which tier, and how much.
//
// - When: a reservation that does not fit (spill_and_reserve, behind reserve(),
//   reserve_or_spill() and the first-fit reservations) asks for exactly its deficit, the
//   bytes by which it would pass the limit. A SpillInjectionAdaptor (tests) spills a tier
//   first at random, at allocations, even without pressure. The background spiller
//   (SpillManager::start_background) keeps each tier's headroom free the same way.
// - Which and in what order: the SpillManager asks its holders (a SpillableStore per
//   shuffle, a user's own spill functions), highest priority first, until the deficit is
//   freed; a SpillableStore gives its oldest buffers of that tier first. Buffers in use (not
//   in a store, or being extracted) never move.
// - To which tier (spill_down): the next live tier below with room now (spill_targets: DEVICE
//   -> PINNED_HOST, HOST, DISK; PINNED_HOST and HOST -> DISK). If none has room, the lower
//   tiers are spilled in turn to make it, except the first target of a DEVICE buffer (the
//   small pinned pool) when a larger tier follows: pinned memory is the staging of every
//   other move. The cascade ends at DISK, which has no target.
// - The result: a reservation, or nullopt when not even spilling frees enough (the expected
//   failure, a return value all the way up). Only the public reserve() and
//   reserve_first_fit() turn it into out_of_memory, after waiting for memory in use
//   (waiting_for_memory); only real failures (I/O, CUDA) throw inside.
#include <spillway/memory/buffer_resource.hpp>

#include <spillway/core/error.hpp>

#include "core/detail/nvtx.hpp"

#include "memory/detail/buffer_stats.hpp"

#include <algorithm>

namespace spillway {

using detail::Clock;
using detail::names;
using detail::seconds_since;

std::optional<MemoryReservation> BufferResource::reserve_or_spill(MemoryType t, std::size_t bytes) {
  check_live(t);
  return spill_and_reserve(t, bytes);
}

std::optional<MemoryReservation> BufferResource::spill_and_reserve(MemoryType t, std::size_t size) {
  const std::size_t bytes = charge_of(t, size);  // (what is charged for a buffer of `size`)
  if (bytes > limit(t) || exceeds_machine(t, bytes)) return std::nullopt;
  for (;;) {
    if (try_charge(t, bytes)) return MemoryReservation(this, t, bytes);
    const std::size_t u = used(t);
    const std::size_t deficit = u + bytes > limit(t) ? u + bytes - limit(t) : 0;
    const auto t0 = Clock::now();
    const std::size_t freed = deficit == 0 ? 0 : spill_manager_.spill(t, deficit);
    if (freed > 0) {
      statistics_.add(names().freed[index(t)], static_cast<double>(freed), seconds_since(t0));
      continue;
    }
    // Nothing could be spilled; another thread may have released memory meanwhile.
    if (try_charge(t, bytes)) return MemoryReservation(this, t, bytes);
    return std::nullopt;
  }
}

bool BufferResource::spill_down(std::unique_ptr<Buffer>& buf, Stream stream) {
  SPILLWAY_NVTX_RANGE("spill");
  SPILLWAY_EXPECTS(buf != nullptr, "spill of a null buffer");
  const MemoryType from = buf->mem_type();
  std::vector<MemoryType> targets;
  for (MemoryType t : spill_targets(from)) {
    if (is_live(t)) targets.push_back(t);
  }
  std::optional<MemoryReservation> res;
  for (MemoryType t : targets) {
    if ((res = try_reserve(t, buf->size()))) break;
  }
  // Cascade: make room in a lower tier by spilling it (but not the first target of a DEVICE
  // buffer, the small pinned pool, when a larger tier follows).
  for (std::size_t i = targets.size() > 1 ? 1 : 0; !res && i < targets.size(); ++i) {
    res = reserve_or_spill(targets[i], buf->size());
  }
  if (!res) return false;
  const MemoryType to = res->mem_type();
  const auto t0 = Clock::now();
  auto moved = move(std::move(buf), *res, stream.handle() != nullptr ? stream : this->stream());
  buf = std::move(moved);
  statistics_.add(names().spill[index(from)][index(to)], static_cast<double>(buf->size()),
                  seconds_since(t0));
  return true;
}

}  // namespace spillway
