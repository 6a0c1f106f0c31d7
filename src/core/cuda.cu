// The CUDA shim of the GPU build for devices and memory: with cuda_streams.cu (streams and
// events), the only code that calls the CUDA runtime outside the kernels' launches.
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "core/detail/cuda_try.hpp"

#include <array>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <unistd.h>

namespace spillway::cuda {

namespace {

cudaStream_t s(Stream stream) {
  return static_cast<cudaStream_t>(stream.handle());
}

/// Lets every GPU that can reach it read and write the memory of `pool` (owned by device
/// `owner`, or host memory for owner -1), so that copies between the ranks' GPUs work on
/// pool allocations (peer access alone does not cover stream-ordered pools).
void share_pool(cudaMemPool_t pool, int owner) {
  for (int d = 0; d < device_count(); ++d) {
    if (d == owner) continue;
    if (owner >= 0) {
      int can = 0;
      SPILLWAY_CUDA_TRY(cudaDeviceCanAccessPeer(&can, d, owner));
      if (can == 0) continue;
    }
    cudaMemAccessDesc desc{};
    desc.location.type = cudaMemLocationTypeDevice;
    desc.location.id = d;
    desc.flags = cudaMemAccessFlagsProtReadWrite;
    SPILLWAY_CUDA_TRY(cudaMemPoolSetAccess(pool, &desc, 1));
  }
}

}  // namespace

bool is_compiled() noexcept {
  return true;
}

int device_count() noexcept {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

bool is_available() noexcept {
  return device_count() > 0;
}

int current_device() {
  int d = 0;
  SPILLWAY_CUDA_TRY(cudaGetDevice(&d));
  return d;
}

void set_device(int device) {
  SPILLWAY_CUDA_TRY(cudaSetDevice(device));
}

std::size_t device_free_memory() {
  std::size_t free_bytes = 0;
  std::size_t total = 0;
  SPILLWAY_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total));
  return free_bytes;
}

bool reads_pageable_memory() {
  int device = 0;
  int value = 0;
  SPILLWAY_CUDA_TRY(cudaGetDevice(&device));
  SPILLWAY_CUDA_TRY(
      cudaDeviceGetAttribute(&value, cudaDevAttrPageableMemoryAccessUsesHostPageTables, device));
  return value != 0;
}

bool is_device_pointer(const void* ptr) noexcept {
  if (ptr == nullptr || !is_available()) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // an unknown pointer: host memory
    return false;
  }
  return attr.type == cudaMemoryTypeDevice;
}

std::size_t device_total_memory() {
  std::size_t free_bytes = 0;
  std::size_t total = 0;
  SPILLWAY_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total));
  return total;
}

const char* device_name() {
  thread_local cudaDeviceProp prop{};
  SPILLWAY_CUDA_TRY(cudaGetDeviceProperties(&prop, current_device()));
  return prop.name;
}

std::string pci_bus_id(int device) {
  std::array<char, 32> id{};
  SPILLWAY_CUDA_TRY(cudaDeviceGetPCIBusId(id.data(), static_cast<int>(id.size()), device));
  std::string out(id.data());
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool enable_peer_access(int device, int peer) {
  int can = 0;
  SPILLWAY_CUDA_TRY(cudaDeviceCanAccessPeer(&can, device, peer));
  if (can == 0) return false;
  int current = 0;
  SPILLWAY_CUDA_TRY(cudaGetDevice(&current));
  SPILLWAY_CUDA_TRY(cudaSetDevice(device));
  const cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
  SPILLWAY_CUDA_TRY(cudaSetDevice(current));
  if (err != cudaErrorPeerAccessAlreadyEnabled) SPILLWAY_CUDA_TRY(err);
  // cudaMallocAsync draws from the peer's default pool, which needs its own grant.
  cudaMemPool_t pool = nullptr;
  SPILLWAY_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, peer));
  cudaMemAccessDesc desc{};
  desc.location.type = cudaMemLocationTypeDevice;
  desc.location.id = device;
  desc.flags = cudaMemAccessFlagsProtReadWrite;
  SPILLWAY_CUDA_TRY(cudaMemPoolSetAccess(pool, &desc, 1));
  return true;
}

void* malloc_device(std::size_t bytes) {
  void* p = nullptr;
  SPILLWAY_CUDA_TRY(cudaMalloc(&p, bytes));
  return p;
}

