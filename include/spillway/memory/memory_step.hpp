#pragma once
/// @file memory_step.hpp
/// The step a thread is working on (packing, landing, unpacking, ...), named in the message of
/// a reservation that fails, so that a limit error says which step needed the memory.

namespace spillway {

/// Names the step the calling thread is in for the lifetime of the object; steps nest, the
/// innermost one names the step. Costs a thread-local store: cheap enough for every call of
/// a table operation. The name must outlive the object (a string literal).
class MemoryStep {
 public:
  explicit MemoryStep(const char* name) noexcept;
  ~MemoryStep();
  MemoryStep(const MemoryStep&) = delete;
  MemoryStep& operator=(const MemoryStep&) = delete;
  MemoryStep(MemoryStep&&) = delete;
  MemoryStep& operator=(MemoryStep&&) = delete;

  /// The innermost open step of the calling thread; nullptr when none is open.
  [[nodiscard]] static const char* current() noexcept;

 private:
  const char* name_;
  const MemoryStep* outer_;
};

}  // namespace spillway
