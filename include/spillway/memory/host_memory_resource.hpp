#pragma once
/// @file host_memory_resource.hpp
/// Ordinary (pageable) host memory, page-aligned.

#include <spillway/memory/memory_resource.hpp>

namespace spillway {

/// Page-aligned host memory from the C++ heap. Thread-safe.
class HostMemoryResource final : public MemoryResource {
 public:
  [[nodiscard]] MemoryType mem_type() const noexcept override { return MemoryType::HOST; }
  [[nodiscard]] std::string describe() const override { return "aligned host heap"; }

 private:
  void* do_allocate(std::size_t bytes, Stream stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, Stream stream) noexcept override;
};

}  // namespace spillway
