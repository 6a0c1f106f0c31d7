#include <spillway/memory/memory_step.hpp>

namespace spillway {

namespace {
thread_local const MemoryStep* innermost = nullptr;
}  // namespace

MemoryStep::MemoryStep(const char* name) noexcept : name_{name}, outer_{innermost} {
  innermost = this;
}

MemoryStep::~MemoryStep() {
  innermost = outer_;
}

const char* MemoryStep::current() noexcept {
  return innermost != nullptr ? innermost->name_ : nullptr;
}

}  // namespace spillway
