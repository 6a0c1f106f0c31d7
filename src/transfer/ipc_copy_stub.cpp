// The cuda_ipc copies in a build without CUDA: the backend cannot be made there, so nothing
// reaches this.
#include <spillway/core/error.hpp>

#include <spillway/transfer/gpu_copies.hpp>

namespace spillway::transfer::detail {

CopyScratch::~CopyScratch() = default;
void CopyScratch::reserve(std::size_t /*bytes*/) {
  SPILLWAY_FAIL("cuda_ipc: spillway was built without CUDA (SPILLWAY_CUDA=OFF)");
}
std::span<Piece> CopyScratch::pieces(std::size_t /*n*/) {
  SPILLWAY_FAIL("cuda_ipc: spillway was built without CUDA (SPILLWAY_CUDA=OFF)");
}
void copy_pieces(std::span<const Piece> /*pieces*/, CopyMethod /*method*/, Stream /*stream*/,
                 CopyScratch& /*scratch*/, const SideStream* /*side*/) {
  SPILLWAY_FAIL("cuda_ipc: spillway was built without CUDA (SPILLWAY_CUDA=OFF)");
}

}  // namespace spillway::transfer::detail
