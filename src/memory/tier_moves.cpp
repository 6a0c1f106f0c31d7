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
#include <array>
#include <cstring>
#include <vector>

namespace spillway {

using detail::Clock;
using detail::copy_stat;
using detail::seconds_since;

namespace {

// A copy between pageable HOST memory and the GPU of at least staged_min bytes goes through
// pinned staging: cudaMemcpy from pageable memory is staged by one driver thread (~7 GB/s,
// against ~55 from pinned memory over PCIe 5), the staged copy by the I/O threads, each
// copying its pieces into a lane of two pinned buffers while the lane's last piece crosses.
constexpr std::size_t staged_min = std::size_t{4} << 20;
constexpr std::size_t staged_piece = std::size_t{2} << 20;
constexpr std::size_t staged_lanes = 8;

}  // namespace

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
      const std::byte* in = src.data();
      const bool staged =
          from == MemoryType::HOST
              ? try_staged_upload(
                    dst->data(), n,
                    [&](std::size_t at, std::size_t len, std::byte* out) {
                      std::memcpy(out, in + at, len);
                    },
                    stream)
              : to == MemoryType::HOST && try_staged_download(dst->data(), in, n, stream);
      if (staged) {
        statistics_.add(copy_stat(from, to), static_cast<double>(n), seconds_since(t0));
        return dst;
      }
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

void BufferResource::write(Buffer& dst, std::size_t offset, const void* src, std::size_t n,
                           Stream stream) {
  const std::array<HostBytes, 1> part{HostBytes(static_cast<const std::byte*>(src), n)};
  SPILLWAY_EXPECTS(src != nullptr || n == 0,
                   "a write of " + std::to_string(n) + " bytes from a null pointer");
  write(dst, offset, part, stream);
}

void BufferResource::write(Buffer& dst, std::size_t offset, std::span<const HostBytes> parts,
                           Stream stream) {
  const MemoryType to = dst.mem_type();
  std::size_t n = 0;
  for (const HostBytes& p : parts) n += p.size();
  SPILLWAY_EXPECTS(to != MemoryType::DISK, "a write of host memory into a DISK buffer");
  SPILLWAY_EXPECTS(offset <= dst.size() && n <= dst.size() - offset,
                   "a write of " + std::to_string(n) + " bytes at " + std::to_string(offset) +
                       " into a buffer of " + std::to_string(dst.size()));
  if (n == 0) return;
  SPILLWAY_NVTX_RANGE("write of host memory");
  const auto t0 = Clock::now();
  std::byte* at = dst.data() + offset;
  // Each part in turn to where it goes, by `copy(to, part)`.
  const auto part_by_part = [&](const auto& copy) {
    std::byte* to_at = at;
    for (const HostBytes& p : parts) {
      if (!p.empty()) copy(to_at, p);
      to_at += p.size();
    }
  };
  if (to != MemoryType::DEVICE) {
    part_by_part([](std::byte* d, const HostBytes& p) { std::memcpy(d, p.data(), p.size()); });
  } else {
    activate_device();
    // The parts one after another: a piece [begin, begin + len) of them, read from each it
    // overlaps (starts[i] is where part i begins).
    std::vector<std::size_t> starts(parts.size() + 1, 0);
    for (std::size_t i = 0; i < parts.size(); ++i) starts[i + 1] = starts[i] + parts[i].size();
    const auto read = [&](std::size_t begin, std::size_t len, std::byte* out) {
      auto i = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), begin) -
                                        starts.begin() - 1);
      for (std::size_t done = 0; done < len; ++i) {
        const std::size_t from = begin + done - starts[i];
        const std::size_t take = std::min(len - done, parts[i].size() - from);
        std::memcpy(out + done, parts[i].data() + from, take);
        done += take;
      }
    };
    if (!try_staged_upload(at, n, read, stream)) {
      part_by_part([&](std::byte* d, const HostBytes& p) {
        cuda::memcpy_async(d, p.data(), p.size(), stream);
      });
      stream.synchronize();  // the parts may go once this returns
    }
  }
  statistics_.add(copy_stat(MemoryType::HOST, to), static_cast<double>(n), seconds_since(t0));
}

std::unique_ptr<Buffer> BufferResource::try_copy_staging(std::size_t n, Stream stream) {
  if (n < staged_min || !is_live(MemoryType::PINNED_HOST)) return nullptr;
  const std::size_t pieces = (n + staged_piece - 1) / staged_piece;
  for (std::size_t lanes = std::min({staged_lanes, spill_files_.io_threads() + 1, pieces});
       lanes > 0; lanes /= 2) {
    if (auto res = try_reserve(MemoryType::PINNED_HOST, io::staging_bytes(staged_piece, lanes))) {
      return allocate(*res, res->size(), stream);
    }
  }
  return nullptr;  // the pinned tier is full: a plain copy
}

bool BufferResource::try_staged_upload(std::byte* dst, std::size_t n, const io::PieceReader& read,
                                       Stream stream) {
  const auto staging = try_copy_staging(n, stream);
  if (!staging) return false;
  io::staged_read_to_device(dst, n, staged_piece, read, {staging->data(), staging->size()},
                            &spill_files_.pool(), stream);
  return true;
}

bool BufferResource::try_staged_download(std::byte* dst, const std::byte* src, std::size_t n,
                                         Stream stream) {
  const auto staging = try_copy_staging(n, stream);
  if (!staging) return false;
  io::staged_write_from_device(
      src, n, staged_piece,
      [&](std::size_t at, std::size_t len, const std::byte* from) {
        std::memcpy(dst + at, from, len);
      },
      {staging->data(), staging->size()}, &spill_files_.pool(), stream);
  return true;
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
