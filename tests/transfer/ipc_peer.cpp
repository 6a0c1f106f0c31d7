// The other process of test_transfer_cuda_ipc: an engine on the cuda_ipc backend (or on the
// backends argv[3] names) with one registered region (argv: device|pinned|shared|shared-hidden|
// host, bytes; shared: a SharedHostMemory, registered as pinned host memory; shared-hidden: the
// same, whose descriptor then names /dev/null, so that a peer cannot map the file),
// zero-filled. It prints its metadata and the region (hex, one line each), then answers its
// peer's control messages:
//   'E' imm(u32) -> waits up to 10 s for one imm, answers 1 (arrived) or 0;
//   'D'          -> answers the region's bytes as they are now;
//   'F' byte     -> fills the region with that byte, answers 1;
//   'C'          -> answers how many chunks this engine has copied (u64): none when its peers
//                   write one-sided;
//   'Q'          -> exits 0.
// It exits 1 when its stdin closes (the test died) or after 60 s without a message.
#include <spillway/core/cuda.hpp>
#include <spillway/core/hex.hpp>
#include <spillway/transfer/engine.hpp>
#include <spillway/transfer/shared_host_memory.hpp>

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

using namespace spillway;
using namespace spillway::transfer;
using namespace std::chrono_literals;

/// Points every descriptor of a memfd of SharedHostMemory at /dev/null (the mapping stays):
/// what a peer then opens through /proc is another file. False if there was none.
bool hide_memfds() {
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) return false;
  std::vector<int> fds;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && target.find("memfd:spillway-shared-host") != std::string::npos) {
      fds.push_back(std::stoi(e.path().filename().string()));
    }
  }
  for (const int fd : fds) ::dup3(null_fd, fd, O_CLOEXEC);
  ::close(null_fd);
  return !fds.empty();
}

int main(int argc, char** argv) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (argc != 3 && argc != 4) return 2;
  const std::string kind = argv[1];
  const std::size_t bytes = std::stoull(argv[2]);
  const bool shared_kind = kind == "shared" || kind == "shared-hidden";
  const MemoryType type = kind == "device"                  ? MemoryType::DEVICE
                          : kind == "pinned" || shared_kind ? MemoryType::PINNED_HOST
                                                            : MemoryType::HOST;
  try {
    EngineOptions o;
    o.backend = argc == 4 ? argv[3] : "cuda_ipc";
    o.heartbeat_interval = 50ms;
    o.peer_timeout = 2000ms;
    TransferEngine engine(o);
    std::optional<SharedHostMemory> shared;
    if (shared_kind) shared = SharedHostMemory::allocate(bytes);
    void* p = shared                            ? shared->data()
              : type == MemoryType::DEVICE      ? cuda::malloc_device(bytes)
              : type == MemoryType::PINNED_HOST ? cuda::malloc_pinned(bytes)
                                                : static_cast<void*>(new std::uint8_t[bytes]);
    const auto fill = [&](std::uint8_t v) {
      if (type == MemoryType::DEVICE) {
        cuda::memset_device(p, v, bytes);
      } else {
        std::memset(p, v, bytes);
      }
    };
    fill(0);
    const Region r = engine.register_memory(p, bytes, type, type == MemoryType::DEVICE ? 0 : -1);
    if (kind == "shared-hidden" && !hide_memfds()) return 5;
    std::cout << to_hex(engine.metadata()) << "\n"
              << to_hex(engine.export_region(r, 0, bytes).to_bytes()) << std::endl;
    for (;;) {
      auto m = engine.recv_control(60s);
      if (!m) return 1;
      const auto& [peer, body] = *m;
      if (body.empty()) return 3;
      if (body[0] == 'Q') return 0;
      if (body[0] == 'E' && body.size() == 5) {
        std::uint32_t imm = 0;
        std::memcpy(&imm, body.data() + 1, 4);
        const bool ok = engine.expect_imm(imm, 1, Deadline::in(10s)).wait() == Status::ok;
        engine.send_control(peer, std::vector<std::uint8_t>{static_cast<std::uint8_t>(ok)});
      } else if (body[0] == 'D') {
        std::vector<std::uint8_t> out(bytes);
        if (type == MemoryType::DEVICE) {
          cuda::memcpy_async(out.data(), p, bytes, Stream{});
          Stream{}.synchronize();
        } else {
          std::memcpy(out.data(), p, bytes);
        }
        engine.send_control(peer, out);
      } else if (body[0] == 'C') {
        const std::uint64_t n = engine.counters().chunks_posted;
        std::vector<std::uint8_t> out(sizeof(n));
        std::memcpy(out.data(), &n, sizeof(n));
        engine.send_control(peer, out);
      } else if (body[0] == 'F' && body.size() == 2) {
        fill(body[1]);
        engine.send_control(peer, std::vector<std::uint8_t>{1});
      } else {
        return 4;
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "ipc_peer: " << e.what() << "\n";
    return 1;
  }
}
