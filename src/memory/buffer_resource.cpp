#include <spillway/memory/buffer_resource.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/memory_step.hpp>
#include <spillway/memory/pinned_memory_resource.hpp>
#include <spillway/memory/spill_injection_adaptor.hpp>
#include <spillway/memory/statistics_adaptor.hpp>

#include "memory/detail/buffer_stats.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace spillway {

using detail::Clock;
using detail::limit_string;
using detail::names;
using detail::physical_memory;
using detail::seconds_since;

BufferResourceConfig::BufferResourceConfig() : BufferResourceConfig(OptionValues{}) {}

BufferResourceConfig::BufferResourceConfig(const OptionValues& o)
    : limits{o.device_limit, o.pinned_limit, o.host_limit, o.disk_limit},
      device_allocator{o.device_allocator},
      device_pool_size{o.device_pool_size},
      pinned_pool{o.pinned_pool},
      pinned_reserve{o.pinned_reserve},
      host_cache{o.host_cache},
      spill_dir{o.spill_dir},
      io_threads{o.io_threads},
      spill_task_size{o.spill_task_size},
      spill_file_size{o.spill_file_size},
      staging_size{o.staging_size},
      spill_period{o.spill_period},
      memory_wait{o.memory_wait},
      adaptors{statistics_adaptor()} {
  if (o.spill_injection > 0) adaptors.push_back(spill_injection_adaptor(o.spill_injection));
}

BufferResourceConfig BufferResourceConfig::from_options() {
  return BufferResourceConfig(options::get());
}

BufferResource::BufferResource(const BufferResourceConfig& config)
    : config_{config},
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
  std::size_t quarter = unlimited_bytes;
  for (MemoryType t : {MemoryType::DEVICE, MemoryType::PINNED_HOST, MemoryType::HOST}) {
    if (is_live(t) && limit(t) != unlimited_bytes) quarter = std::min(quarter, limit(t) / 4);
  }
  transfer_budget_ = std::make_unique<TransferBudget>(quarter);
  for (Tier& tier : tiers_) {
    for (const AdaptorSpec& a : config_.adaptors) {
      if (!tier.mr) continue;
      SPILLWAY_EXPECTS(static_cast<bool>(a.wrap), "the adaptor '" + a.name + "' has no wrap");
      const MemoryType t = tier.mr->mem_type();
      tier.mr = a.wrap(*this, std::move(tier.mr));
      SPILLWAY_EXPECTS(
          tier.mr != nullptr && tier.mr->mem_type() == t,
          "the adaptor '" + a.name + "' gave no resource of " + std::string(to_string(t)));
    }
  }
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
  releases_.fetch_add(1, std::memory_order_seq_cst);
  // (seq_cst: see waiting_for_memory; the lock, so that a waiter about to sleep cannot miss it)
  if (waiting_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard lock(release_mutex_);
    released_.notify_all();
  }
}

std::unique_ptr<Buffer> BufferResource::allocate(MemoryReservation& res, std::size_t bytes,
                                                 Stream stream) {
  const MemoryType t = res.mem_type();
  SPILLWAY_EXPECTS(t != MemoryType::DISK,
                   "DISK buffers are made by copy or move from another tier, not by allocate");
  check_live(t);
  take(res, bytes, t);
  void* ptr = nullptr;
  try {
    if (t != MemoryType::HOST) activate_device();
    ptr = tiers_[index(t)].mr->allocate(bytes, stream);
  } catch (...) {
    res.size_ += charge_of(t, bytes);
    throw;
  }
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

std::unique_ptr<Buffer> BufferResource::join(std::vector<std::unique_ptr<Buffer>>& parts,
                                             std::size_t alignment) {
  if (parts.empty()) return nullptr;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (!parts[i]->follows(*parts[i - 1], alignment)) return nullptr;
  }
  const Buffer& first = *parts.front();
  const Buffer& last = *parts.back();
  if (parts.size() > 1 && first.stream_ != last.stream_) return nullptr;
  const auto bytes = static_cast<std::size_t>(static_cast<const std::byte*>(last.ptr_) -
                                              static_cast<const std::byte*>(first.ptr_)) +
                     last.size_;
  std::unique_ptr<Buffer> out(
      new Buffer(*first.br_, first.type_, bytes, first.ptr_, first.stream_));
  out->view_ = true;
  out->keepalive_ = first.keepalive_;
  parts.clear();
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
  // (The other tiers' profile is their StatisticsAdaptor's; DISK has no allocator.)
  if (t == MemoryType::DISK) {
    statistics_.memory_profiler().on_deallocate(index(t), charge_of(t, buf.size_));
  }
  uncharge(t, charge_of(t, buf.size_));
}

}  // namespace spillway
