#include <spillway/core/cuda.hpp>
#include <spillway/core/event.hpp>
#include <spillway/core/stream.hpp>

namespace spillway {

void Stream::synchronize() const {
  if (cuda::is_available()) cuda::stream_synchronize(*this);
}

OwningStream::OwningStream() : OwningStream(false) {}

OwningStream::OwningStream(bool high_priority) {
  if (cuda::is_available()) stream_ = Stream{cuda::stream_create(high_priority)};
}

OwningStream::~OwningStream() {
  if (stream_.handle() != nullptr) cuda::stream_destroy(stream_.handle());
}

OwningStream& OwningStream::operator=(OwningStream&& other) noexcept {
  if (this != &other) {
    if (stream_.handle() != nullptr) cuda::stream_destroy(stream_.handle());
    stream_ = other.stream_;
    other.stream_ = {};
  }
  return *this;
}

Event::~Event() {
  reset();
}

void Event::reset() noexcept {
  if (event_ == nullptr) return;
  if (timed_) {
    cuda::event_destroy(event_);
  } else {
    cuda::event_release(event_, device_);
  }
  event_ = nullptr;
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    reset();
    event_ = other.event_;
    device_ = other.device_;
    timed_ = other.timed_;
    other.event_ = nullptr;
  }
  return *this;
}

void Event::record(Stream stream) {
  if (!cuda::is_available()) return;
  if (event_ == nullptr) {  // on the stream's device
    event_ = timed_ ? cuda::event_create_for(stream) : cuda::event_acquire(stream, &device_);
  }
  cuda::event_record(event_, stream);
}

bool Event::is_complete() const {
  return event_ == nullptr || cuda::event_query(event_);
}

void Event::synchronize() const {
  if (event_ != nullptr) cuda::event_synchronize(event_);
}

void Event::wait_on(Stream stream) const {
  if (event_ != nullptr) cuda::stream_wait_event(stream, event_);
}

}  // namespace spillway
