#include <spillway/memory/buffer.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/memory/buffer_resource.hpp>

namespace spillway {

Buffer::~Buffer() {
  try {
    wait();
  } catch (...) {
    // A failed copy leaves nothing to wait for; the memory is returned all the same.
  }
  if (!view_) br_->free_buffer(*this);
}

std::byte* Buffer::data() {
  SPILLWAY_EXPECTS(type_ != MemoryType::DISK,
                   "a DISK buffer has no pointer: move it to a memory tier first");
  return static_cast<std::byte*>(ptr_);
}

const std::byte* Buffer::data() const {
  SPILLWAY_EXPECTS(type_ != MemoryType::DISK,
                   "a DISK buffer has no pointer: move it to a memory tier first");
  return static_cast<const std::byte*>(ptr_);
}

void Buffer::set_pending(Stream stream, Event start, std::string_view stat) {
  stream_ = stream;
  pending_ = std::make_unique<Pending>();
  pending_->start = std::move(start);
  pending_->stat = stat;
  pending_->end.record(stream);
}

bool Buffer::follows(const Buffer& prev, std::size_t alignment) const noexcept {
  if (!view_ || !prev.view_ || !keepalive_ || keepalive_ != prev.keepalive_ ||
      type_ != prev.type_ || type_ == MemoryType::DISK || alignment == 0) {
    return false;
  }
  const std::size_t step = (prev.size_ + alignment - 1) / alignment * alignment;
  return static_cast<const std::byte*>(ptr_) == static_cast<const std::byte*>(prev.ptr_) + step;
}

bool Buffer::is_ready() const {
  if (!pending_) return true;
  if (!pending_->end.is_complete()) return false;
  finish_pending();
  return true;
}

void Buffer::wait() const {
  if (!pending_) return;
  pending_->end.synchronize();
  finish_pending();
}

void Buffer::set_stream(Stream stream) {
  if (stream == stream_) return;
  wait();
  if (type_ == MemoryType::DEVICE || type_ == MemoryType::PINNED_HOST) stream_.synchronize();
  stream_ = stream;
}

void Buffer::finish_pending() const {
  auto p = std::move(pending_);
  const float ms = cuda::event_elapsed_ms(p->start.handle(), p->end.handle());
  br_->statistics().add(p->stat, static_cast<double>(size_), ms / 1e3);
}

}  // namespace spillway
