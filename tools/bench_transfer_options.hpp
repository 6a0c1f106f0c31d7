#pragma once
// spillway-bench-transfer's flags and their parsing (a bad flag is a usage message and exit
// code 2, before anything runs), and the engine options they give.

#include <spillway/transfer/engine.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "bench_transfer_memory.hpp"

namespace spillway::tools {

struct Options {
  std::string backend{"libfabric"};
  std::string provider{"tcp"};
  std::string address{"127.0.0.1"};
  std::vector<std::size_t> chunk_sizes{4096, 65536, 1 << 20};
  std::size_t chunks{0};  // 0: batch_bytes / chunk
  std::size_t batch_bytes{64 << 20};
  std::string layout{"random"};
  MemoryKind src{};
  MemoryKind dst{};
  int runs{5};
  int warmups{1};
  bool verify{false};
  std::size_t peer_chunks{4096};  // the chunk-by-chunk peer's chunks per run
  std::string rendezvous;
  std::string role;  // "", "initiator", "target"
  std::string ipc_copy{"auto"};
  double kernel_share{0};  // 0: the engine's default
  bool spin{false};        // each write waited by Ticket::spin_wait, else wait()
};

/// Prints the usage message (with `error` first, unless empty) and exits: code 2 after an
/// error, else 0.
[[noreturn]] void usage(const std::string& error);

/// The options argv gives; exits with the usage message (code 2) on a bad flag.
Options parse(int argc, char** argv);

/// The transfer engine's options for `o`.
transfer::EngineOptions engine_options(const Options& o);

}  // namespace spillway::tools
