#pragma once
// A benchmark's input staged in host memory before its clock starts, as a pipeline that read
// it from files would hold it: outside the rank's memory budget, page-locked (so that the GPU
// copies it at PCIe speed; --pageable: as malloc gave it). The operator takes it a piece at a
// time, each copied into the rank's memory when asked for, so that the clock covers the copies
// up, not the making of the data (spillway-bench-join, spillway-bench-groupby).

#include <spillway/comm/collectives.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/ops/table_source.hpp>
#include <spillway/table/table.hpp>

#include "pcie.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace spillway::tools {

/// Pieces of INT64 columns in host memory. Not thread-safe; a source of it serves one run.
class StagedInput {
 public:
  using Columns = std::vector<std::vector<std::int64_t>>;

  /// `pinned`: page-locked where CUDA is.
  explicit StagedInput(bool pinned) : pinned_{pinned && cuda::is_available()} {}
  ~StagedInput() {
    for (const auto& piece : pieces_) {
      for (const auto& c : piece) {
        if (pinned_ && !c.empty()) cuda::host_unregister(const_cast<std::int64_t*>(c.data()));
      }
    }
  }
  StagedInput(const StagedInput&) = delete;
  StagedInput& operator=(const StagedInput&) = delete;

  void add(Columns columns) {
    for (auto& c : columns) {
      bytes_ += c.size() * 8;
      if (pinned_ && !c.empty()) cuda::host_register(c.data(), c.size() * 8);
    }
    pieces_.push_back(std::move(columns));
  }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] bool pinned() const noexcept { return pinned_; }

  /// The pieces in order, each copied into a table of tier `to` of `br` (named `names`) when
  /// asked for: to the GPU on the resource's stream.
  ops::TableSource source(MemoryType to, BufferResource& br, std::vector<std::string> names) const {
    auto next = std::make_shared<std::size_t>(0);
    return [this, next, to, &br, names]() -> std::optional<Table> {
      if (*next >= pieces_.size()) return std::nullopt;
      const Columns& piece = pieces_[(*next)++];
      std::vector<Column> cols;
      for (const auto& c : piece) {
        const std::size_t n = c.size() * 8;
        auto b = br.allocate(to, n, br.stream());
        if (n > 0 && to != MemoryType::DEVICE) {
          std::memcpy(b->data(), c.data(), n);
        } else if (n > 0 && pinned_) {
          cuda::memcpy_async(b->data(), c.data(), n, br.stream());
        } else if (n > 0) {
          br.write(*b, 0, c.data(), n, br.stream());  // staged through pinned memory
        }
        cols.emplace_back(TypeId::INT64, c.size(), std::move(b));
      }
      return Table(std::move(cols), names);
    };
  }

 private:
  bool pinned_;
  std::vector<Columns> pieces_;
  std::size_t bytes_{0};
};

/// The piece (bytes) a benchmark stages its input in: `piece_mib` when given (> 0), else under
/// a limit given in MiB (-1: none) an eighth of the smallest limit, from 64 KiB to 64 MiB; 0
/// without either (the input whole).
inline std::size_t piece_bytes(long long piece_mib, long long host_limit_mib,
                               long long device_limit_mib) {
  if (piece_mib > 0) return static_cast<std::size_t>(piece_mib) * MiB;
  long long limit = -1;
  for (const long long l : {host_limit_mib, device_limit_mib}) {
    if (l > 0) limit = limit < 0 ? l : std::min(limit, l);
  }
  if (limit < 0) return 0;
  return std::clamp<std::size_t>(static_cast<std::size_t>(limit) * MiB / 8, 64 * KiB, 64 * MiB);
}

/// `rows` rows made `piece_rows` at a time by make(begin, end) (host columns) and staged in
/// `in`; no rows are one piece without rows (an operator's source gives at least one table).
template <typename Make>
void stage(StagedInput& in, std::size_t rows, std::size_t piece_rows, Make&& make) {
  std::size_t at = 0;
  do {
    const std::size_t end = std::min(rows, at + std::max<std::size_t>(piece_rows, 1));
    in.add(make(at, end));
    at = end;
  } while (at < rows);
}

/// The PCIe floor beside a median time, as a line to print: the least time a run on the GPU
/// can take when each rank's input (`input_bytes`) starts in host memory. The bytes that must
/// cross the bus: each rank's input up once, and what of it exceeds its device limit down and
/// up once more; the ranks that share a GPU (of one host) share its link, whose rate with
/// copies both ways at once is `gbps`. The slowest link's. Collective.
inline std::string pcie_floor_line(Communicator& comm, const BufferResource& br, double input_bytes,
                                   double gbps, double median) {
  const auto n = static_cast<std::size_t>(comm.nranks());
  const auto me = static_cast<std::size_t>(comm.rank());
  const double over =
      std::max(0.0, input_bytes - static_cast<double>(br.limit(MemoryType::DEVICE)));
  std::vector<double> bytes(n, 0);
  std::vector<double> links(n, 0);
  bytes[me] = input_bytes + 2 * over;
  links[me] = static_cast<double>(pcie_link_id(br.device()));
  bytes = allreduce(comm, 902, std::span<const double>(bytes), ReduceOp::sum);
  links = allreduce(comm, 903, std::span<const double>(links), ReduceOp::sum);
  const double floor = pcie_floor_seconds(bytes, links, gbps);
  std::ostringstream f;
  f << "PCIe floor: " << floor << " sec (each rank's input up once, and what exceeds its device "
    << "limit down and up once more, the ranks of a GPU on its link at " << gbps
    << " GB/s, its H2D rate with copies both ways at once) | the median reaches " << floor / median
    << " of it";
  return f.str();
}

}  // namespace spillway::tools
