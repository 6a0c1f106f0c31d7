#include <spillway/memory/buffer_resource.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/memory_step.hpp>
#include <spillway/memory/pinned_memory_resource.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

namespace spillway {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::size_t physical_memory() noexcept {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                               : 0;
}

std::string limit_string(std::size_t limit) {
  return limit == unlimited_bytes ? "unlimited" : format_bytes(static_cast<double>(limit));
}

/// The statistics names, made once (RapidsMPF's spelling): alloc-device,
/// copy-device-to-pinned_host, spill-device-to-host, spill-host-freed, ...
struct StatNames {
  std::array<std::string, 4> alloc, freed;
  std::array<std::array<std::string, 4>, 4> copy, spill;
  StatNames() {
    for (MemoryType a : all_memory_types) {
      const std::string from(stat_name(a));
      alloc[index(a)] = "alloc-" + from;
      freed[index(a)] = "spill-" + from + "-freed";
      for (MemoryType b : all_memory_types) {
        const std::string to(stat_name(b));
        copy[index(a)][index(b)] = "copy-" + from + "-to-" + to;
        spill[index(a)][index(b)] = "spill-" + from + "-to-" + to;
      }
    }
  }
};
const StatNames& names() {
  static const StatNames n;
  return n;
}
const std::string& copy_stat(MemoryType from, MemoryType to) {
  return names().copy[index(from)][index(to)];
}

}  // namespace

BufferResourceConfig BufferResourceConfig::from_options() {
  const OptionValues o = options::get();
  BufferResourceConfig c;
  c.limits = {o.device_limit, o.pinned_limit, o.host_limit, o.disk_limit};
  c.device_allocator = o.device_allocator;
  c.device_pool_size = o.device_pool_size;
  c.pinned_pool = o.pinned_pool;
  c.pinned_reserve = o.pinned_reserve;
  c.host_cache = o.host_cache;
  c.spill_dir = o.spill_dir;
  c.io_threads = o.io_threads;
  c.spill_task_size = o.spill_task_size;
  c.spill_file_size = o.spill_file_size;
  c.staging_size = o.staging_size;
  c.spill_period = o.spill_period;
  c.memory_wait = o.memory_wait;
  c.spill_injection = o.spill_injection;
  return c;
}

BufferResource::BufferResource(const BufferResourceConfig& config)
    : config_{config},
      statistics_{config.statistics},
      spill_files_{config.spill_dir, config.spill_file_size, config.spill_task_size,
                   config.io_threads},
      stream_{nullptr},
      spill_manager_{[this](MemoryType t) { return available(t); }} {
  for (MemoryType t : all_memory_types) set_headroom(t, config_.headroom[index(t)]);
  const bool gpu = config_.use_gpu && cuda::is_available();
  auto& dev = tiers_[index(MemoryType::DEVICE)];
  auto& pin = tiers_[index(MemoryType::PINNED_HOST)];
  auto& host = tiers_[index(MemoryType::HOST)];
  auto& disk = tiers_[index(MemoryType::DISK)];
  if (gpu) {
    device_ = cuda::current_device();
    dev.capacity = cuda::device_total_memory();
    dev.limit = config_.limits[index(MemoryType::DEVICE)].resolve(dev.capacity);
    std::size_t pool_size = 0;
    if (config_.device_allocator == DeviceAllocator::pool) {
      // The default (no pool size, no limit) is half the device, but no more than 90% of what
      // is free now: other ranks may share this GPU and hold their pools already.
      pool_size = !config_.device_pool_size.is_unlimited()
                      ? config_.device_pool_size.resolve(dev.capacity)
                  : dev.limit != unlimited_bytes
                      ? dev.limit
                      : std::min(dev.capacity / 2, cuda::device_free_memory() / 10 * 9);
    }
    dev.mr = std::make_unique<DeviceMemoryResource>(config_.device_allocator, pool_size);
    dev.live = true;
    if (config_.pinned_pool) {
      pin.capacity = physical_memory();
      pin.limit = config_.limits[index(MemoryType::PINNED_HOST)].resolve(pin.capacity);
      const std::size_t reserve = std::min(config_.pinned_reserve.resolve(pin.capacity), pin.limit);
      SPILLWAY_EXPECTS(
          reserve != unlimited_bytes,
          "a pinned reserve of 'unlimited' means the PINNED_HOST limit, and none is set");
      auto pinned_mr = std::make_unique<PinnedMemoryResource>(reserve);
      pinned_mr_ = pinned_mr.get();
      pin.mr = std::move(pinned_mr);
      pin.live = true;
    }
    stream_ = OwningStream();
  }
  host.capacity = physical_memory();
  host.limit = config_.limits[index(MemoryType::HOST)].resolve(host.capacity);
  auto host_mr = std::make_unique<HostMemoryResource>(
      std::min(config_.host_cache.resolve(host.capacity), host.limit));
  host_mr_ = host_mr.get();
  host.mr = std::move(host_mr);
  host.live = true;
  disk.capacity = spill_files_.free_space();
  disk.limit = config_.limits[index(MemoryType::DISK)].resolve(disk.capacity);
  disk.live = true;
  if (config_.spill_period.count() > 0) {
    spill_manager_.start_background(config_.spill_period, config_.headroom);
  }
}

