#include <spillway/memory/file_transfers.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>

#include <algorithm>

namespace spillway {

void read_file_into(BufferResource& br, const std::string& path, std::uint64_t offset, Buffer& dst,
                    io::ThreadPool* pool, const io::ReadOptions& options) {
  SPILLWAY_EXPECTS(dst.mem_type() != MemoryType::DISK,
                   "read_file_into: a DISK buffer is not read into (read a host or device one)");
  SPILLWAY_EXPECTS(options.task_size > 0, "read_file_into: the task size must be positive");
  dst.wait();  // nothing still writes it
  if (dst.mem_type() != MemoryType::DEVICE || cuda::reads_pageable_memory()) {
    // Host memory, or a GPU that reads it through the host page tables: no staging at all.
    if (dst.mem_type() == MemoryType::DEVICE) {
      io::read_file_to_device(path, dst.data(), dst.size(), offset, pool, options);
    } else {
      io::read_file(path, dst.data(), dst.size(), offset, pool, options);
    }
    return;
  }
  constexpr std::size_t granule = 4096;  // (direct reads need 4096-aligned pieces)
  const std::size_t piece = round_up(options.task_size, granule);
  const std::size_t tasks = (dst.size() + piece - 1) / piece;
  if (tasks == 0) return;
  const std::size_t lanes = std::min(tasks, pool != nullptr ? pool->size() + 1 : 1);
  // (Reserved also when cuFile then reads without it: briefly, and within the limits.)
  const auto stage = br.allocate_staging(piece, granule, lanes, br.stream());
  io::ReadOptions staged = options;
  staged.task_size = stage.piece;
  io::read_file_to_device(path, dst.data(), dst.size(), offset, pool, staged, stage.view());
}

}  // namespace spillway
