#pragma once
/// @file stream.hpp
/// A CUDA stream as seen by code that must compile without nvcc.

#include <cstddef>

namespace spillway {

/// A non-owning view of a CUDA stream (a `cudaStream_t` held as an opaque pointer), passed by
/// value. The default-constructed Stream is CUDA's legacy default stream. In a CPU build every
/// Stream is the default one and synchronizing it does nothing.
class Stream {
 public:
  constexpr Stream() noexcept = default;
  /// Wraps a `cudaStream_t` (pass it cast to `void*`).
  constexpr explicit Stream(void* handle) noexcept : handle_{handle} {}
  [[nodiscard]] constexpr void* handle() const noexcept { return handle_; }
  /// Blocks until all work queued on the stream is done. @throws spillway::cuda_error
  void synchronize() const;
  friend constexpr bool operator==(Stream a, Stream b) noexcept { return a.handle_ == b.handle_; }

 private:
  void* handle_{nullptr};
};

/// An owned, non-blocking CUDA stream; move-only. In a CPU build (or without a GPU) it is
/// the default stream.
class OwningStream {
 public:
  /// Creates a stream on the current device. @throws spillway::cuda_error
  OwningStream();
  /// With `high_priority`, a stream of the device's greatest priority: its kernels (device to
  /// device copies among them) are scheduled before those of other streams waiting for the
  /// SMs, so that a transfer's copies are not held up behind long compute kernels.
  explicit OwningStream(bool high_priority);
  /// Owns nothing: the default stream.
  explicit OwningStream(std::nullptr_t) noexcept {}
  ~OwningStream();
  OwningStream(const OwningStream&) = delete;
  OwningStream& operator=(const OwningStream&) = delete;
  OwningStream(OwningStream&& other) noexcept : stream_{other.stream_} { other.stream_ = {}; }
  OwningStream& operator=(OwningStream&& other) noexcept;
  [[nodiscard]] Stream view() const noexcept { return stream_; }
  operator Stream() const noexcept { return stream_; }  // NOLINT(google-explicit-constructor)

 private:
  Stream stream_;
};

}  // namespace spillway