BufferResource::~BufferResource() {
  spill_manager_.stop_background();
  for (MemoryType t : all_memory_types) {
    if (used(t) != 0) {
      SPILLWAY_LOG(error, "BufferResource destroyed with " << used(t) << " bytes of "
                                                           << to_string(t)
                                                           << " still reserved or allocated");
    }
  }
}

void BufferResource::reset_peak(MemoryType t) noexcept {
  auto& tier = tiers_[index(t)];
  tier.peak.store(tier.used.load());
}

std::size_t BufferResource::available(MemoryType t) const noexcept {
  const auto& tier = tiers_[index(t)];
  const std::size_t u = tier.used.load(std::memory_order_relaxed);
  return u >= tier.limit ? 0 : tier.limit - u;
}

MemoryType BufferResource::top_tier() const noexcept {
  return is_live(MemoryType::DEVICE) ? MemoryType::DEVICE : MemoryType::HOST;
}

std::string BufferResource::usage() const {
  std::string out;
  for (MemoryType t : all_memory_types) {
    if (!is_live(t)) continue;
    if (!out.empty()) out += ", ";
    out += std::string(to_string(t)) + " " + format_bytes(static_cast<double>(used(t))) + "/" +
           limit_string(limit(t));
  }
  return out;
}

std::string BufferResource::describe() const {
  std::string out;
  for (MemoryType t : all_memory_types) {
    if (!is_live(t)) continue;
    const auto& tier = tiers_[index(t)];
    out += std::string(to_string(t)) + ": " +
           (tier.mr ? tier.mr->describe() : "spill files in " + config_.spill_dir) + ", limit " +
           limit_string(tier.limit) + "\n";
  }
  return out;
}

void BufferResource::check_live(MemoryType t) const {
  SPILLWAY_EXPECTS(is_live(t), "the " + std::string(to_string(t)) + " tier is not available " +
                                   (cuda::is_compiled() ? "(no GPU, or disabled by the config)"
                                                        : "(spillway was built without CUDA)"));
}

void BufferResource::activate_device() const {
  if (device_ >= 0) cuda::set_device(device_);
}

bool BufferResource::exceeds_machine(MemoryType t, std::size_t bytes) const noexcept {
  // Host memory beyond the machine's can never be backed, whatever the limit (an unlimited
  // tier would otherwise charge SIZE_MAX, and sizes near it wrap when rounded to pages).
  const auto& tier = tiers_[index(t)];
  return (t == MemoryType::HOST || t == MemoryType::PINNED_HOST) && tier.capacity > 0 &&
         bytes > tier.capacity;
}

std::size_t BufferResource::charge_of(MemoryType t, std::size_t bytes) const noexcept {
  if (t == MemoryType::DISK) return spill_files_.footprint(bytes);
  const auto& mr = tiers_[index(t)].mr;
  return mr ? mr->footprint(bytes) : bytes;
}

bool BufferResource::try_charge(MemoryType t, std::size_t bytes, std::size_t keep_free) noexcept {
  if (exceeds_machine(t, bytes)) return false;
  auto& tier = tiers_[index(t)];
  const std::size_t limit = tier.limit - std::min(tier.limit, keep_free);
  std::size_t cur = tier.used.load(std::memory_order_relaxed);
  do {
    if (bytes > limit || cur > limit - bytes) return false;
  } while (!tier.used.compare_exchange_weak(cur, cur + bytes, std::memory_order_acq_rel));
  const std::size_t now = cur + bytes;
  if (t == MemoryType::HOST && tier.limit != unlimited_bytes) trim_host_cache();
  std::size_t pk = tier.peak.load(std::memory_order_relaxed);
  while (now > pk && !tier.peak.compare_exchange_weak(pk, now, std::memory_order_relaxed)) {
  }
  return true;
}

void BufferResource::trim_host_cache() noexcept {
  // Cached blocks are memory the process holds: keep cached + used within the HOST limit.
  const auto& host = tiers_[index(MemoryType::HOST)];
  const std::size_t u = host.used.load(std::memory_order_relaxed);
  host_mr_->trim_to(u >= host.limit ? 0 : host.limit - u);
}

