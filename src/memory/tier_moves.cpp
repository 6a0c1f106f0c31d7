// BufferResource's copies and moves between tiers. DEVICE <-> DISK goes through the staged-copy
// pipeline (io/staged_copy.hpp), on staging paid for from PINNED_HOST or HOST.
#include <spillway/memory/buffer_resource.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/memory_step.hpp>

#include "core/detail/nvtx.hpp"

#include "memory/detail/buffer_stats.hpp"

#include <algorithm>
#include <cstring>

namespace spillway {

using detail::Clock;
using detail::copy_stat;
using detail::seconds_since;

BufferResource::Staging BufferResource::allocate_staging(std::size_t piece, std::size_t granule,
                                                         std::size_t lanes, Stream stream) {
  SPILLWAY_EXPECTS(granule > 0 && piece >= granule && piece % granule == 0 && lanes > 0,
                   "staging of " + std::to_string(lanes) + " lanes of " + std::to_string(piece) +
                       "-byte pieces in granules of " + std::to_string(granule) +
                       ": the piece must be a positive multiple of the granule");
  static constexpr std::array<MemoryType, 2> order{MemoryType::PINNED_HOST, MemoryType::HOST};
  const MemoryStep step("staging for a copy between the GPU and a file");
  for (std::size_t p = piece;; p = std::max(granule, p / 2 / granule * granule)) {
    for (std::size_t l = lanes;; l /= 2) {
      const std::size_t bytes = io::staging_bytes(p, l);
      auto res = p == granule && l == 1 ? reserve_first_fit(order, bytes)  // the least: waits
                                        : try_reserve_first_fit(order, bytes);
      if (res) return {allocate(*res, bytes, stream), p};
      if (l == 1) break;
    }
  }
}

BufferResource::Staging BufferResource::disk_staging(std::size_t n, Stream stream) {
  const std::size_t granule = spill_files_.piece_size();
  // One lane, two halves: the spill files' own threads (io_threads) write each half in
  // parallel. By default each half is as large as one piece per I/O thread.
  const std::size_t half =
      config_.staging_size > 0 ? config_.staging_size / 2 : spill_files_.io_threads() * granule;
  const std::size_t piece =
      std::min(round_up(n, granule), std::max(granule, half / granule * granule));
  return allocate_staging(piece, granule, 1, stream);
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
  if (n == 0) return dst;  // nothing to stage
  const Staging stage = disk_staging(n, stream);
  if (src.mem_type() == MemoryType::DISK) {  // piece by piece through the staging
    for (std::size_t at = 0; at < n; at += stage.piece) {
      const std::size_t len = std::min(stage.piece, n - at);
      spill_files_.read(*src.extent_, at, stage.buffer->data(), len);
      spill_files_.write(e, at, stage.buffer->data(), len);
    }
    return dst;
  }
  activate_device();
  io::staged_write_from_device(
      src.data(), n, stage.piece,
      [&](std::size_t at, std::size_t len, const std::byte* from) {
        spill_files_.write(e, at, from, len);
      },
      stage.view(), nullptr, stream);
  return dst;
}

void BufferResource::copy_from_disk(const Buffer& src, Buffer& dst, Stream stream) {
  const std::size_t n = src.size();
  if (is_host_accessible(dst.mem_type())) {
    spill_files_.read(*src.extent_, 0, dst.data(), n);
    return;
  }
  if (n == 0) return;
  activate_device();
  const Staging stage = disk_staging(n, stream);
  io::staged_read_to_device(
      dst.data(), n, stage.piece,
      [&](std::size_t at, std::size_t len, std::byte* to) {
        spill_files_.read(*src.extent_, at, to, len);
      },
      stage.view(), nullptr, stream);
}

std::unique_ptr<Buffer> BufferResource::copy(const Buffer& src, MemoryReservation& res,
                                             Stream stream) {
  SPILLWAY_NVTX_RANGE("copy between tiers");
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
      Event start = Event::timed();
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

}  // namespace spillway
