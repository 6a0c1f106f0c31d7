// The real CUDA allocators (skipped without a GPU).
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/memory/device_memory_resource.hpp>
#include <spillway/memory/pinned_memory_resource.hpp>

#include "common.hpp"

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

TEST(DeviceMemoryResource, WithoutAGpuItIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(DeviceMemoryResource(DeviceAllocator::async), logic_error);
  EXPECT_THROW(PinnedMemoryResource(), logic_error);
}
