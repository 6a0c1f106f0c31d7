// The transfer engine's registered memory: registering it with every backend that takes it,
// exporting ranges of it with each backend's key, and finding the backend for a batch.

#include <spillway/transfer/engine.hpp>

#include <spillway/core/error.hpp>

#include "transfer/detail/engine_impl.hpp"

#include <algorithm>

namespace spillway::transfer {

using detail::RegionRecord;
using detail::Registration;

namespace {

std::string describe(const Region& r) {
  return std::to_string(r.bytes) + " bytes at " +
         std::to_string(reinterpret_cast<std::uintptr_t>(r.ptr));
}

}  // namespace

Registration& TransferEngine::Impl::registration_of(const Region& region, const char* what) {
  const auto it = regions.find(region.id);
  SPILLWAY_EXPECTS(it != regions.end() && it->second.region.ptr == region.ptr &&
                       it->second.region.bytes == region.bytes,
                   std::string("transfer: the ") + what + " region (" + describe(region) +
                       ") is not registered with this engine");
  return it->second;
}

Region TransferEngine::register_memory(void* ptr, std::size_t bytes, MemoryType type, int device) {
  SPILLWAY_EXPECTS(ptr != nullptr, "transfer: register_memory of a null pointer");
  SPILLWAY_EXPECTS(bytes > 0, "transfer: register_memory of zero bytes");
  SPILLWAY_EXPECTS(type != MemoryType::DISK, "transfer: DISK memory cannot be registered");
  SPILLWAY_EXPECTS(type != MemoryType::DEVICE || device >= 0,
                   "transfer: device memory needs its device");
  Registration registration;
  registration.region = Region{0, ptr, bytes, type, type == MemoryType::DEVICE ? device : -1};
  const auto begin = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard backend_lock(impl_->backend_mutex);
  {
    std::lock_guard lock(impl_->mutex);
    for (const auto& [id, r] : impl_->regions) {
      const auto b = reinterpret_cast<std::uintptr_t>(r.region.ptr);
      SPILLWAY_EXPECTS(begin + bytes <= b || b + r.region.bytes <= begin,
                       "transfer: register_memory of " + describe(registration.region) +
                           " overlaps region " + std::to_string(id) + " (" + describe(r.region) +
                           ")");
    }
    registration.region.id = impl_->next_region++;
  }
  // With every backend that takes this memory (one that fails otherwise undoes the others).
  std::string why;
  try {
    for (const auto& backend : impl_->backends) {
      RegionRecord record;
      record.region = registration.region;
      try {
        backend->register_region(record);
        registration.records.emplace_back(std::move(record));
      } catch (const logic_error& e) {
        registration.records.emplace_back();
        why += std::string(why.empty() ? "" : "; ") + e.what();
      }
    }
  } catch (...) {
    for (std::size_t i = 0; i < registration.records.size(); ++i) {
      if (registration.records[i]) impl_->backends[i]->deregister_region(*registration.records[i]);
    }
    throw;
  }
  if (std::none_of(registration.records.begin(), registration.records.end(),
                   [](const auto& r) { return r.has_value(); })) {
    SPILLWAY_FAIL("transfer: register_memory of " + describe(registration.region) +
                  ": no backend of this engine takes it (" + why + ")");
  }
  std::lock_guard lock(impl_->mutex);
  impl_->regions[registration.region.id] = registration;
  return registration.region;
}

void TransferEngine::deregister_memory(const Region& region) {
  std::lock_guard backend_lock(impl_->backend_mutex);
  Registration registration;
  {
    std::lock_guard lock(impl_->mutex);
    registration = impl_->registration_of(region, "deregistered");
    impl_->regions.erase(region.id);
  }
  for (std::size_t i = 0; i < impl_->backends.size(); ++i) {
    if (registration.records[i]) impl_->backends[i]->deregister_region(*registration.records[i]);
  }
}

RemoteRegion TransferEngine::export_region(const Region& region, std::size_t offset,
                                           std::size_t length) const {
  std::lock_guard lock(impl_->mutex);
  const Registration& registration = impl_->registration_of(region, "exported");
  SPILLWAY_EXPECTS(length > 0 && offset <= region.bytes && length <= region.bytes - offset,
                   "transfer: export_region of " + std::to_string(length) + " bytes at " +
                       std::to_string(offset) + " is outside the region of " +
                       std::to_string(region.bytes) + " bytes");
  RemoteRegion out;
  out.engine = impl_->id;
  out.region_id = region.id;
  out.length = length;
  out.type = region.type;
  out.device = region.device;
  out.offset = offset;
  for (std::size_t i = 0; i < impl_->backends.size(); ++i) {
    if (const auto& record = registration.records[i]) {
      out.keys.push_back(
          {impl_->backends[i]->name(), record->address + offset, record->key, record->blob});
    }
  }
  return out;
}

std::string TransferEngine::backend_for(const Region& src, const RemoteRegion& dst) const {
  std::lock_guard lock(impl_->mutex);
  const Registration& local = impl_->registration_of(src, "source");
  std::string why;
  const auto peer = impl_->peer_of_engine(dst.engine, why);
  SPILLWAY_EXPECTS(peer != nullptr, "transfer: backend_for: " + why);
  const std::size_t i = impl_->choose(*peer, local, dst, why);
  SPILLWAY_EXPECTS(i != Impl::npos,
                   "transfer: no backend of this engine can carry a batch to peer " +
                       std::to_string(peer->id) + " (" + why + ")");
  return impl_->backends[i]->name();
}

}  // namespace spillway::transfer
