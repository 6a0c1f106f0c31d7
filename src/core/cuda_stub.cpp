// The CUDA shim of the CPU build: no GPU, and any attempt to use one is a clear error.
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>

namespace spillway::cuda {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  SPILLWAY_FAIL(std::string(what) + ": spillway was built without CUDA (SPILLWAY_CUDA=OFF)");
}
}  // namespace

bool is_compiled() noexcept {
  return false;
}
int device_count() noexcept {
  return 0;
}
bool is_available() noexcept {
  return false;
}
int current_device() {
  no_cuda("current_device");
}
void set_device(int /*device*/) {
  no_cuda("set_device");
}
std::size_t device_free_memory() {
  return 0;
}
bool reads_pageable_memory() {
  return false;
}
bool is_device_pointer(const void*) noexcept {
  return false;
}
std::size_t device_total_memory() {
  no_cuda("device_total_memory");
}
const char* device_name() {
  no_cuda("device_name");
}
bool enable_peer_access(int /*device*/, int /*peer*/) {
  return false;
}
void* malloc_device(std::size_t /*bytes*/) {
  no_cuda("malloc_device");
}
void free_device(void* /*ptr*/) noexcept {}
std::string pci_bus_id(int /*device*/) {
  no_cuda("pci_bus_id");
}
IpcHandle ipc_handle(void* /*ptr*/) {
  no_cuda("ipc_handle");
}
std::optional<IpcHandle> ipc_handle_if_shareable(void* /*ptr*/) noexcept {
  return std::nullopt;
}
void* ipc_open(const IpcHandle& /*handle*/) {
  no_cuda("ipc_open");
}
void ipc_close(void* /*ptr*/) noexcept {}
Allocation allocation_of(const void* /*ptr*/) {
  no_cuda("allocation_of");
}
void* host_device_pointer(void* /*ptr*/) noexcept {
  return nullptr;
}
void* malloc_async(std::size_t /*bytes*/, Stream /*stream*/) {
  no_cuda("malloc_async");
}
void free_async(void* /*ptr*/, Stream /*stream*/) noexcept {}
void* pool_create(bool /*pinned_host*/, std::size_t /*reserve*/) {
  no_cuda("pool_create");
}
void pool_destroy(void* /*pool*/) noexcept {}
void* pool_malloc(void* /*pool*/, std::size_t /*bytes*/, Stream /*stream*/) {
  no_cuda("pool_malloc");
}
void pool_free(void* /*ptr*/, Stream /*stream*/) noexcept {}
std::size_t pool_reserved(void* /*pool*/) {
  no_cuda("pool_reserved");
}
void* malloc_pinned(std::size_t /*bytes*/) {
  no_cuda("malloc_pinned");
}
void free_pinned(void* /*ptr*/) noexcept {}
bool host_register(void* /*ptr*/, std::size_t /*bytes*/) noexcept {
  return false;
}
void host_unregister(void* /*ptr*/) noexcept {}
void memcpy_async(void* /*dst*/, const void* /*src*/, std::size_t /*bytes*/, Stream /*stream*/) {
  no_cuda("memcpy_async");
}
void memcpy_batch_async(void* const* /*dsts*/, const void* const* /*srcs*/,
                        const std::size_t* /*sizes*/, std::size_t /*n*/, Stream /*stream*/) {
  no_cuda("memcpy_batch_async");
}
void memset_device(void* /*dst*/, int /*value*/, std::size_t /*bytes*/) {
  no_cuda("memset_device");
}
void* stream_create(bool /*high_priority*/) {
  no_cuda("stream_create");
}
void stream_destroy(void* /*stream*/) noexcept {}
void stream_synchronize(Stream /*stream*/) {}
void* event_create() {
  no_cuda("event_create");
}
void* event_create_for(Stream /*stream*/) {
  no_cuda("event_create_for");
}
void event_destroy(void* /*event*/) noexcept {}
void* event_acquire(Stream /*stream*/, int* /*device*/) {
  no_cuda("event_acquire");
}
void event_release(void* /*event*/, int /*device*/) noexcept {}
void event_record(void* /*event*/, Stream /*stream*/) {
  no_cuda("event_record");
}
bool event_query(void* /*event*/) {
  return true;
}
void event_synchronize(void* /*event*/) {}
void stream_wait_event(Stream /*stream*/, void* /*event*/) {}
float event_elapsed_ms(void* /*start*/, void* /*end*/) {
  no_cuda("event_elapsed_ms");
}

}  // namespace spillway::cuda
