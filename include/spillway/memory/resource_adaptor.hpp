#pragma once
/// @file resource_adaptor.hpp
/// Policies layered around a tier's allocator, as RMM layers its resource adaptors: a
/// ResourceAdaptor owns the MemoryResource it wraps and forwards to it, adding its policy
/// (statistics_adaptor.hpp, spill_injection_adaptor.hpp, or a user's own).

#include <spillway/memory/memory_resource.hpp>

#include <functional>
#include <memory>
#include <string>

namespace spillway {

class BufferResource;

/// A MemoryResource that forwards to the one it wraps (its upstream). Subclasses override the
/// `do_*` calls they add a policy to and call the upstream's.
class ResourceAdaptor : public MemoryResource {
 public:
  /// @throws spillway::logic_error for a null upstream
  explicit ResourceAdaptor(std::unique_ptr<MemoryResource> upstream);

  [[nodiscard]] MemoryResource& upstream() const noexcept { return *upstream_; }
  [[nodiscard]] std::size_t footprint(std::size_t bytes) const noexcept override {
    return upstream_->footprint(bytes);
  }
  [[nodiscard]] MemoryType mem_type() const noexcept override { return upstream_->mem_type(); }
  [[nodiscard]] std::string describe() const override { return upstream_->describe(); }

 protected:
  void* do_allocate(std::size_t bytes, Stream stream) override {
    return upstream_->allocate(bytes, stream);
  }
  void do_deallocate(void* ptr, std::size_t bytes, Stream stream) noexcept override {
    upstream_->deallocate(ptr, bytes, stream);
  }

 private:
  std::unique_ptr<MemoryResource> upstream_;
};

/// An adaptor a BufferResource wraps around each of its live tiers' allocators when it is made
/// (BufferResourceConfig::adaptors, innermost first). `wrap` gets the resource being made (for
/// its statistics or spill manager, which exist by then; its tiers do not yet) and the
/// allocator to wrap. Configurations compare adaptors by `name`.
struct AdaptorSpec {
  std::string name;
  std::function<std::unique_ptr<MemoryResource>(BufferResource&, std::unique_ptr<MemoryResource>)>
      wrap;
  friend bool operator==(const AdaptorSpec& a, const AdaptorSpec& b) { return a.name == b.name; }
};

}  // namespace spillway