void BufferResource::uncharge(MemoryType t, std::size_t bytes) noexcept {
  tiers_[index(t)].used.fetch_sub(bytes, std::memory_order_acq_rel);
  releases_.fetch_add(1, std::memory_order_acq_rel);
  if (waiting_.load(std::memory_order_acquire) > 0) {
    std::lock_guard lock(release_mutex_);  // (so that a waiter cannot miss it)
    released_.notify_all();
  }
}

std::optional<MemoryReservation> BufferResource::try_reserve(MemoryType t, std::size_t bytes) {
  check_live(t);
  const std::size_t charge = charge_of(t, bytes);
  if (!try_charge(t, charge)) return std::nullopt;
  return MemoryReservation(this, t, charge);
}

std::optional<MemoryReservation> BufferResource::reserve_or_spill(MemoryType t, std::size_t bytes) {
  check_live(t);
  return spill_and_reserve(t, bytes);
}

std::optional<MemoryReservation> BufferResource::spill_and_reserve(MemoryType t, std::size_t size) {
  const std::size_t bytes = charge_of(t, size);  // (what is charged for a buffer of `size`)
  if (bytes > limit(t) || exceeds_machine(t, bytes)) return std::nullopt;
  if (config_.spill_injection > 0) {
    thread_local std::minstd_rand rng(
        static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id())));
    if (std::uniform_real_distribution<double>(0, 1)(rng) < config_.spill_injection) {
      statistics_.add_count("spill-injected");
      spill_manager_.spill(t, std::max<std::size_t>(bytes, 1));
    }
  }
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

std::unique_ptr<Buffer> BufferResource::allocate(MemoryReservation& res, std::size_t bytes,
                                                 Stream stream) {
  const MemoryType t = res.mem_type();
  SPILLWAY_EXPECTS(t != MemoryType::DISK,
                   "DISK buffers are made by copy or move from another tier, not by allocate");
  check_live(t);
  take(res, bytes, t);
  const auto t0 = Clock::now();
  void* ptr = nullptr;
  PinnedMemoryResource* pinned = t == MemoryType::PINNED_HOST ? pinned_mr_ : nullptr;
  const std::size_t held = pinned != nullptr ? pinned->reserved_bytes() : 0;
  try {
    if (t != MemoryType::HOST) activate_device();
    ptr = tiers_[index(t)].mr->allocate(bytes, stream);
  } catch (...) {
    res.size_ += charge_of(t, bytes);
    throw;
  }
  const double seconds = seconds_since(t0);
  statistics_.add(names().alloc[index(t)], static_cast<double>(bytes), seconds);
  // The pinned pool grew (pages pinned on this thread): its own entry, since it costs far
  // more than a reuse. Another thread's growth at the same time may be counted here too.
  if (const std::size_t now = pinned != nullptr ? pinned->reserved_bytes() : 0; now > held) {
    statistics_.add("alloc-pinned_host-grow", static_cast<double>(now - held), seconds);
  }
  statistics_.memory_profiler().on_allocate(index(t), charge_of(t, bytes));
  return std::unique_ptr<Buffer>(new Buffer(*this, t, bytes, ptr, stream));
}

std::unique_ptr<Buffer> BufferResource::allocate(MemoryType t, std::size_t bytes, Stream stream) {
  auto res = reserve(t, bytes);
  return allocate(res, bytes, stream);
}

std::unique_ptr<Buffer> BufferResource::view(const Buffer& of, std::size_t offset, std::size_t size,
                                             std::shared_ptr<const void> keepalive,
                                             std::optional<Stream> stream) {
  SPILLWAY_EXPECTS(of.mem_type() != MemoryType::DISK, "a view of a DISK buffer");
  SPILLWAY_EXPECTS(offset <= of.size() && size <= of.size() - offset,
                   "a view of bytes [" + std::to_string(offset) + ", +" + std::to_string(size) +
                       ") of a " + std::to_string(of.size()) + "-byte buffer");
  auto* ptr = const_cast<std::byte*>(of.data()) + offset;  // NOLINT: see the declaration
  std::unique_ptr<Buffer> out(
      new Buffer(*of.br_, of.type_, size, ptr, stream.value_or(of.stream_)));
  out->view_ = true;
  out->keepalive_ = std::move(keepalive);
  return out;
}

void BufferResource::free_buffer(Buffer& buf) noexcept {
  const MemoryType t = buf.type_;
  if (t == MemoryType::DISK) {
    if (buf.extent_) spill_files_.release(*buf.extent_);
  } else {
    try {
      if (t != MemoryType::HOST) activate_device();
    } catch (...) {
    }
    tiers_[index(t)].mr->deallocate(buf.ptr_, buf.size_, buf.stream_);
  }
  statistics_.memory_profiler().on_deallocate(index(t), charge_of(t, buf.size_));
  uncharge(t, charge_of(t, buf.size_));
}

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
