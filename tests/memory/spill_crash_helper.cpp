// Spills to disk under the directory given as argv[1], then ends as argv[2] says:
// "throw" (uncaught exception -> std::terminate), "exit" (std::exit(3) with the resource
// still alive) or "kill" (SIGKILL: nothing can clean up but the next process).
#include <spillway/memory/buffer_resource.hpp>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  spillway::BufferResourceConfig cfg;
  cfg.spill_dir = argv[1];
  cfg.use_gpu = false;
  auto* br = new spillway::BufferResource(cfg);  // never destroyed: exit paths must clean up
  auto buf = br->allocate(spillway::MemoryType::HOST, 1 << 20);
  std::memset(buf->data(), 7, buf->size());
  auto disk = br->move(std::move(buf), spillway::MemoryType::DISK);
  const std::string mode = argv[2];
  if (mode == "throw") throw std::runtime_error("dying with spilled data");
  if (mode == "kill") std::raise(SIGKILL);
  std::exit(3);
}
