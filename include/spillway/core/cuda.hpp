#pragma once
/// @file cuda.hpp
/// The CUDA shim: every CUDA runtime call that spillway makes goes through these functions, so
/// that the rest of the library is plain C++ and a CPU build links no CUDA at all. In a CPU
/// build `is_available()` is false and the other functions throw spillway::logic_error.
/// All functions throw spillway::cuda_error with the call and CUDA's error string on failure.

#include <spillway/core/stream.hpp>

#include <array>
#include <cstddef>
#include <optional>
#include <string>

namespace spillway::cuda {

/// True when spillway was built with CUDA and at least one GPU is usable. Cached; thread-safe.
bool is_available() noexcept;
/// True when spillway was built with CUDA (whether or not a GPU is present).
bool is_compiled() noexcept;
/// The number of visible GPUs (0 when none or in a CPU build).
int device_count() noexcept;
int current_device();
void set_device(int device);
/// Total memory of the current device in bytes.
std::size_t device_total_memory();
/// Free memory of the current GPU now (cudaMemGetInfo).
std::size_t device_free_memory();
/// Whether the current GPU reads pageable host memory through the host's page tables
/// (cudaDevAttrPageableMemoryAccessUsesHostPageTables: Grace Hopper); false without a GPU.
bool reads_pageable_memory();
/// The device's name, e.g. "NVIDIA H200".
const char* device_name();
/// Whether `ptr` points into device memory (cudaMemoryTypeDevice); false for host memory,
/// pinned or not, for managed memory, and without a GPU.
bool is_device_pointer(const void* ptr) noexcept;
/// The PCI address of `device` as sysfs spells it ("0000:1b:00.0").
std::string pci_bus_id(int device);

/// Lets `device` access memory of `peer` directly (NVLink/PCIe peer to peer), if the hardware
/// can; returns whether it can. Enabling twice is fine.
bool enable_peer_access(int device, int peer);

void* malloc_device(std::size_t bytes);
void free_device(void* ptr) noexcept;

/// A CUDA IPC handle (cudaIpcMemHandle_t's 64 bytes) of a malloc_device allocation, for
/// another process on this node to map with ipc_open.
using IpcHandle = std::array<std::byte, 64>;
IpcHandle ipc_handle(void* ptr);
/// The handle of the allocation at `ptr`, or nullopt where it has none (memory of a
/// stream-ordered pool made without a handle type, as cudaMallocAsync's default pool).
std::optional<IpcHandle> ipc_handle_if_shareable(void* ptr) noexcept;
/// Maps another process's allocation into this one on the current device (peer access enabled
/// lazily). @throws spillway::cuda_error when it cannot (another node, no peer path, ...)
void* ipc_open(const IpcHandle& handle);
void ipc_close(void* ptr) noexcept;
/// The device allocation `ptr` points into (cuMemGetAddressRange): an IPC handle names a
/// whole allocation, and a region inside one is found by its offset from `base`.
struct Allocation {
  void* base{nullptr};
  std::size_t bytes{0};
};
Allocation allocation_of(const void* ptr);
/// The address kernels reach page-locked host memory `ptr` by (cudaHostGetDevicePointer), or
/// nullptr when it is not page-locked (or there is no GPU).
void* host_device_pointer(void* ptr) noexcept;
/// cudaMallocAsync on the current device's default pool.
void* malloc_async(std::size_t bytes, Stream stream);
void free_async(void* ptr, Stream stream) noexcept;

/// A stream-ordered memory pool (cudaMemPool_t held as void*).
/// `pinned_host` makes a pool of page-locked host memory (cudaMemLocationTypeHost).
void* pool_create(bool pinned_host, std::size_t reserve_bytes);
void pool_destroy(void* pool) noexcept;
void* pool_malloc(void* pool, std::size_t bytes, Stream stream);
void pool_free(void* ptr, Stream stream) noexcept;
/// Bytes of memory the pool holds from the system now (in use or cached).
std::size_t pool_reserved(void* pool);

void* malloc_pinned(std::size_t bytes);
void free_pinned(void* ptr) noexcept;
/// Page-locks host memory and maps it for the GPU (cudaHostRegister) so that kernels can
/// read and write it through the same pointer. False, with nothing registered, when that is
/// not possible here (no CUDA, a device without host-pointer access, memory already
/// registered, or the system refuses to pin it).
bool host_register(void* ptr, std::size_t bytes) noexcept;
/// Undoes host_register.
void host_unregister(void* ptr) noexcept;

/// cudaMemcpyAsync with cudaMemcpyDefault (unified addressing picks the direction).
void memcpy_async(void* dst, const void* src, std::size_t bytes, Stream stream);
/// `n` copies in one call, carried out by the copy engines (cudaMemcpyBatchAsync, CUDA 12.8+),
/// in stream order. `stream` must be a stream of spillway's own (not the legacy default).
void memcpy_batch_async(void* const* dsts, const void* const* srcs, const std::size_t* sizes,
                        std::size_t n, Stream stream);
/// Synchronous memset of device memory (tests and benchmarks).
void memset_device(void* dst, int value, std::size_t bytes);

void* stream_create(bool high_priority = false);
void stream_destroy(void* stream) noexcept;
void stream_synchronize(Stream stream);

/// A timed event (cudaEventDefault) on the current device.
void* event_create();
/// A timed event on the device of `stream` (which need not be the current one), to record there.
void* event_create_for(Stream stream);
void event_destroy(void* event) noexcept;
/// An event with timing disabled on the device of `stream` (written to `*device`), from that
/// device's pool of released ones when it has one, else new.
void* event_acquire(Stream stream, int* device);
/// Gives an event of event_acquire back to its device's pool (a pending record may still
/// complete; the next user's record replaces it). The pool keeps at most 65536 per device.
void event_release(void* event, int device) noexcept;
void event_record(void* event, Stream stream);
/// True when the work before the record has completed.
bool event_query(void* event);
void event_synchronize(void* event);
/// Work queued on `stream` after this call waits, on the GPU, for the event's recorded work.
void stream_wait_event(Stream stream, void* event);
/// Milliseconds between two recorded events.
float event_elapsed_ms(void* start, void* end);

}  // namespace spillway::cuda
