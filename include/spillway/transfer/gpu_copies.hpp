#pragma once
// Batched GPU copies as the transfer engine's cuda_ipc backend makes them, and the local
// communicator and the shuffle share (for spillway's own modules, not a stable API): one
// gather/scatter kernel, cudaMemcpyBatchAsync on the copy engines, both at once, or a
// cudaMemcpyAsync per chunk (the baseline), and which of them suits a batch.

#include <spillway/core/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace spillway::transfer::detail {

/// dst[0, bytes) = src[0, bytes), both addresses the current GPU reaches.
struct Piece {
  void* dst;
  const void* src;
  std::size_t bytes;
};

enum class CopyMethod : std::uint8_t {
  automatic = 0,
  kernel = 1,
  batch = 2,
  per_chunk = 3,
  mixed = 4,  ///< the kernel and the copy engines at once, each on a share of the pieces
};

/// "auto", "kernel", "batch", "per_chunk" or "mixed". @throws spillway::logic_error naming
/// the others
CopyMethod parse_copy_method(const std::string& name);
const char* to_string(CopyMethod method) noexcept;
/// What `automatic` means for pieces of `mean_bytes` on average; `kernel_reachable` says
/// whether both sides are memory the kernel can address (device or page-locked host memory),
/// `over_pcie` whether one side is host memory.
CopyMethod choose(CopyMethod wanted, std::size_t mean_bytes, bool kernel_reachable,
                  bool over_pcie) noexcept;

/// Room for a kernel batch's descriptors: page-locked host memory they are written into and
/// the kernel reads them from, kept between batches (an allocation per batch costs more than
/// a small batch's copy). Reuse it only once the stream has passed the batch that used it.
class CopyScratch {
 public:
  CopyScratch() = default;
  CopyScratch(const CopyScratch&) = delete;
  CopyScratch& operator=(const CopyScratch&) = delete;
  ~CopyScratch();
  /// Makes room for at least `bytes`, keeping what it held (at a new address when it grows:
  /// spans into it are then stale).
  void reserve(std::size_t bytes);
  /// Room for `n` pieces at its start: pieces written there are not copied again by
  /// copy_pieces (a large batch's pieces cost more to copy than to build).
  std::span<Piece> pieces(std::size_t n);
  [[nodiscard]] std::byte* host() const noexcept { return host_; }
  /// host() as the GPU addresses it (the kernel reads the descriptors there).
  [[nodiscard]] std::byte* device() const noexcept { return device_; }

 private:
  std::byte* host_{nullptr};
  std::byte* device_{nullptr};
  [[maybe_unused]] std::size_t bytes_{0};  // unused in a build without CUDA
};

/// A second stream for mixed copies, two events of the caller's that fork it from the main
/// stream and join it back (reused by every call: a wait takes the event as recorded then),
/// and the kernel's share of the bytes (0: kernel_share's by chunk size).
struct SideStream {
  Stream stream;
  void* fork{nullptr};
  void* join{nullptr};
  double kernel_share{0};
};

/// Queues the copies on `stream` (a stream of spillway's own). `method` is not automatic;
/// mixed needs `side`. @throws spillway::cuda_error
void copy_pieces(std::span<const Piece> pieces, CopyMethod method, Stream stream,
                 CopyScratch& scratch, const SideStream* side = nullptr);

/// What share of a mixed batch's bytes goes to the kernel, for pieces of `mean_bytes`.
double kernel_share(std::size_t mean_bytes) noexcept;

/// The kernel on `side` copies the first pieces, up to `share` of the bytes; the copy
/// engines copy the rest on `stream`, which then waits for the kernel. Over PCIe the
/// kernel's stores reach ~0.94 of the copy engines' and the copy engines lose time per
/// piece; together they fill the link.
void copy_mixed(std::span<const Piece> pieces, double share, Stream stream, const SideStream& side,
                CopyScratch& scratch);

}  // namespace spillway::transfer::detail
