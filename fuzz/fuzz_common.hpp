#pragma once
// What the fuzz targets share: one BufferResource for the whole run (host tiers only, one I/O
// thread), made at first use.
#include <spillway/memory/buffer_resource.hpp>

namespace spillway::fuzz {

inline BufferResource& resource() {
  static BufferResource br([] {
    BufferResourceConfig c;
    c.use_gpu = false;
    c.io_threads = 1;
    return c;
  }());
  return br;
}

}  // namespace spillway::fuzz
