// The C++ example of the README, as a program: a BufferResource with limits, a buffer on the
// top tier (the GPU where there is one, else host memory), a SpillableStore that may move it
// down a tier when memory runs short, and the statistics. Built and run by the test command.
#include <spillway/spillway.hpp>

#include <cstring>
#include <iostream>

int main() {
  using namespace spillway;
  BufferResourceConfig cfg = BufferResourceConfig::from_options();  // SPILLWAY_* settings
  cfg.limits[index(MemoryType::DEVICE)] = Limit::bytes(8 * GiB);
  cfg.limits[index(MemoryType::HOST)] = Limit::fraction(0.5);
  BufferResource br(cfg);
  const MemoryType top = br.top_tier();  // DEVICE with a GPU, else HOST
  const Stream stream = br.stream();     // the resource's stream (the default one without CUDA)

  SpillableStore store(br);                        // registers a spill function
  auto buf = br.allocate(top, 256 * MiB, stream);  // may spill the store
  if (top == MemoryType::DEVICE) {                 // fill it
    cuda::memset_device(buf->data(), 7, buf->size());
  } else {
    std::memset(buf->data(), 7, buf->size());
  }
  auto key = store.insert(std::move(buf));  // may later move down to host or disk
  auto back = store.extract(key, top);      // moved back up only if needed
  back->wait();
  std::cout << "a " << format_bytes(static_cast<double>(back->size())) << " buffer on "
            << to_string(back->mem_type()) << " (" << br.usage() << ")\n"
            << br.statistics().report();
  return 0;
}
