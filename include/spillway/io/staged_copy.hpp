#pragma once
/// @file staged_copy.hpp
/// The one pipeline that copies between GPU memory and a file (or anything read and written in
/// pieces from host memory) through host staging buffers: the device reader and writer and the
/// BufferResource's DEVICE <-> DISK moves all go through it.

#include <spillway/core/stream.hpp>
#include <spillway/io/thread_pool.hpp>

#include <cstddef>
#include <functional>

namespace spillway::io {

/// Host memory a staged copy goes through, given by the caller: for example a Buffer reserved
/// from PINNED_HOST, so that it counts against that tier's limit. Each lane (one per thread)
/// takes two pieces of it. Pinned memory lets a piece's copy overlap the next piece's read or
/// write; pageable memory works, its copies synchronous.
///
/// Empty staging (the default) means the process's own pool of pinned lanes, kept for reuse
/// per GPU and piece size: fast to start, but outside any BufferResource's accounting.
struct Staging {
  std::byte* data{nullptr};
  std::size_t size{0};
  [[nodiscard]] bool empty() const noexcept { return data == nullptr || size == 0; }
};

/// The staging bytes that `lanes` lanes of `piece`-byte pieces take.
constexpr std::size_t staging_bytes(std::size_t piece, std::size_t lanes) noexcept {
  return 2 * piece * lanes;
}

/// Reads the copy's bytes [begin, begin + len) into host memory `to`.
using PieceReader = std::function<void(std::size_t begin, std::size_t len, std::byte* to)>;
/// Writes the copy's bytes [begin, begin + len) from host memory `from`.
using PieceWriter = std::function<void(std::size_t begin, std::size_t len, const std::byte* from)>;

/// Fills device memory `dst` (`bytes` of it, on the current GPU) with what `read` gives, in
/// pieces of `piece` bytes dealt out in stripes to the caller and `pool`'s threads (at most as
/// many stripes as `staging` has lanes). Each stripe reads its pieces into its lane's two
/// buffers in turn and copies each to the device on its lane's stream, so that the read of
/// one piece overlaps the copy of the one before. The first lane's stream is `stream`, unless
/// that is the default stream; other lanes get streams of their own. Returns once every byte
/// is on the device. Errors from `read` or CUDA propagate (the first one, once no copy still
/// uses a staging buffer). @throws spillway::logic_error when `staging` is too small for one
/// lane (two pieces)
void staged_read_to_device(std::byte* dst, std::size_t bytes, std::size_t piece,
                           const PieceReader& read, Staging staging = {},
                           ThreadPool* pool = nullptr, Stream stream = {});

/// The reverse: copies device memory `src` to host pieces, each handed to `write` once it has
/// arrived, the next piece's copy running while one is written. Returns once every piece is
/// written. Errors as for staged_read_to_device.
void staged_write_from_device(const std::byte* src, std::size_t bytes, std::size_t piece,
                              const PieceWriter& write, Staging staging = {},
                              ThreadPool* pool = nullptr, Stream stream = {});

}  // namespace spillway::io
