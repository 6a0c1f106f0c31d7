// BufferResource's copies and moves between tiers: DEVICE <-> DISK through pinned staging,
// and spilling a buffer down to the next tier with room.
#include <spillway/memory/buffer_resource.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/memory_step.hpp>

#include "memory/detail/buffer_stats.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

namespace spillway {

using detail::Clock;
using detail::copy_stat;
using detail::names;
using detail::seconds_since;

std::size_t BufferResource::staging_chunk(std::size_t n) const {
  const std::size_t piece = spill_files_.piece_size();
  const std::size_t half =
      config_.staging_size > 0 ? config_.staging_size / 2 : spill_files_.io_threads() * piece;
  return std::min(round_up(n, piece), std::max(piece, half / piece * piece));
}

MemoryReservation BufferResource::staging_reservation(std::size_t bytes) {
  static constexpr std::array<MemoryType, 2> order{MemoryType::PINNED_HOST, MemoryType::HOST};
  return reserve_first_fit(order, bytes);
}

std::unique_ptr<Buffer> BufferResource::copy_to_disk(const Buffer& src, MemoryReservation& res,
                                                     Stream stream) {
  const std::size_t n = src.size();
  take(res, n, MemoryType::DISK);
  DiskExtent extent;
  try {
    extent = spill_files_.allocate(n);
  } catch (...) {
    res.size_ += charge_of(MemoryType::DISK, n);
    throw;
  }
  statistics_.memory_profiler().on_allocate(index(MemoryType::DISK),
                                            charge_of(MemoryType::DISK, n));
  // From here the buffer owns the extent and the charge, also if writing throws.
  std::unique_ptr<Buffer> dst(new Buffer(*this, std::move(extent)));
  DiskExtent& e = *dst->extent_;
  if (is_host_accessible(src.mem_type())) {
    spill_files_.write(e, 0, src.data(), n);
    return dst;
  }
  // DEVICE or DISK source: through two staging halves, the next piece moving while the last
  // is written.
  const std::size_t chunk = staging_chunk(n);
  auto stage_res = staging_reservation(2 * chunk);
  auto stage = allocate(stage_res, 2 * chunk, stream);
  std::array<Event, 2> ready;
  const std::size_t nchunks = (n + chunk - 1) / chunk;
  auto fetch = [&](std::size_t i) {
    const std::size_t len = std::min(chunk, n - i * chunk);
    std::byte* half = stage->data() + (i % 2) * chunk;
    if (src.mem_type() == MemoryType::DEVICE) {
      cuda::memcpy_async(half, src.data() + i * chunk, len, stream);
      ready[i % 2].record(stream);
    } else {
      spill_files_.read(*src.extent_, i * chunk, half, len);
    }
  };
  if (src.mem_type() == MemoryType::DEVICE) activate_device();
  for (std::size_t i = 0; i < nchunks; ++i) {
    fetch(i);
    if (i > 0) {
      ready[(i - 1) % 2].synchronize();
      spill_files_.write(e, (i - 1) * chunk, stage->data() + ((i - 1) % 2) * chunk, chunk);
    }
  }
  const std::size_t last = nchunks - 1;
  ready[last % 2].synchronize();
  spill_files_.write(e, last * chunk, stage->data() + (last % 2) * chunk, n - last * chunk);
  return dst;
}

void BufferResource::copy_from_disk(const Buffer& src, Buffer& dst, Stream stream) {
  const std::size_t n = src.size();
  if (is_host_accessible(dst.mem_type())) {
    spill_files_.read(*src.extent_, 0, dst.data(), n);
    return;
  }
  // DEVICE destination: read a piece into one staging half while the other is copied up.
  activate_device();
  const std::size_t chunk = staging_chunk(n);
  auto stage_res = staging_reservation(2 * chunk);
  auto stage = allocate(stage_res, 2 * chunk, stream);
  std::array<Event, 2> done;
  const std::size_t nchunks = (n + chunk - 1) / chunk;
  for (std::size_t i = 0; i < nchunks; ++i) {
    const std::size_t len = std::min(chunk, n - i * chunk);
    std::byte* half = stage->data() + (i % 2) * chunk;
    done[i % 2].synchronize();  // the upload that last used this half has finished
    spill_files_.read(*src.extent_, i * chunk, half, len);
    cuda::memcpy_async(dst.data() + i * chunk, half, len, stream);
    done[i % 2].record(stream);
  }
  // The staging buffer is freed when this returns, so the uploads must be complete.
  done[0].synchronize();
  done[1].synchronize();
}

std::unique_ptr<Buffer> BufferResource::copy(const Buffer& src, MemoryReservation& res,
                                             Stream stream) {
  const MemoryType from = src.mem_type();
  const MemoryType to = res.mem_type();
  check_live(to);
  src.wait();
  const std::size_t n = src.size();
  const auto t0 = Clock::now();
  std::unique_ptr<Buffer> dst;
  if (to == MemoryType::DISK) {
    dst = copy_to_disk(src, res, stream);
  } else {
    dst = allocate(res, n, stream);
    if (from == MemoryType::DISK) {
      copy_from_disk(src, *dst, stream);
    } else if (n > 0 && (from == MemoryType::DEVICE || to == MemoryType::DEVICE)) {
      activate_device();
      Event start;
      start.record(stream);
      cuda::memcpy_async(dst->data(), src.data(), n, stream);
      dst->set_pending(stream, std::move(start), copy_stat(from, to));
      return dst;
    } else if (n > 0) {
      std::memcpy(dst->data(), src.data(), n);
    }
  }
  statistics_.add(copy_stat(from, to), static_cast<double>(n), seconds_since(t0));
  return dst;
}

std::unique_ptr<Buffer> BufferResource::move(std::unique_ptr<Buffer>&& buf, MemoryReservation& res,
                                             Stream stream) {
  SPILLWAY_EXPECTS(buf != nullptr, "move of a null buffer");
  if (buf->mem_type() == res.mem_type()) return std::move(buf);
  auto dst = copy(*buf, res, stream);  // may throw: `buf` is still the caller's
  dst->wait();                         // the source may be freed only after the copy has read it
  buf.reset();
  return dst;
}

std::unique_ptr<Buffer> BufferResource::move(std::unique_ptr<Buffer>&& buf, MemoryType t,
                                             Stream stream) {
  SPILLWAY_EXPECTS(buf != nullptr, "move of a null buffer");
  if (buf->mem_type() == t) return std::move(buf);
  auto res = reserve(t, buf->size());
  return move(std::move(buf), res, stream);
}

bool BufferResource::spill_down(std::unique_ptr<Buffer>& buf, Stream stream) {
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
