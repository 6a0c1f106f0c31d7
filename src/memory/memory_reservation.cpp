#include <spillway/memory/memory_reservation.hpp>

#include <spillway/memory/buffer_resource.hpp>

namespace spillway {

void MemoryReservation::release() noexcept {
  if (br_ != nullptr && size_ > 0) br_->uncharge(type_, size_);
  size_ = 0;
}

}  // namespace spillway
