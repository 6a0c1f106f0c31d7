#pragma once
// The thread pool of the CPU table operations (internal).

#include <spillway/io/thread_pool.hpp>

#include <cstddef>
#include <functional>

namespace spillway::detail {

/// A process-wide pool with one worker per core, made at first use.
io::ThreadPool& cpu_pool();

/// `requested`, or the number of cores when 0.
std::size_t resolve_threads(std::size_t requested);

/// Splits [0, n) into `threads` contiguous ranges and runs fn(t, begin, end) for each, in
/// parallel on the pool and the calling thread.
void parallel_ranges(std::size_t n, std::size_t threads,
                     const std::function<void(std::size_t, std::size_t, std::size_t)>& fn);

/// Copies `count` validity bits from `src` (bit `src_bit` on; nullptr: all valid) to `dst`
/// (bit `dst_bit` on). Bits of `dst` outside the range are left as they are.
void copy_bits(std::uint8_t* dst, std::size_t dst_bit, const std::uint8_t* src, std::size_t src_bit,
               std::size_t count) noexcept;

}  // namespace spillway::detail
