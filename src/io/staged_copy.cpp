#include <spillway/io/staged_copy.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/event.hpp>
#include <spillway/core/units.hpp>

#include "io/detail/bounce_lanes.hpp"
#include "io/detail/tasks.hpp"

#include <algorithm>
#include <optional>

namespace spillway::io {

namespace {

using detail::Lane;

/// The lanes of one staged copy, carved from the caller's staging or taken from the pool (and
/// given back, once no copy uses them, when this goes).
class Lanes {
 public:
  Lanes(std::size_t want, std::size_t piece, Staging staging, Stream stream) {
    const int device = cuda::current_device();
    if (staging.empty()) {
      pooled_ = detail::lane_pool().take(device, piece, want);
      for (auto& p : pooled_) lanes_.push_back(&p->lane);
      return;
    }
    const std::size_t fit = staging.size / staging_bytes(piece, 1);
    SPILLWAY_EXPECTS(fit > 0, "staging of " + format_bytes(static_cast<double>(staging.size)) +
                                  " is smaller than one lane (two pieces of " +
                                  format_bytes(static_cast<double>(piece)) + ")");
    const std::size_t n = std::min(want, fit);
    own_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      Lane& l = own_[i];
      l.buf = {staging.data + staging_bytes(piece, i),
               staging.data + staging_bytes(piece, i) + piece};
      if (i == 0 && stream.handle() != nullptr) {
        l.stream = stream;
      } else {
        l.stream = streams_.emplace_back().view();
      }
      lanes_.push_back(&l);
    }
  }
  ~Lanes() {
    for (Lane* l : lanes_) {
      try {
        l->stream.synchronize();  // no copy still uses a buffer (after an error)
      } catch (const std::exception&) {
      }
    }
    if (!pooled_.empty()) detail::lane_pool().give_back(pooled_);
  }
  Lanes(const Lanes&) = delete;
  Lanes& operator=(const Lanes&) = delete;

  [[nodiscard]] std::size_t size() const noexcept { return lanes_.size(); }
  Lane& operator[](std::size_t i) noexcept { return *lanes_[i]; }

 private:
  std::vector<std::unique_ptr<detail::PooledLane>> pooled_;
  std::vector<Lane> own_;  // sized once: lanes_ points into it
  std::vector<OwningStream> streams_;
  std::vector<Lane*> lanes_;
};

/// stripe(s, stripes, lane) for each stripe of `pieces`, one per lane, on the caller and `pool`.
void run_stripes(std::size_t pieces, std::size_t piece, Staging staging, ThreadPool* pool,
                 Stream stream,
                 const std::function<void(std::size_t, std::size_t, Lane&)>& stripe) {
  const std::size_t want = std::min(pieces, pool != nullptr ? pool->size() + 1 : 1);
  if (want == 0) return;
  SPILLWAY_EXPECTS(piece > 0, "a staged copy needs a positive piece size");
  Lanes lanes(want, piece, staging, stream);
  const int device = cuda::current_device();
  const std::size_t stripes = lanes.size();
  // Lanes on streams of their own start after the work queued on `stream` so far (the
  // allocation of the device buffer, the kernel that wrote it).
  Event ready;
  for (std::size_t s = 0; s < stripes; ++s) {
    if (lanes[s].stream == stream) continue;
    if (ready.handle() == nullptr) ready.record(stream);
    ready.wait_on(lanes[s].stream);
  }
  detail::run_tasks(stripes > 1 ? pool : nullptr, stripes, [&](std::size_t s) {
    cuda::set_device(device);  // (a pool thread's GPU may differ)
    stripe(s, stripes, lanes[s]);
  });
}

}  // namespace

void staged_read_to_device(std::byte* dst, std::size_t bytes, std::size_t piece,
                           const PieceReader& read, Staging staging, ThreadPool* pool,
                           Stream stream) {
  const std::size_t pieces = piece == 0 ? 0 : (bytes + piece - 1) / piece;
  run_stripes(pieces, piece, staging, pool, stream,
              [&](std::size_t s, std::size_t stripes, Lane& lane) {
                std::size_t k = 0;
                for (std::size_t t = s; t < pieces; t += stripes, ++k) {
                  const std::size_t begin = t * piece;
                  const std::size_t len = std::min(piece, bytes - begin);
                  const std::size_t slot = k & 1U;
                  lane.done[slot].synchronize();  // the copy out of this buffer, two pieces ago
                  read(begin, len, lane.buf[slot]);
                  cuda::memcpy_async(dst + begin, lane.buf[slot], len, lane.stream);
                  lane.done[slot].record(lane.stream);
                }
                lane.stream.synchronize();
              });
}

void staged_write_from_device(const std::byte* src, std::size_t bytes, std::size_t piece,
                              const PieceWriter& write, Staging staging, ThreadPool* pool,
                              Stream stream) {
  const std::size_t pieces = piece == 0 ? 0 : (bytes + piece - 1) / piece;
  run_stripes(
      pieces, piece, staging, pool, stream, [&](std::size_t s, std::size_t stripes, Lane& lane) {
        auto task = [&](std::size_t k) { return s + k * stripes; };  // the stripe's k-th piece
        auto length = [&](std::size_t t) { return std::min(piece, bytes - t * piece); };
        auto copy_in = [&](std::size_t k) {
          const std::size_t t = task(k);
          cuda::memcpy_async(lane.buf[k & 1U], src + t * piece, length(t), lane.stream);
          lane.done[k & 1U].record(lane.stream);
        };
        copy_in(0);
        for (std::size_t k = 0; task(k) < pieces; ++k) {
          // The next piece's copy runs while this one is written (its buffer was written out by
          // the previous iteration, synchronously).
          if (task(k + 1) < pieces) copy_in(k + 1);
          lane.done[k & 1U].synchronize();
          write(task(k) * piece, length(task(k)), lane.buf[k & 1U]);
        }
      });
}

}  // namespace spillway::io
