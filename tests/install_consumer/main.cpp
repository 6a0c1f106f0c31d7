#include <spillway/spillway.hpp>

#include <cstdio>

int main() {
  spillway::BufferResourceConfig cfg;
  cfg.use_gpu = false;
  spillway::BufferResource br(cfg);
  auto buf = br.allocate(spillway::MemoryType::HOST, 1 << 20);
  auto disk = br.move(std::move(buf), spillway::MemoryType::DISK);
  std::printf("consumer: spilled %zu bytes through an installed spillway\n", disk->size());
  // The transfer engine links too (with libfabric where spillway was built with it).
  spillway::transfer::TransferEngine engine({.backend = "auto"});
  std::printf("consumer: a transfer engine on %s\n", engine.backend_name().c_str());
  return disk->mem_type() == spillway::MemoryType::DISK ? 0 : 1;
}
