#pragma once
/// @file buffer_resource.hpp
/// The per-rank owner of all memory: tiers with hard limits, reservations, allocation, copies
/// and moves between tiers, spilling.

#include <spillway/core/limit.hpp>
#include <spillway/core/options.hpp>
#include <spillway/core/stream.hpp>
#include <spillway/io/staged_copy.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/memory_reservation.hpp>
#include <spillway/memory/memory_resource.hpp>
#include <spillway/memory/memory_type.hpp>
#include <spillway/memory/pinned_memory_resource.hpp>
#include <spillway/memory/resource_adaptor.hpp>
#include <spillway/memory/spill_files.hpp>
#include <spillway/memory/spill_manager.hpp>
#include <spillway/memory/transfer_budget.hpp>
#include <spillway/stats/statistics.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace spillway {

/// How a BufferResource is set up. The settings that have a SPILLWAY_* variable start from
/// the registry's defaults (options.hpp): `BufferResourceConfig{}` is what the settings say
/// with no variable set and no setter called, `from_options()` what they say now.
struct BufferResourceConfig {
  /// The settings' defaults.
  BufferResourceConfig();
  /// From `o`: limits, allocators, spill and staging sizes, waits.
  explicit BufferResourceConfig(const OptionValues& o);
  /// The configuration the current options (and SPILLWAY_* variables) describe.
  static BufferResourceConfig from_options();

  /// Per tier (indexed by MemoryType): a byte count, a fraction of capacity, or unlimited.
  std::array<Limit, 4> limits{};
  DeviceAllocator device_allocator{};
  /// Bytes the `pool` allocator maps up front; unlimited means "the device limit if set, else
  /// 50% of the device, at most 90% of its free memory" (ranks sharing a GPU each get some).
  Limit device_pool_size{};
  /// Whether the PINNED_HOST tier exists (RapidsMPF's -L turns it off).
  bool pinned_pool{};
  /// PINNED_HOST memory mapped up front, at most the tier's limit; unlimited means the
  /// limit (which must then be set); 0: the pool grows as it is used.
  Limit pinned_reserve{};
  /// Freed host blocks kept for reuse (see HostMemoryResource); within the HOST limit.
  Limit host_cache{};
  /// False forces the CPU path (no DEVICE or PINNED_HOST tier) even where a GPU exists.
  bool use_gpu{true};
  std::string spill_dir;
  std::size_t io_threads{};
  std::size_t spill_task_size{};
  std::size_t spill_file_size{};
  std::size_t staging_size{};  // 0: 2 x io_threads x spill_task_size
  /// Background spilling: period (0 = off) and the free bytes to keep per tier. The headroom
  /// also steers reserve_first_fit: a tier is "with room" only if the bytes leave its headroom
  /// free, so movable data (a shuffle's incoming chunks) lands lower instead of taking the
  /// memory that local work (making and packing the next input) would then have to spill for.
  std::chrono::milliseconds spill_period{};
  std::array<std::size_t, 4> headroom{};
  /// How long reserve() and reserve_first_fit() wait, when nothing more can spill, for memory
  /// in use (transfers in flight, another thread's buffers) to be freed before they fail;
  /// every release starts the wait again. 0: fail at once.
  std::chrono::milliseconds memory_wait{};
  /// Policies wrapped around each live tier's allocator, innermost first (resource_adaptor.hpp).
  /// The settings give statistics_adaptor(), then spill_injection_adaptor() when
  /// SPILLWAY_SPILL_INJECT is above 0. Without statistics_adaptor() no allocation is timed or
  /// profiled (the other statistics stay).
  std::vector<AdaptorSpec> adaptors;

  friend bool operator==(const BufferResourceConfig&, const BufferResourceConfig&) = default;
};