void free_device(void* ptr) noexcept {
  (void)cudaFree(ptr);
}

IpcHandle ipc_handle(void* ptr) {
  static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(IpcHandle));
  cudaIpcMemHandle_t h{};
  SPILLWAY_CUDA_TRY(cudaIpcGetMemHandle(&h, ptr));
  IpcHandle out{};
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

std::optional<IpcHandle> ipc_handle_if_shareable(void* ptr) noexcept {
  cudaIpcMemHandle_t h{};
  if (cudaIpcGetMemHandle(&h, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  IpcHandle out{};
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

void* ipc_open(const IpcHandle& handle) {
  cudaIpcMemHandle_t h{};
  std::memcpy(&h, handle.data(), sizeof h);
  void* p = nullptr;
  SPILLWAY_CUDA_TRY(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
  return p;
}

void ipc_close(void* ptr) noexcept {
  (void)cudaIpcCloseMemHandle(ptr);
}

Allocation allocation_of(const void* ptr) {
  // The driver's cuMemGetAddressRange, reached through the runtime (no libcuda link).
  using Fn = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);
  static const Fn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    SPILLWAY_CUDA_TRY(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000,
                                                       cudaEnableDefault, &found));
    SPILLWAY_EXPECTS(found == cudaDriverEntryPointSuccess && f != nullptr,
                     "cuMemGetAddressRange: the driver has none", cuda_error);
    return reinterpret_cast<Fn>(f);
  }();
  CUdeviceptr base = 0;
  std::size_t bytes = 0;
  const CUresult rc = fn(&base, &bytes, reinterpret_cast<CUdeviceptr>(ptr));
  SPILLWAY_EXPECTS(
      rc == CUDA_SUCCESS,
      "cuMemGetAddressRange: " + std::to_string(reinterpret_cast<std::uintptr_t>(ptr)) +
          " is not in a device allocation (error " + std::to_string(rc) + ")",
      cuda_error);
  return {reinterpret_cast<void*>(base), bytes};
}

void* host_device_pointer(void* ptr) noexcept {
  void* p = nullptr;
  if (cudaHostGetDevicePointer(&p, ptr, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}

void* malloc_async(std::size_t bytes, Stream stream) {
  void* p = nullptr;
  SPILLWAY_CUDA_TRY(cudaMallocAsync(&p, bytes, s(stream)));
  return p;
}

void free_async(void* ptr, Stream stream) noexcept {
  (void)cudaFreeAsync(ptr, s(stream));
}

void* pool_create(bool pinned_host, std::size_t reserve_bytes) {
  const int device = current_device();
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  if (pinned_host) {
    props.location.type = cudaMemLocationTypeHost;
    props.location.id = 0;
    // With the default maximum (0, "system dependent") a host pool on a freshly booted
    // machine failed to grow past its first allocation, while cudaMallocHost still worked.
    // A maximum set here avoided it. The machine's memory in whole GiB caps nothing that
    // spillway's limits would allow.
    const auto pages = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES));
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    constexpr std::size_t gib = std::size_t{1} << 30;
    props.maxSize = (pages * page + gib - 1) / gib * gib;
  } else {
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
  }
  cudaMemPool_t pool = nullptr;
  SPILLWAY_CUDA_TRY(cudaMemPoolCreate(&pool, &props));
  // Keep freed memory in the pool instead of returning it to the system at each synchronize.
  std::uint64_t threshold = UINT64_MAX;
  SPILLWAY_CUDA_TRY(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  if (pinned_host) {
    // No reuse that makes an allocation wait for another stream's work: PinnedMemoryResource
    // synchronizes each allocation, and such a wait would block its caller on that work.
    int no = 0;
    SPILLWAY_CUDA_TRY(
        cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no));
    cudaMemAccessDesc desc{};
    desc.location.type = cudaMemLocationTypeDevice;
    desc.location.id = device;
    desc.flags = cudaMemAccessFlagsProtReadWrite;
    SPILLWAY_CUDA_TRY(cudaMemPoolSetAccess(pool, &desc, 1));
  }
  share_pool(pool, pinned_host ? -1 : device);
  if (reserve_bytes > 0) {
    // Touch the memory once so that it is mapped up front ("sized up front").
    void* p = nullptr;
    SPILLWAY_CUDA_TRY(cudaMallocFromPoolAsync(&p, reserve_bytes, pool, nullptr));
    SPILLWAY_CUDA_TRY(cudaFreeAsync(p, nullptr));
    SPILLWAY_CUDA_TRY(cudaStreamSynchronize(nullptr));
  }
  return pool;
}

void pool_destroy(void* pool) noexcept {
  (void)cudaDeviceSynchronize();
  (void)cudaMemPoolDestroy(static_cast<cudaMemPool_t>(pool));
}

void* pool_malloc(void* pool, std::size_t bytes, Stream stream) {
  void* p = nullptr;
  const auto mp = static_cast<cudaMemPool_t>(pool);
  const cudaError_t err = cudaMallocFromPoolAsync(&p, bytes, mp, s(stream));
  if (err == cudaSuccess) [[likely]]
    return p;
  (void)cudaGetLastError();
  // Say what was asked and what the pool and the device held: an allocation that fails while
  // spillway's accounting has room needs these figures to be understood.
  std::uint64_t reserved = 0;
  std::uint64_t used = 0;
  (void)cudaMemPoolGetAttribute(mp, cudaMemPoolAttrReservedMemCurrent, &reserved);
  (void)cudaMemPoolGetAttribute(mp, cudaMemPoolAttrUsedMemCurrent, &used);
  std::size_t free = 0;
  std::size_t total = 0;
  (void)cudaMemGetInfo(&free, &total);
  (void)cudaGetLastError();
  SPILLWAY_FAIL("cudaMallocFromPoolAsync of " + format_bytes(double(bytes)) + " failed: " +
                    cudaGetErrorName(err) + " (pool reserves " + format_bytes(double(reserved)) +
                    ", of which " + format_bytes(double(used)) + " in use; device free " +
                    format_bytes(double(free)) + " of " + format_bytes(double(total)) + ")",
                cuda_error);
}

void pool_free(void* ptr, Stream stream) noexcept {
  (void)cudaFreeAsync(ptr, s(stream));
}

std::size_t pool_reserved(void* pool) {
  std::uint64_t bytes = 0;
  SPILLWAY_CUDA_TRY(cudaMemPoolGetAttribute(static_cast<cudaMemPool_t>(pool),
                                            cudaMemPoolAttrReservedMemCurrent, &bytes));
  return static_cast<std::size_t>(bytes);
}

void* malloc_pinned(std::size_t bytes) {
  void* p = nullptr;
  SPILLWAY_CUDA_TRY(cudaMallocHost(&p, bytes));
  return p;
}

void free_pinned(void* ptr) noexcept {
  (void)cudaFreeHost(ptr);
}

bool host_register(void* ptr, std::size_t bytes) noexcept {
  int device = 0;
  int same_pointer = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&same_pointer, cudaDevAttrCanUseHostPointerForRegisteredMem, device) !=
          cudaSuccess ||
      same_pointer == 0) {
    (void)cudaGetLastError();
    return false;
  }
  if (cudaHostRegister(ptr, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

void host_unregister(void* ptr) noexcept {
  (void)cudaHostUnregister(ptr);
}

void memcpy_async(void* dst, const void* src, std::size_t bytes, Stream stream) {
  SPILLWAY_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s(stream)));
}

void memcpy_batch_async(void* const* dsts, const void* const* srcs, const std::size_t* sizes,
                        std::size_t n, Stream stream) {
  if (n == 0) return;
  cudaMemcpyAttributes attr{};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  std::size_t attr_index = 0;
  // cudaMemcpyBatchAsync takes non-const arrays; it does not write them.
  auto* d = const_cast<void**>(dsts);
  auto* s_ = const_cast<void**>(reinterpret_cast<const void* const*>(srcs));
  auto* z = const_cast<std::size_t*>(sizes);
#if CUDART_VERSION >= 13000
  SPILLWAY_CUDA_TRY(cudaMemcpyBatchAsync(d, s_, z, n, &attr, &attr_index, 1, s(stream)));
#else
  std::size_t fail_index = 0;
  SPILLWAY_CUDA_TRY(
      cudaMemcpyBatchAsync(d, s_, z, n, &attr, &attr_index, 1, &fail_index, s(stream)));
#endif
}

void memset_device(void* dst, int value, std::size_t bytes) {
  SPILLWAY_CUDA_TRY(cudaMemset(dst, value, bytes));
  SPILLWAY_CUDA_TRY(cudaDeviceSynchronize());
}

}  // namespace spillway::cuda
