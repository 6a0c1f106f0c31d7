// PinnedMemoryResource on its own (GPU only; skipped without one): its memory is host memory
// the host may touch at once and the GPU copies from asynchronously, it is reused, a reserve
// is mapped up front, and without CUDA it is a clear error.
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/pinned_memory_resource.hpp>

#include "io/device_common.hpp"

#include <cstring>

using namespace spillway;

#define SKIP_WITHOUT_GPU()                                             \
  do {                                                                 \
    if (!cuda::is_available()) GTEST_SKIP() << "no GPU in this build"; \
  } while (0)

TEST(PinnedMemoryResource, ItsMemoryIsWritableAtOnceAndCopiesToTheGpu) {
  SKIP_WITHOUT_GPU();
  PinnedMemoryResource mr;
  EXPECT_EQ(mr.mem_type(), MemoryType::PINNED_HOST);
  EXPECT_FALSE(mr.describe().empty());
  constexpr std::size_t n = 3 * MiB + 11;
  const OwningStream stream;
  auto* p = static_cast<std::byte*>(mr.allocate(n, stream));
  ASSERT_NE(p, nullptr);
  test::fill_pattern(p, n, 31);  // usable when allocate returns
  test::DeviceBytes dev(n);
  cuda::memcpy_async(dev.ptr, p, n, stream);
  stream.view().synchronize();
  const auto back = test::to_host(dev.ptr, n);
  EXPECT_EQ(test::check_pattern(back.data(), n, 31), n);
  mr.deallocate(p, n, stream);
  EXPECT_EQ(mr.allocate(0, stream), nullptr);
}

TEST(PinnedMemoryResource, FreedMemoryIsReusedAndAReserveIsMappedUpFront) {
  SKIP_WITHOUT_GPU();
  PinnedMemoryResource reserved(64 * MiB);
  if (!reserved.uses_pool()) GTEST_SKIP() << "this driver has no pinned memory pools";
  EXPECT_GE(reserved.reserved_bytes(), 64 * MiB);
  const std::size_t before = reserved.reserved_bytes();
  const OwningStream stream;
  for (int i = 0; i < 20; ++i) {  // 20 x 16 MiB in turn: the reserve serves every one
    void* p = reserved.allocate(16 * MiB, stream);
    std::memset(p, i, 16 * MiB);
    reserved.deallocate(p, 16 * MiB, stream);
    stream.view().synchronize();
  }
  EXPECT_EQ(reserved.reserved_bytes(), before);
}

TEST(PinnedMemoryResource, WithoutCudaItIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is here";
  EXPECT_THROW(PinnedMemoryResource(), logic_error);
}