/// One per rank; thread-safe. Every byte spillway holds lives in a Buffer of one tier, paid for
/// by a MemoryReservation against that tier's limit; `used(tier)` counts reserved plus
/// allocated bytes and never exceeds `limit(tier)`.
///
/// Without CUDA (or with `use_gpu = false`) the DEVICE and PINNED_HOST tiers are absent:
/// `is_live()` is false and reserving on them throws spillway::logic_error.
/// Buffers and reservations must not outlive their BufferResource.
class BufferResource {
 public:
  /// @throws spillway::cuda_error when a device allocator cannot be created.
  explicit BufferResource(
      const BufferResourceConfig& config = BufferResourceConfig::from_options());
  ~BufferResource();
  BufferResource(const BufferResource&) = delete;
  BufferResource& operator=(const BufferResource&) = delete;
  BufferResource(BufferResource&&) = delete;
  BufferResource& operator=(BufferResource&&) = delete;

  /// The configuration it was made with.
  [[nodiscard]] const BufferResourceConfig& config() const noexcept { return config_; }
  [[nodiscard]] bool is_live(MemoryType t) const noexcept { return tiers_[index(t)].live; }
  /// The resolved limit in bytes (unlimited_bytes when none).
  [[nodiscard]] std::size_t limit(MemoryType t) const noexcept { return tiers_[index(t)].limit; }
  /// What a buffer of `bytes` in tier `t` takes from its limit: the bytes as its allocator
  /// rounds them (HostMemoryResource::footprint; on DISK whole 4 KiB blocks).
  [[nodiscard]] std::size_t footprint(MemoryType t, std::size_t bytes) const noexcept {
    return charge_of(t, bytes);
  }
  /// Reserved plus allocated bytes.
  [[nodiscard]] std::size_t used(MemoryType t) const noexcept {
    return tiers_[index(t)].used.load(std::memory_order_relaxed);
  }
  /// The headroom of tier `t` (BufferResourceConfig::headroom).
  [[nodiscard]] std::size_t headroom(MemoryType t) const noexcept {
    return headroom_[index(t)].load(std::memory_order_relaxed);
  }
  /// Changes the headroom of tier `t` that reserve_first_fit keeps free (for example once the
  /// size of the coming work is known). Does not change the background spiller's.
  void set_headroom(MemoryType t, std::size_t bytes) noexcept {
    headroom_[index(t)].store(bytes, std::memory_order_relaxed);
  }
  /// The largest `used(t)` seen since construction or `reset_peak(t)`.
  [[nodiscard]] std::size_t peak(MemoryType t) const noexcept {
    return tiers_[index(t)].peak.load(std::memory_order_relaxed);
  }
  void reset_peak(MemoryType t) noexcept;
  /// limit - used (0 when over).
  [[nodiscard]] std::size_t available(MemoryType t) const noexcept;
  /// The tier's size: device memory, physical host memory, free disk space at creation.
  [[nodiscard]] std::size_t capacity(MemoryType t) const noexcept {
    return tiers_[index(t)].capacity;
  }
  /// Freed host memory kept for reuse; `used(HOST)` plus this stays within `limit(HOST)`.
  [[nodiscard]] std::size_t host_cached() const { return host_mr_->cached(); }
  /// The top live tier (DEVICE with a GPU, else HOST).
  [[nodiscard]] MemoryType top_tier() const noexcept;

