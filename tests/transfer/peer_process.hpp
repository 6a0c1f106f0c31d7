#pragma once
// A transfer engine in another process (transfer_ipc_peer, beside the test binary): started
// with its memory kind, region size and backends, its metadata and region read from its
// standard output; killed (if still there) when done, with what its shm endpoints left in
// /dev/shm, which a killed process cannot remove (test_transfer_cuda_ipc, test_transfer_faults);
// and the engine options of the tests that kill peers.

#include <spillway/core/hex.hpp>
#include <spillway/transfer/engine.hpp>

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace spillway::transfer::test {

/// How long fast_failing_options' engines wait on a silent peer before it is gone.
inline constexpr std::chrono::milliseconds kFastPeerTimeout{1000};

/// A libfabric engine of `provider` that finds a dead peer fast: heartbeats every 50 ms, a
/// peer silent for kFastPeerTimeout gone (test_transfer_processes, test_transfer_faults).
inline EngineOptions fast_failing_options(const std::string& provider) {
  EngineOptions o;
  o.backend = "libfabric";
  o.provider = provider;
  o.heartbeat_interval = std::chrono::milliseconds(50);
  o.peer_timeout = kFastPeerTimeout;
  return o;
}

inline std::string peer_helper_path() {
  char self[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  const std::string path(self, n > 0 ? static_cast<std::size_t>(n) : 0);
  return path.substr(0, path.rfind('/')) + "/transfer_ipc_peer";
}

struct PeerProcess {
  pid_t pid{-1};
  std::vector<std::uint8_t> metadata;
  RemoteRegion region;

  PeerProcess(const std::string& kind, std::size_t bytes, const std::string& backends) {
    const std::string path = peer_helper_path();
    const std::string size = std::to_string(bytes);
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    pid = ::fork();
    if (pid == 0) {  // only async-signal-safe calls until exec
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::execl(path.c_str(), path.c_str(), kind.c_str(), size.c_str(), backends.c_str(), nullptr);
      ::_exit(127);
    }
    ::close(out[1]);
    FILE* f = ::fdopen(out[0], "r");
    const auto line = [&] {
      std::string s;
      for (int c; (c = std::fgetc(f)) != EOF && c != '\n';) s += static_cast<char>(c);
      return s;
    };
    metadata = from_hex(line());
    const auto region_bytes = from_hex(line());
    std::fclose(f);
    if (!region_bytes.empty()) region = RemoteRegion::from_bytes(region_bytes);
  }
  ~PeerProcess() { kill_now(); }
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  void kill_now() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    const std::string prefix = "sw" + std::to_string(pid) + "-";
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
      if (e.path().filename().string().starts_with(prefix)) std::filesystem::remove(e.path(), ec);
    }
    pid = -1;
  }
};

}  // namespace spillway::transfer::test
