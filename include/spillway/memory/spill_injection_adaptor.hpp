#pragma once
/// @file spill_injection_adaptor.hpp
/// Spill injection, for tests: with probability `p` an allocation first spills its tier (at
/// least the bytes asked for, through the SpillManager), even without memory pressure, so that
/// spilling happens at random points of a run. Counted as `spill-injected`.
/// SPILLWAY_SPILL_INJECT sets it for BufferResourceConfig's default adaptors.

#include <spillway/memory/resource_adaptor.hpp>

namespace spillway {

class SpillManager;
class Statistics;

class SpillInjectionAdaptor final : public ResourceAdaptor {
 public:
  /// `spills` and `stats` must outlive it.
  /// @throws spillway::logic_error when `probability` is not in [0, 1]
  SpillInjectionAdaptor(std::unique_ptr<MemoryResource> upstream, SpillManager& spills,
                        Statistics& stats, double probability);

  [[nodiscard]] std::string describe() const override;

 private:
  void* do_allocate(std::size_t bytes, Stream stream) override;

  SpillManager& spills_;
  Statistics& stats_;
  double probability_;
};

/// Wraps every tier in a SpillInjectionAdaptor of `probability` on the BufferResource's spill
/// manager. @throws spillway::logic_error when `probability` is not in [0, 1]
AdaptorSpec spill_injection_adaptor(double probability);

}  // namespace spillway
