// BufferResource's reservations: against one tier or the first of several with room, waiting
// for memory in use, the out_of_memory that names every tier, and taking a buffer's charge
// from a reservation. When and what they spill is spill_policy.cpp's.
#include <spillway/memory/buffer_resource.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/memory_step.hpp>

#include "memory/detail/buffer_stats.hpp"

#include <algorithm>

namespace spillway {

using detail::limit_string;

std::optional<MemoryReservation> BufferResource::try_reserve(MemoryType t, std::size_t bytes) {
  check_live(t);
  const std::size_t charge = charge_of(t, bytes);
  if (!try_charge(t, charge)) return std::nullopt;
  return MemoryReservation(this, t, charge);
}

void BufferResource::throw_out_of_memory(std::span<const MemoryType> tried,
                                         std::size_t bytes) const {
  const char* step = MemoryStep::current();
  std::string names_tried;
  std::string detail;
  for (std::size_t i = 0; i < tried.size(); ++i) {
    const MemoryType t = tried[i];
    names_tried += (i == 0                  ? ""
                    : i + 1 == tried.size() ? " or "
                                            : ", ") +
                   std::string(to_string(t));
    detail += (i == 0 ? "" : "; ") + std::string(to_string(t)) + ": ";
    if (!is_live(t)) {
      detail += "absent";
    } else if (exceeds_machine(t, bytes)) {
      detail +=
          "more than the machine has (" + format_bytes(static_cast<double>(capacity(t))) + ")";
    } else if (bytes > limit(t)) {
      detail += "larger than its limit of " + limit_string(limit(t));
    } else {
      detail += format_bytes(static_cast<double>(used(t))) + " of " + limit_string(limit(t)) +
                " in use, none of it spillable now (live buffers and reservations)";
    }
  }
  std::string others;
  for (MemoryType t : all_memory_types) {
    if (!is_live(t) || std::find(tried.begin(), tried.end(), t) != tried.end()) continue;
    others += (others.empty() ? "" : ", ") + std::string(to_string(t)) + " " +
              format_bytes(static_cast<double>(used(t))) + "/" + limit_string(limit(t));
  }
  SPILLWAY_FAIL(std::string(step != nullptr ? step : "a reservation") + ": cannot reserve " +
                    format_bytes(static_cast<double>(bytes)) + " of " + names_tried +
                    " even after spilling. " + detail +
                    (others.empty() ? "" : ". Not tried: " + others),
                out_of_memory);
}

MemoryReservation BufferResource::reserve(MemoryType t, std::size_t bytes) {
  check_live(t);
  const std::size_t charge = charge_of(t, bytes);
  auto res = charge > limit(t) || exceeds_machine(t, charge)
                 ? std::nullopt  // never fits: no wait
                 : waiting_for_memory([&] { return spill_and_reserve(t, bytes); });
  if (!res) throw_out_of_memory(std::span<const MemoryType>(&t, 1), bytes);
  return std::move(*res);
}

std::vector<MemoryType> BufferResource::live_of(std::span<const MemoryType> order) const {
  std::vector<MemoryType> live;
  for (MemoryType t : order) {
    if (is_live(t)) live.push_back(t);
  }
  SPILLWAY_EXPECTS(!live.empty(), "none of the tiers asked for is available");
  return live;
}

std::optional<MemoryReservation> BufferResource::try_reserve_in_order(
    std::span<const MemoryType> order, std::size_t bytes) {
  for (MemoryType t : live_of(order)) {
    if (auto res = spill_and_reserve(t, bytes)) return res;
  }
  return std::nullopt;
}

std::optional<MemoryReservation> BufferResource::try_reserve_first_fit(
    std::span<const MemoryType> order, std::size_t bytes) {
  const std::vector<MemoryType> live = live_of(order);
  for (std::size_t i = 0; i < live.size(); ++i) {
    const MemoryType t = live[i];
    const std::size_t keep = i + 1 < live.size() ? headroom(t) : 0;
    const std::size_t charge = charge_of(t, bytes);
    if (try_charge(t, charge, keep)) return MemoryReservation(this, t, charge);
  }
  for (std::size_t i = live.size() > 1 ? 1 : 0; i < live.size(); ++i) {
    if (auto res = spill_and_reserve(live[i], bytes)) return res;
  }
  return std::nullopt;
}

MemoryReservation BufferResource::reserve_first_fit(std::span<const MemoryType> order,
                                                    std::size_t bytes) {
  const std::vector<MemoryType> live = live_of(order);
  const bool fits_somewhere = std::any_of(live.begin(), live.end(), [&](MemoryType t) {
    return charge_of(t, bytes) <= limit(t) && !exceeds_machine(t, charge_of(t, bytes));
  });
  auto res = fits_somewhere
                 ? waiting_for_memory([&] { return try_reserve_first_fit(order, bytes); })
                 : std::nullopt;
  if (!res) throw_out_of_memory(live, bytes);
  return std::move(*res);
}

void BufferResource::take(MemoryReservation& res, std::size_t bytes, MemoryType expected) {
  SPILLWAY_EXPECTS(res.br_ == this, "the reservation belongs to another BufferResource");
  SPILLWAY_EXPECTS(res.type_ == expected, "the reservation is of tier " +
                                              std::string(to_string(res.type_)) + ", not " +
                                              std::string(to_string(expected)));
  SPILLWAY_EXPECTS(bytes <= res.size_, "an allocation of " + std::to_string(bytes) +
                                           " bytes exceeds the " + std::to_string(res.size_) +
                                           " bytes left in the " +
                                           std::string(to_string(res.type_)) + " reservation");
  // A reservation made for several buffers pays for their bytes; what rounding each adds on
  // top comes from the tier when the reservation has no more.
  const std::size_t charge = charge_of(expected, bytes);
  if (charge > res.size_) {
    const std::size_t extra = charge - res.size_;
    if (!try_charge(expected, extra)) {
      SPILLWAY_FAIL("a " + std::string(to_string(expected)) + " buffer of " +
                        std::to_string(bytes) + " bytes takes " + std::to_string(charge) +
                        " from the system (rounding); its reservation has " +
                        std::to_string(res.size_) +
                        " left and the tier no room for the rest: " + usage(),
                    out_of_memory);
    }
    res.size_ += extra;
  }
  res.size_ -= charge;
}

}  // namespace spillway
