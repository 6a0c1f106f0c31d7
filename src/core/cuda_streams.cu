// The CUDA shim of the GPU build for streams and events (cuda.cu has devices and memory),
// with a pool of released events per device, since creating one costs microseconds.
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>

#include <cuda_runtime_api.h>

#include "core/detail/cuda_try.hpp"

#include <mutex>
#include <vector>

namespace spillway::cuda {

namespace {
cudaStream_t s(Stream stream) {
  return static_cast<cudaStream_t>(stream.handle());
}
}  // namespace

void* stream_create(bool high_priority) {
  int priority = 0;
  if (high_priority) {
    int least = 0;
    SPILLWAY_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &priority));
  }
  cudaStream_t st = nullptr;
  SPILLWAY_CUDA_TRY(cudaStreamCreateWithPriority(&st, cudaStreamNonBlocking, priority));
  return st;
}

void stream_destroy(void* stream) noexcept {
  (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

void stream_synchronize(Stream stream) {
  SPILLWAY_CUDA_TRY(cudaStreamSynchronize(s(stream)));
}

void* event_create() {
  cudaEvent_t e = nullptr;
  SPILLWAY_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDefault));
  return e;
}

void* event_create_for(Stream stream) {
  int device = 0;
  SPILLWAY_CUDA_TRY(cudaStreamGetDevice(s(stream), &device));
  int current = 0;
  SPILLWAY_CUDA_TRY(cudaGetDevice(&current));
  if (device == current) return event_create();
  SPILLWAY_CUDA_TRY(cudaSetDevice(device));
  cudaEvent_t e = nullptr;
  const cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDefault);
  SPILLWAY_CUDA_TRY(cudaSetDevice(current));
  SPILLWAY_CUDA_TRY(err);
  return e;
}

void event_destroy(void* event) noexcept {
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

namespace {
/// Released events per device (never destroyed at exit: the CUDA context may be gone first).
struct EventPool {
  static constexpr std::size_t most = 65536;
  std::mutex mutex;
  std::vector<std::vector<cudaEvent_t>> free;  // per device
};
EventPool& event_pool() {
  static auto* pool = new EventPool;  // NOLINT: intentionally leaked, see above
  return *pool;
}
}  // namespace

void* event_acquire(Stream stream, int* device) {
  int d = 0;
  SPILLWAY_CUDA_TRY(cudaStreamGetDevice(s(stream), &d));
  *device = d;
  EventPool& pool = event_pool();
  {
    std::lock_guard lock(pool.mutex);
    if (static_cast<std::size_t>(d) < pool.free.size() && !pool.free[d].empty()) {
      cudaEvent_t e = pool.free[d].back();
      pool.free[d].pop_back();
      return e;
    }
  }
  int current = 0;
  SPILLWAY_CUDA_TRY(cudaGetDevice(&current));
  if (d != current) SPILLWAY_CUDA_TRY(cudaSetDevice(d));
  cudaEvent_t e = nullptr;
  const cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  if (d != current) SPILLWAY_CUDA_TRY(cudaSetDevice(current));
  SPILLWAY_CUDA_TRY(err);
  return e;
}

void event_release(void* event, int device) noexcept {
  auto e = static_cast<cudaEvent_t>(event);
  EventPool& pool = event_pool();
  {
    std::lock_guard lock(pool.mutex);
    if (device >= 0) {
      if (static_cast<std::size_t>(device) >= pool.free.size()) {
        try {
          pool.free.resize(static_cast<std::size_t>(device) + 1);
        } catch (...) {
        }
      }
      if (static_cast<std::size_t>(device) < pool.free.size() &&
          pool.free[device].size() < EventPool::most) {
        try {
          pool.free[device].push_back(e);
          return;
        } catch (...) {
        }
      }
    }
  }
  (void)cudaEventDestroy(e);
}

void event_record(void* event, Stream stream) {
  SPILLWAY_CUDA_TRY(cudaEventRecord(static_cast<cudaEvent_t>(event), s(stream)));
}

bool event_query(void* event) {
  const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (err == cudaErrorNotReady) return false;
  SPILLWAY_CUDA_TRY(err);
  return true;
}

void event_synchronize(void* event) {
  SPILLWAY_CUDA_TRY(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
}

void stream_wait_event(Stream stream, void* event) {
  SPILLWAY_CUDA_TRY(
      cudaStreamWaitEvent(s(stream), static_cast<cudaEvent_t>(event), cudaEventWaitDefault));
}

float event_elapsed_ms(void* start, void* end) {
  float ms = 0;
  SPILLWAY_CUDA_TRY(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
  return ms;
}

}  // namespace spillway::cuda