  /// Reserves `bytes` on tier `t` without spilling; nullopt when they do not fit.
  std::optional<MemoryReservation> try_reserve(MemoryType t, std::size_t bytes);
  /// Reserves `bytes` on tier `t`, spilling that tier's spillable buffers down if needed;
  /// nullopt when even spilling cannot make room (the expected failure, not an exception).
  /// @throws spillway::logic_error when the tier is absent; what a spill function throws.
  std::optional<MemoryReservation> reserve_or_spill(MemoryType t, std::size_t bytes);
  /// Reserves `bytes` on tier `t`, spilling that tier's spillable buffers down if needed, and
  /// when that is not enough waiting (memory_wait) for memory in use to be freed: memory that
  /// is only busy is not a failure.
  /// @throws spillway::out_of_memory naming the step (MemoryStep), what was asked and the
  ///         used/limit of every tier when it cannot be met; spillway::logic_error when the
  ///         tier is absent.
  MemoryReservation reserve(MemoryType t, std::size_t bytes);
  /// The first live tier of `order` that has room after spilling it, each in turn (absent
  /// tiers are skipped); nullopt when none has. For data that should be as high as possible
  /// but may go lower rather than fail (a packed copy that does not fit on the GPU).
  /// @throws spillway::logic_error when no tier of `order` is live
  std::optional<MemoryReservation> try_reserve_in_order(std::span<const MemoryType> order,
                                                        std::size_t bytes);
  /// The first live tier of `order` with room (keeping its configured headroom free, except on
  /// the last tier), without spilling; if none, each live tier after the first (or the only
  /// one) in order again, now allowing spilling. So data lands lower instead of evicting the
  /// preferred tier. nullopt when no tier has room.
  /// @throws spillway::logic_error when no tier of `order` is live
  std::optional<MemoryReservation> try_reserve_first_fit(std::span<const MemoryType> order,
                                                         std::size_t bytes);
  /// try_reserve_first_fit, or spillway::out_of_memory naming every tier it tried.
  MemoryReservation reserve_first_fit(std::span<const MemoryType> order, std::size_t bytes);
  /// Calls `attempt` (a reservation that may spill, returning nullopt when it cannot be met)
  /// until it gives a reservation; after each failure waits for some memory to be freed (any
  /// release, on any tier), up to memory_wait; nullopt when none was. For a step with its own
  /// order of tiers that must wait, as reserve() does, when memory is only busy.
  template <typename Attempt>
  std::optional<MemoryReservation> waiting_for_memory(Attempt&& attempt) {
    for (;;) {
      const std::uint64_t seen = releases_.load(std::memory_order_acquire);
      if (auto res = attempt()) return res;
      if (config_.memory_wait.count() == 0) return std::nullopt;
      std::unique_lock lock(release_mutex_);
      // Sequentially consistent, as uncharge's: a waiter counts itself and then reads the
      // releases; uncharge counts a release and then reads the waiters. One of the two sees
      // the other's write, so no release goes unnoticed.
      waiting_.fetch_add(1, std::memory_order_seq_cst);
      const bool freed = released_.wait_for(lock, config_.memory_wait, [&] {
        return releases_.load(std::memory_order_seq_cst) != seen;
      });
      waiting_.fetch_sub(1, std::memory_order_acq_rel);
      if (!freed) return std::nullopt;
      statistics_.add_count("reserve-waited-for-memory");
    }
  }
  /// Throws the out_of_memory of a request of `bytes` that none of the tiers `tried` could
  /// meet even after spilling: the step (MemoryStep::current()), per tier tried what was in
  /// use of its limit (all of it live: spilling freed nothing more), and the other tiers.
  [[noreturn]] void throw_out_of_memory(std::span<const MemoryType> tried, std::size_t bytes) const;

  /// Allocates `bytes` drawn from `reservation` (DEVICE, PINNED_HOST or HOST), valid on `stream`.
  /// @throws spillway::logic_error when the reservation is too small or of the DISK tier.
  std::unique_ptr<Buffer> allocate(MemoryReservation& reservation, std::size_t bytes,
                                   Stream stream = {});
  /// reserve(t, bytes) then allocate.
  std::unique_ptr<Buffer> allocate(MemoryType t, std::size_t bytes, Stream stream = {});

  /// A buffer over bytes [offset, offset + size) of `of` (DEVICE, PINNED_HOST or HOST) that
  /// borrows them: same tier, resource and stream, no reservation, and its destructor frees
  /// nothing. It holds `keepalive` (which should own `of`'s bytes, or be empty when the caller
  /// keeps them alive longer than the view). For sending part of a buffer without copying it,
  /// or receiving into part of one. Writing through a view of a const buffer is the caller's
  /// promise that nobody reads those bytes meanwhile. `stream`, when given, becomes the view's
  /// stream instead of `of`'s: one whose end marks when the viewed bytes are written (a part
  /// of a buffer that is ready before the rest).
  /// @throws spillway::logic_error for a DISK buffer or a range outside it
  static std::unique_ptr<Buffer> view(const Buffer& of, std::size_t offset, std::size_t size,
                                      std::shared_ptr<const void> keepalive = {},
                                      std::optional<Stream> stream = std::nullopt);

