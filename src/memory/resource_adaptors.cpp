// The adaptors a BufferResource layers around its tiers' allocators: statistics and spill
// injection (resource_adaptor.hpp).
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/memory/pinned_memory_resource.hpp>
#include <spillway/memory/resource_adaptor.hpp>
#include <spillway/memory/spill_injection_adaptor.hpp>
#include <spillway/memory/spill_manager.hpp>
#include <spillway/memory/statistics_adaptor.hpp>

#include <spillway/core/error.hpp>

#include "memory/detail/buffer_stats.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <thread>

namespace spillway {

ResourceAdaptor::ResourceAdaptor(std::unique_ptr<MemoryResource> upstream)
    : upstream_{std::move(upstream)} {
  SPILLWAY_EXPECTS(upstream_ != nullptr, "a resource adaptor around no resource");
}

StatisticsAdaptor::StatisticsAdaptor(std::unique_ptr<MemoryResource> upstream, Statistics& stats)
    : ResourceAdaptor(std::move(upstream)),
      stats_{stats},
      name_{detail::names().alloc[index(mem_type())]},
      pinned_{dynamic_cast<PinnedMemoryResource*>(&this->upstream())} {}

void* StatisticsAdaptor::do_allocate(std::size_t bytes, Stream stream) {
  const std::size_t held = pinned_ != nullptr ? pinned_->reserved_bytes() : 0;
  const auto t0 = detail::Clock::now();
  void* ptr = ResourceAdaptor::do_allocate(bytes, stream);
  const double seconds = detail::seconds_since(t0);
  stats_.add(name_, static_cast<double>(bytes), seconds);
  // The pinned pool grew (pages pinned on this thread): its own entry, since it costs far
  // more than a reuse. Another thread's growth at the same time may be counted here too.
  if (const std::size_t now = pinned_ != nullptr ? pinned_->reserved_bytes() : 0; now > held) {
    stats_.add("alloc-pinned_host-grow", static_cast<double>(now - held), seconds);
  }
  stats_.memory_profiler().on_allocate(index(mem_type()), footprint(bytes));
  return ptr;
}

void StatisticsAdaptor::do_deallocate(void* ptr, std::size_t bytes, Stream stream) noexcept {
  ResourceAdaptor::do_deallocate(ptr, bytes, stream);
  stats_.memory_profiler().on_deallocate(index(mem_type()), footprint(bytes));
}

AdaptorSpec statistics_adaptor() {
  return {"statistics", [](BufferResource& br, std::unique_ptr<MemoryResource> mr) {
            return std::make_unique<StatisticsAdaptor>(std::move(mr), br.statistics());
          }};
}

namespace {
void check_probability(double p) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", p);
  SPILLWAY_EXPECTS(p >= 0 && p <= 1,
                   std::string("a spill injection probability of ") + text + " (want 0 to 1)");
}
}  // namespace

SpillInjectionAdaptor::SpillInjectionAdaptor(std::unique_ptr<MemoryResource> upstream,
                                             SpillManager& spills, Statistics& stats,
                                             double probability)
    : ResourceAdaptor(std::move(upstream)),
      spills_{spills},
      stats_{stats},
      probability_{probability} {
  check_probability(probability);
}

std::string SpillInjectionAdaptor::describe() const {
  char p[32];
  std::snprintf(p, sizeof p, "%.2f", probability_);
  return ResourceAdaptor::describe() + " (spill injection " + p + ")";
}

void* SpillInjectionAdaptor::do_allocate(std::size_t bytes, Stream stream) {
  thread_local std::minstd_rand rng(
      static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id())));
  if (std::uniform_real_distribution<double>(0, 1)(rng) < probability_) {
    stats_.add_count("spill-injected");
    // The spill allocates below this tier, and may inject there too; it ends at DISK.
    (void)spills_.spill(mem_type(), std::max<std::size_t>(bytes, 1));
  }
  return ResourceAdaptor::do_allocate(bytes, stream);
}

AdaptorSpec spill_injection_adaptor(double probability) {
  check_probability(probability);
  char name[48];
  std::snprintf(name, sizeof name, "spill_injection(%g)", probability);
  return {name, [probability](BufferResource& br, std::unique_ptr<MemoryResource> mr) {
            return std::make_unique<SpillInjectionAdaptor>(std::move(mr), br.spill_manager(),
                                                           br.statistics(), probability);
          }};
}

}  // namespace spillway
