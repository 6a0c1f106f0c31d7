#pragma once
/// @file buffer.hpp
/// Owned bytes in exactly one memory tier.

#include <spillway/core/event.hpp>
#include <spillway/core/stream.hpp>
#include <spillway/memory/memory_type.hpp>
#include <spillway/memory/spill_files.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace spillway {

class BufferResource;

/// Bytes owned in one tier, paid for by a MemoryReservation of that tier and returned to it by
/// the destructor. DEVICE, PINNED_HOST and HOST buffers have a pointer; a DISK buffer is an
/// extent of a spill file. Made only by a BufferResource (allocate, copy, move), which must
/// outlive it. Move-only through std::unique_ptr; not thread-safe (one owner at a time).
///
/// A buffer filled by an asynchronous copy is "not ready" until the copy has completed on its
/// stream: use `wait()` before reading it from the host, or order later work on `stream()`.
/// Device and pinned memory is freed in stream order on `stream()`, so that stream must outlive
/// the buffer; `set_stream()` hands the buffer to a longer-lived stream (a SpillableStore does
/// this with the resource's own stream when it takes a buffer).
class Buffer {
 public:
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&&) = delete;
  Buffer& operator=(Buffer&&) = delete;

  [[nodiscard]] MemoryType mem_type() const noexcept { return type_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// The bytes (device or host pointer; nullptr for size 0).
  /// @throws spillway::logic_error for a DISK buffer, which has no pointer.
  [[nodiscard]] std::byte* data();
  [[nodiscard]] const std::byte* data() const;
  /// The resource that made the buffer (and holds its reservation).
  [[nodiscard]] BufferResource& resource() const noexcept { return *br_; }
  /// The stream the last write into this buffer was queued on.
  [[nodiscard]] Stream stream() const noexcept { return stream_; }
  /// True when no asynchronous copy into the buffer is still running.
  [[nodiscard]] bool is_ready() const;
  /// Blocks until the buffer is ready. @throws spillway::cuda_error
  void wait() const;
  /// Makes `stream` the buffer's stream, after all work queued on the old one has completed.
  /// @throws spillway::cuda_error
  void set_stream(Stream stream);
  /// Whether the buffer borrows its bytes (BufferResource::view): it holds no reservation and
  /// its destructor frees nothing.
  [[nodiscard]] bool is_view() const noexcept { return view_; }
  /// Whether this view starts where `prev` would be followed in a run of buffers each at an
  /// offset aligned to `alignment` from the first (prev's start plus its size rounded up to
  /// `alignment`), and both hold the same block: together they are one span of it
  /// (BufferResource::join).
  [[nodiscard]] bool follows(const Buffer& prev, std::size_t alignment) const noexcept;
  /// The spill-file extent of a DISK buffer (nullptr otherwise); for tests and diagnostics.
  [[nodiscard]] const DiskExtent* disk_extent() const noexcept {
    return extent_ ? &*extent_ : nullptr;
  }

 private:
  friend class BufferResource;
  Buffer(BufferResource& br, MemoryType type, std::size_t size, void* ptr, Stream stream) noexcept
      : br_{&br}, type_{type}, size_{size}, ptr_{ptr}, stream_{stream} {}
  Buffer(BufferResource& br, DiskExtent extent) noexcept
      : br_{&br}, type_{MemoryType::DISK}, size_{extent.size}, extent_{std::move(extent)} {}

  /// Marks the buffer as filled by an asynchronous copy named `stat` that started at `start`.
  /// `stat` must outlive the buffer (the resource's static names do).
  void set_pending(Stream stream, Event start, std::string_view stat);
  /// Records the completed copy's time in the statistics (once).
  void finish_pending() const;

  BufferResource* br_;
  MemoryType type_;
  std::size_t size_;
  void* ptr_{nullptr};
  Stream stream_{};
  std::optional<DiskExtent> extent_;
  bool view_{false};
  std::shared_ptr<const void> keepalive_;  // what a view holds alive (may be empty)
  struct Pending {
    Event start, end = Event::timed();
    std::string_view stat;
  };
  mutable std::unique_ptr<Pending> pending_;
};

}  // namespace spillway