  /// One view of the bytes of `parts`, each of which follows the one before (Buffer::follows
  /// with `alignment`): from the first's start to the last's end, holding their block and on the
  /// first's stream. For sending buffers laid out one after another as one message without
  /// gathering them. nullptr, `parts` untouched, when they are not such a run (or are none).
  static std::unique_ptr<Buffer> join(std::vector<std::unique_ptr<Buffer>>& parts,
                                      std::size_t alignment);

  /// Copies `src` into a new buffer of the reservation's tier, drawn from it. Copies that
  /// involve the GPU are asynchronous on `stream` (the result is not ready until then, and
  /// `src` must stay alive until it is); the others are done when this returns.
  /// @throws spillway::io_error (disk), spillway::cuda_error, spillway::logic_error
  std::unique_ptr<Buffer> copy(const Buffer& src, MemoryReservation& reservation,
                               Stream stream = {});
  /// Copies `n` bytes of host memory (the resource's or not: an Arrow array's buffer, say)
  /// into `dst` (DEVICE, PINNED_HOST or HOST) at `offset`; done when this returns, so `src` may
  /// go after. Large copies between pageable memory and the GPU, here and in copy() above, go
  /// through pinned staging on the I/O threads when the PINNED_HOST tier has room for it:
  /// cudaMemcpy from pageable memory is staged by one driver thread, several times slower
  /// than PCIe. @throws spillway::cuda_error, spillway::logic_error for DISK or a range outside
  /// `dst`
  void write(Buffer& dst, std::size_t offset, const void* src, std::size_t n, Stream stream = {});
  /// Host memory to write: one part of a gathered write.
  using HostBytes = std::span<const std::byte>;
  /// write() of `parts`, one after another from `offset` (the columns of several Arrow batches
  /// into one buffer), as one copy: staged pieces may span parts.
  void write(Buffer& dst, std::size_t offset, std::span<const HostBytes> parts, Stream stream = {});
  /// Moves `buf` to the reservation's tier (a copy, then the source is freed once the copy has
  /// completed). Returns `buf` itself when it is already there. If the move fails (an exception),
  /// `buf` is left untouched with the caller: no data is lost.
  std::unique_ptr<Buffer> move(std::unique_ptr<Buffer>&& buf, MemoryReservation& reservation,
                               Stream stream = {});
  /// reserve(t, size) then move; on failure `buf` stays with the caller.
  std::unique_ptr<Buffer> move(std::unique_ptr<Buffer>&& buf, MemoryType t, Stream stream = {});
  /// Moves `buf` one step down (spill_targets order: first a tier with room, else a lower one
  /// after spilling it). Returns false, leaving `buf` as it was, when no lower tier has room;
  /// throws only on real failures (I/O, CUDA). Used by spill functions.
  bool spill_down(std::unique_ptr<Buffer>& buf, Stream stream = {});

  /// Host staging for a copy between the GPU and a file (io::staged_read_to_device and
  /// io::staged_write_from_device), paid for like any buffer: PINNED_HOST, else HOST when the
  /// pinned tier is full or absent. It holds up to `lanes` lanes of two pieces of `piece`
  /// bytes; when that does not fit it takes fewer lanes, then halves the piece (staying a
  /// multiple of `granule`, which `piece` must be), down to one lane of two granules, which
  /// it waits for as reserve_first_fit does. @throws spillway::out_of_memory naming the step
  struct Staging {
    std::unique_ptr<Buffer> buffer;
    std::size_t piece{0};  // the piece size it was sized for
    [[nodiscard]] io::Staging view() const noexcept { return {buffer->data(), buffer->size()}; }
  };
  Staging allocate_staging(std::size_t piece, std::size_t granule, std::size_t lanes,
                           Stream stream = {});

