#pragma once
// spillway-bench-transfer's memory: the kinds --src and --dst name, and the memory of a side.

#include <spillway/core/cuda.hpp>
#include <spillway/memory/memory_type.hpp>
#include <spillway/transfer/shared_host_memory.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace spillway::tools {

/// host, pinned, shared (pinned memory of a SharedHostMemory) or device.
struct MemoryKind {
  MemoryType type{MemoryType::HOST};
  bool shared{false};
  [[nodiscard]] const char* name() const {
    return shared                            ? "shared"
           : type == MemoryType::PINNED_HOST ? "pinned"
           : type == MemoryType::DEVICE      ? "device"
                                             : "host";
  }
};

inline int device_of(MemoryKind k) {
  return k.type == MemoryType::DEVICE ? 0 : -1;
}

/// Memory of `bytes` of a kind, freed with the object. `host` is where the program reads and
/// writes it: the memory itself, or for device memory a copy that `upload` and `download` move.
struct Memory {
  std::uint8_t* ptr{nullptr};
  std::size_t bytes;
  MemoryType type;
  std::vector<std::uint8_t> staging;
  std::optional<transfer::SharedHostMemory> shared;
  std::uint8_t* host{nullptr};
  Memory(std::size_t n, MemoryKind k) : bytes{n}, type{k.type} {
    if (k.shared) {
      shared = transfer::SharedHostMemory::allocate(n);
      ptr = static_cast<std::uint8_t*>(shared->data());
      host = ptr;
    } else if (type == MemoryType::DEVICE) {
      ptr = static_cast<std::uint8_t*>(cuda::malloc_device(n));
      staging.resize(n);
      host = staging.data();
    } else {
      ptr = type == MemoryType::PINNED_HOST ? static_cast<std::uint8_t*>(cuda::malloc_pinned(n))
                                            : new std::uint8_t[n];
      host = ptr;
    }
  }
  void copy(void* dst, const void* src) const {
    cuda::memcpy_async(dst, src, bytes, Stream{});
    Stream{}.synchronize();
  }
  void upload() const {
    if (type == MemoryType::DEVICE) copy(ptr, host);
  }
  void download() const {
    if (type == MemoryType::DEVICE) copy(host, ptr);
  }
  ~Memory() {
    if (shared) return;  // its own destructor frees it
    if (type == MemoryType::DEVICE) {
      cuda::free_device(ptr);
    } else if (type == MemoryType::PINNED_HOST) {
      cuda::free_pinned(ptr);
    } else {
      delete[] ptr;
    }
  }
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
};

}  // namespace spillway::tools
