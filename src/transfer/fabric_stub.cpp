// The libfabric backend where spillway was built without libfabric.

#include <spillway/core/error.hpp>

#include "transfer/detail/backend.hpp"

namespace spillway::transfer::detail {

bool fabric_compiled() noexcept {
  return false;
}

std::unique_ptr<Backend> make_fabric_backend(BackendHost& /*host*/,
                                             const EngineOptions& /*options*/) {
  SPILLWAY_FAIL(
      "transfer engine: spillway was built without libfabric (Debian: libfabric-dev; "
      "configure with SPILLWAY_LIBFABRIC=ON)");
}

}  // namespace spillway::transfer::detail
