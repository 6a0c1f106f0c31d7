#pragma once
/// @file statistics_adaptor.hpp
/// Allocation statistics of one tier (RMM's statistics_resource_adaptor): each allocation's
/// bytes and time under `alloc-<tier>`, the pinned pool's growth under
/// `alloc-pinned_host-grow`, and the memory profile (MemoryProfiler) of what the tier is
/// charged. On by default (BufferResourceConfig's adaptors).

#include <spillway/memory/resource_adaptor.hpp>
#include <spillway/stats/statistics.hpp>

namespace spillway {

class PinnedMemoryResource;

class StatisticsAdaptor final : public ResourceAdaptor {
 public:
  /// Records into `stats`, which must outlive it.
  StatisticsAdaptor(std::unique_ptr<MemoryResource> upstream, Statistics& stats);

 private:
  void* do_allocate(std::size_t bytes, Stream stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, Stream stream) noexcept override;

  Statistics& stats_;
  const std::string& name_;                // alloc-<tier>
  PinnedMemoryResource* pinned_{nullptr};  // the upstream, when it is the pinned pool
};

/// Wraps every tier in a StatisticsAdaptor recording into the BufferResource's statistics().
AdaptorSpec statistics_adaptor();

}  // namespace spillway