  /// The rank's memory that may wait on its peers (see TransferBudget): a quarter of the
  /// smallest limit of a live memory tier (unlimited when none has one). Shuffles also keep
  /// their sends in flight within its limit().
  TransferBudget& transfer_budget() noexcept { return *transfer_budget_; }
  SpillManager& spill_manager() noexcept { return spill_manager_; }
  Statistics& statistics() noexcept { return statistics_; }
  SpillFiles& spill_files() noexcept { return spill_files_; }
  /// The stream the resource uses for its own copies (spilling); the default stream without CUDA.
  [[nodiscard]] Stream stream() const noexcept { return stream_.view(); }
  /// The device this resource allocates on (-1 without a GPU).
  [[nodiscard]] int device() const noexcept { return device_; }
  /// "DEVICE 1.00 GiB/2.00 GiB, PINNED_HOST ..." for messages.
  [[nodiscard]] std::string usage() const;
  /// Which allocator serves each live tier.
  [[nodiscard]] std::string describe() const;

 private:
  friend class Buffer;
  friend class MemoryReservation;

  struct Tier {
    bool live{false};
    std::size_t limit{0};
    std::size_t capacity{0};
    std::atomic<std::size_t> used{0};
    std::atomic<std::size_t> peak{0};
    std::unique_ptr<MemoryResource> mr;
  };

  /// Whether `bytes` of host memory are more than the machine has (never to be met).
  [[nodiscard]] bool exceeds_machine(MemoryType t, std::size_t bytes) const noexcept;
  /// What a buffer of `bytes` in tier `t` is charged: what it takes from the system (its
  /// resource's footprint; on DISK whole 4 KiB blocks).
  [[nodiscard]] std::size_t charge_of(MemoryType t, std::size_t bytes) const noexcept;
  /// Charges `bytes` to tier `t` if they fit under its limit less `keep_free`.
  bool try_charge(MemoryType t, std::size_t bytes, std::size_t keep_free = 0) noexcept;
  void uncharge(MemoryType t, std::size_t bytes) noexcept;

  std::optional<MemoryReservation> spill_and_reserve(MemoryType t, std::size_t bytes);
  std::vector<MemoryType> live_of(std::span<const MemoryType> order) const;
  void check_live(MemoryType t) const;
  void free_buffer(Buffer& buf) noexcept;
  void activate_device() const;
  /// Takes the charge of a buffer of `bytes` from `res`, topping up from the tier what the
  /// rounding adds beyond what is left in it. @throws spillway::out_of_memory
  void take(MemoryReservation& res, std::size_t bytes, MemoryType expected);
  void trim_host_cache() noexcept;
  std::unique_ptr<Buffer> copy_to_disk(const Buffer& src, MemoryReservation& res, Stream stream);
  void copy_from_disk(const Buffer& src, Buffer& dst, Stream stream);
  /// Pinned staging for a copy of `n` bytes between pageable memory and the GPU, when that
  /// pays and the PINNED_HOST tier has room for it now; null otherwise.
  std::unique_ptr<Buffer> try_copy_staging(std::size_t n, Stream stream);
  /// `n` bytes, as `read` gives them, to device memory `dst` through pinned staging on the I/O
  /// threads; false, having done nothing, when try_copy_staging gives none.
  bool try_staged_upload(std::byte* dst, std::size_t n, const io::PieceReader& read, Stream stream);
  /// `n` bytes of device memory `src` to pageable `dst`, the same way.
  bool try_staged_download(std::byte* dst, const std::byte* src, std::size_t n, Stream stream);
  /// Staging for a DEVICE<->DISK copy of `n` bytes (its piece a multiple of the spill piece).
  Staging disk_staging(std::size_t n, Stream stream);

  BufferResourceConfig config_;
  std::array<std::atomic<std::size_t>, 4> headroom_{};
  int device_{-1};
  Statistics statistics_;
  std::array<Tier, 4> tiers_;
  // Releases of memory (uncharge), counted, for reservations waiting for memory in use.
  std::mutex release_mutex_;
  std::condition_variable released_;
  std::atomic<std::uint64_t> releases_{0};
  std::atomic<int> waiting_{0};
  HostMemoryResource* host_mr_{nullptr};      // tiers_[HOST].mr, typed
  PinnedMemoryResource* pinned_mr_{nullptr};  // tiers_[PINNED_HOST].mr, typed (when live)
  SpillFiles spill_files_;
  std::unique_ptr<TransferBudget> transfer_budget_;  // made once the limits are known
  OwningStream stream_;
  SpillManager spill_manager_;  // last: its background thread stops first
};

}  // namespace spillway
