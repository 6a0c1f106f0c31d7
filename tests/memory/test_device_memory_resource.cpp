// The real CUDA allocators (skipped without a GPU).
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/memory/device_memory_resource.hpp>
#include <spillway/memory/pinned_memory_resource.hpp>

#include "common.hpp"

#if SPILLWAY_HAS_CUDA
#include <cuda_runtime.h>
#endif

using namespace spillway;

class DeviceAllocators : public ::testing::TestWithParam<DeviceAllocator> {};

TEST_P(DeviceAllocators, AllocateWriteReadFree) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  DeviceMemoryResource mr(GetParam(), 64 * MiB);
  OwningStream stream;
  const std::size_t n = 8 * MiB + 5;
  void* d = mr.allocate(n, stream);
  ASSERT_NE(d, nullptr);
  std::vector<std::byte> src(n), dst(n);
  test::fill_pattern(src.data(), n, 3);
  cuda::memcpy_async(d, src.data(), n, stream);
  cuda::memcpy_async(dst.data(), d, n, stream);
  stream.view().synchronize();
  EXPECT_EQ(test::check_pattern(dst.data(), n, 3), n);
  mr.deallocate(d, n, stream);
  stream.view().synchronize();
  EXPECT_FALSE(mr.describe().empty());
}

INSTANTIATE_TEST_SUITE_P(All, DeviceAllocators,
                         ::testing::Values(DeviceAllocator::cuda, DeviceAllocator::async,
                                           DeviceAllocator::pool),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(PinnedMemoryResource, HostWritableAtOnceAndCopies) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  PinnedMemoryResource mr(16 * MiB);
  OwningStream stream;
  const std::size_t n = 4 * MiB;
  auto* p = static_cast<std::byte*>(mr.allocate(n, stream));
  test::fill_pattern(p, n, 11);  // valid on the host as soon as allocate returns
  DeviceMemoryResource dev(DeviceAllocator::async);
  void* d = dev.allocate(n, stream);
  cuda::memcpy_async(d, p, n, stream);
  std::vector<std::byte> back(n);
  cuda::memcpy_async(back.data(), d, n, stream);
  stream.view().synchronize();
  EXPECT_EQ(test::check_pattern(back.data(), n, 11), n);
  dev.deallocate(d, n, stream);
  mr.deallocate(p, n, stream);
  stream.view().synchronize();
  SUCCEED() << mr.describe();
}

#if SPILLWAY_HAS_CUDA
namespace {

/// Holds a stream at a host function until opened, or for 20 s at most: a regression that
/// waits for the stream then fails (the gate expired) instead of hanging.
struct StreamGate {
  std::atomic<bool> open{false};
  std::atomic<bool> expired{false};

  static void CUDART_CB hold(void* self) {
    auto& g = *static_cast<StreamGate*>(self);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!g.open.load()) {
      if (std::chrono::steady_clock::now() > until) {
        g.expired.store(true);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  void close_on(Stream s) {
    ASSERT_EQ(cudaLaunchHostFunc(static_cast<cudaStream_t>(s.handle()), &hold, this), cudaSuccess);
  }
};

}  // namespace

// The progress thread allocates landing buffers on a stream that also carries the rank's
// kernels; an allocation that waited for them stopped every transfer meanwhile (tens of ms
// per spilling run). Nor may it reuse bytes freed on a busy stream by waiting
// for that stream.
TEST(PinnedMemoryResource, AllocationDoesNotWaitForTheCallersStream) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  PinnedMemoryResource mr;
  if (!mr.uses_pool()) GTEST_SKIP() << "cudaMallocHost: not ordered on a stream";
  OwningStream busy;
  StreamGate gate;
  gate.close_on(busy.view());
  const std::size_t n = 8 * MiB;
  auto* a = static_cast<std::byte*>(mr.allocate(n, busy.view()));
  test::fill_pattern(a, n, 5);       // host-writable at once
  mr.deallocate(a, n, busy.view());  // freed behind the gate
  auto* b = static_cast<std::byte*>(mr.allocate(n, busy.view()));
  test::fill_pattern(b, n, 6);
  const bool waited = gate.expired.load();
  gate.open.store(true);
  busy.view().synchronize();
  EXPECT_FALSE(waited) << "allocate() waited for the work queued on the caller's stream";
  EXPECT_EQ(test::check_pattern(b, n, 6), n);
  mr.deallocate(b, n, busy.view());
  busy.view().synchronize();
}
#endif

TEST(DeviceMemoryResource, WithoutAGpuItIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(DeviceMemoryResource(DeviceAllocator::async), logic_error);
  EXPECT_THROW(PinnedMemoryResource(), logic_error);
}
