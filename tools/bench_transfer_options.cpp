// spillway-bench-transfer's flags: the usage message, their parsing and checks.

#include "bench_transfer_options.hpp"

#include <spillway/core/units.hpp>

#include <sstream>

#include "cli.hpp"

namespace spillway::tools {

[[noreturn]] void usage(const std::string& error) {
  cli::print_usage(
      "spillway-bench-transfer", error,
      "usage: spillway-bench-transfer [options]\n"
      "  --backend B        libfabric (default), cuda_ipc (processes of one node, GPU memory)\n"
      "                     or loopback (two engines of this process)\n"
      "  --ipc-copy M       cuda_ipc's copies: auto (default), kernel, batch, mixed or per_chunk\n"
      "  --kernel-share F   of mixed copies, the kernel's share of the bytes, 0.01-0.99\n"
      "                     (default: by chunk size)\n"
      "  --wait W           sleep (default: Ticket::wait, whose wake-up is timed too) or spin\n"
      "                     (Ticket::spin_wait: the end seen at once, a core kept busy; on a\n"
      "                     machine of few cores it slows what it waits for), every write\n"
      "  --provider P       libfabric provider: tcp (default), shm, verbs, efa, sockets\n"
      "  --address IP       the address to bind (default 127.0.0.1; the target's own in a\n"
      "                     rendezvous across hosts or network namespaces)\n"
      "  --chunk LIST       chunk sizes (default 4KiB,64KiB,1MiB)\n"
      "  --chunks N         chunks a batch (default: --bytes / chunk)\n"
      "  --bytes SIZE       bytes a batch when --chunks is not given (default 64MiB)\n"
      "  --layout L         random (default) or strided: where the chunks sit in regions of\n"
      "                     twice the batch's bytes\n"
      "  --src M, --dst M   host (default), pinned, shared (pinned memory of a memfd, which a\n"
      "                     cuda_ipc peer writes into one-sided) or device (cuda_ipc only)\n"
      "  -r N               timed runs (default 5)\n"
      "  -w N               warm-up runs (default 1)\n"
      "  --verify           check every chunk's bytes on the target after the runs\n"
      "  --peer-chunks N    chunks the chunk-by-chunk peer writes a run (default 4096)\n"
      "  --rendezvous DIR   meet the other process through files in DIR\n"
      "  --role R           initiator or target, with --rendezvous\n"
      "Under spillway-run (two ranks) rank 0 writes and rank 1 is written into. With\n"
      "neither, the program starts its own target process.\n");
}

namespace {

MemoryKind memory_flag(const std::string& v, const std::string& flag) {
  if (v == "host") return {MemoryType::HOST, false};
  if (v == "pinned") return {MemoryType::PINNED_HOST, false};
  if (v == "shared") return {MemoryType::PINNED_HOST, true};
  if (v == "device") return {MemoryType::DEVICE, false};
  usage(flag + " takes host, pinned, shared or device, got '" + v + "'");
}

}  // namespace

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto num = [&](long long min, long long max) {
      return cli::number(argc, argv, i, min, max, usage);
    };
    if (a == "-h" || a == "--help") {
      usage("");
    } else if (a == "--backend") {
      o.backend = cli::value(argc, argv, i, usage);
      if (o.backend != "libfabric" && o.backend != "loopback" && o.backend != "cuda_ipc") {
        usage("--backend takes libfabric, cuda_ipc or loopback, got '" + o.backend + "'");
      }
    } else if (a == "--ipc-copy") {
      o.ipc_copy = cli::value(argc, argv, i, usage);
      if (o.ipc_copy != "auto" && o.ipc_copy != "kernel" && o.ipc_copy != "batch" &&
          o.ipc_copy != "mixed" && o.ipc_copy != "per_chunk") {
        usage("--ipc-copy takes auto, kernel, batch, mixed or per_chunk, got '" + o.ipc_copy + "'");
      }
    } else if (a == "--kernel-share") {
      o.kernel_share = cli::real(argc, argv, i, 0.01, 0.99, "a share in [0.01, 0.99]", usage);
    } else if (a == "--wait") {
      const std::string v = cli::value(argc, argv, i, usage);
      if (v != "spin" && v != "sleep") usage("--wait takes spin or sleep, got '" + v + "'");
      o.spin = v == "spin";
    } else if (a == "--provider") {
      o.provider = cli::value(argc, argv, i, usage);
    } else if (a == "--address") {
      o.address = cli::value(argc, argv, i, usage);
    } else if (a == "--chunk") {
      o.chunk_sizes.clear();
      std::stringstream ss(cli::value(argc, argv, i, usage));
      for (std::string item; std::getline(ss, item, ',');) {
        try {
          o.chunk_sizes.push_back(parse_bytes(item, "--chunk"));
        } catch (const std::exception& e) {
          usage(e.what());
        }
        if (o.chunk_sizes.back() == 0) usage("--chunk sizes must be above zero");
      }
      if (o.chunk_sizes.empty()) usage("--chunk needs at least one size");
    } else if (a == "--chunks") {
      o.chunks = static_cast<std::size_t>(num(1, 1 << 24));
    } else if (a == "--bytes") {
      try {
        o.batch_bytes = parse_bytes(cli::value(argc, argv, i, usage), "--bytes");
      } catch (const std::exception& e) {
        usage(e.what());
      }
      if (o.batch_bytes == 0 || o.batch_bytes > (std::size_t{16} << 30)) {
        usage("--bytes takes 1 byte to 16 GiB");
      }
    } else if (a == "--layout") {
      o.layout = cli::value(argc, argv, i, usage);
      if (o.layout != "random" && o.layout != "strided") {
        usage("--layout takes random or strided, got '" + o.layout + "'");
      }
    } else if (a == "--src") {
      o.src = memory_flag(cli::value(argc, argv, i, usage), a);
    } else if (a == "--dst") {
      o.dst = memory_flag(cli::value(argc, argv, i, usage), a);
    } else if (a == "-r") {
      o.runs = static_cast<int>(num(1, 1000));
    } else if (a == "-w") {
      o.warmups = static_cast<int>(num(0, 1000));
    } else if (a == "--verify") {
      o.verify = true;
    } else if (a == "--peer-chunks") {
      o.peer_chunks = static_cast<std::size_t>(num(1, 1 << 24));
    } else if (a == "--rendezvous") {
      o.rendezvous = cli::value(argc, argv, i, usage);
    } else if (a == "--role") {
      o.role = cli::value(argc, argv, i, usage);
      if (o.role != "initiator" && o.role != "target") {
        usage("--role takes initiator or target, got '" + o.role + "'");
      }
    } else {
      usage("unknown flag '" + a + "'");
    }
  }
  if (!o.role.empty() && o.rendezvous.empty()) usage("--role needs --rendezvous");
  const bool device = o.src.type == MemoryType::DEVICE || o.dst.type == MemoryType::DEVICE;
  if (device && o.backend != "cuda_ipc") {
    usage("--src/--dst device needs --backend cuda_ipc (Debian's libfabric has no FI_HMEM)");
  }
  if (o.backend == "cuda_ipc" && !device) {
    usage("--backend cuda_ipc moves GPU memory: give --src or --dst device");
  }
  if (o.backend == "loopback" && !o.rendezvous.empty()) {
    usage("--backend loopback runs in one process: no --rendezvous");
  }
  return o;
}

transfer::EngineOptions engine_options(const Options& o) {
  transfer::EngineOptions e;
  e.backend = o.backend;
  e.provider = o.provider;
  e.address = o.address;
  e.ipc_copy = o.ipc_copy;
  e.ipc_kernel_share = o.kernel_share;
  return e;
}

}  // namespace spillway::tools
