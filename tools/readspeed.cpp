// spillway-readspeed: how fast files are read into memory with spillway's parallel reader, per
// thread count, like ROOT's root-readspeed: throughput, real and CPU time, CPU efficiency, and
// the speed-up over the first thread count with the Amdahl parallel fraction it implies.
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/options.hpp>
#include <spillway/core/topology.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/device_reader.hpp>
#include <spillway/io/page_cache.hpp>
#include <spillway/io/reader.hpp>

#include "cli.hpp"
#include "pcie.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace spillway;

namespace {

struct Options {
  std::vector<std::string> files;
  std::vector<std::size_t> threads{options::get().io_threads};
  std::size_t task_size{options::get().io_task_size};
  bool cold{false};
  bool direct{options::get().io_direct};
  IoGds gds{options::get().io_gds};
  bool tune{false};
  bool device{false};     // --target device
  std::vector<int> cpus;  // the reading threads': near the GPU for --target device (io_cpus)
  int runs{3};
};

[[noreturn]] void usage(const std::string& error) {
  cli::print_usage(
      "spillway-readspeed", error,
      "usage: spillway-readspeed --files F [F ...] [options]\n"
      "  --files F ...       files to read, whole (all of them per run)\n"
      "  --threads N[,N...]  thread counts; a list runs a sweep (default SPILLWAY_IO_THREADS)\n"
      "  --task-size SIZE    bytes per read task (default SPILLWAY_IO_TASK_SIZE, 4MiB)\n"
      "  --target host|device  where the bytes go (device: GPU memory through pinned bounce\n"
      "                      buffers, with the pinned host-to-device ceiling measured too)\n"
      "  --cold              drop the files from the page cache before each run\n"
      "  --direct            O_DIRECT for the aligned part of each file (SPILLWAY_IO_DIRECT)\n"
      "  --gds off|auto|on   GPUDirect Storage (cuFile) for --target device (SPILLWAY_IO_GDS;\n"
      "                      auto: only with the nvidia-fs driver, on: also compat mode)\n"
      "  --tune              sweep threads x task size; print the best as SPILLWAY_IO_* lines\n"
      "  --runs N            runs per thread count; the median is shown (default 3)\n"
      "  -h                  this help\n");
}

std::size_t positive(const std::string& v, const std::string& flag) {
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || n < 1 || n > 4096) {
    usage(flag + " takes whole numbers from 1 to 4096, got '" + v + "'");
  }
  return static_cast<std::size_t>(n);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      usage("");
    } else if (a == "--files") {
      while (i + 1 < argc && argv[i + 1][0] != '-') o.files.emplace_back(argv[++i]);
    } else if (a == "--threads") {
      o.threads.clear();
      std::stringstream ss(value());
      for (std::string t; std::getline(ss, t, ',');) o.threads.push_back(positive(t, a));
    } else if (a == "--task-size") {
      try {
        o.task_size = parse_bytes(value(), "--task-size");
      } catch (const std::exception& e) {
        usage(e.what());
      }
      if (o.task_size == 0) usage("--task-size must be positive");
    } else if (a == "--target") {
      const std::string t = value();
      if (t != "host" && t != "device") usage("--target takes host or device, got '" + t + "'");
      o.device = t == "device";
      if (o.device && !cuda::is_available()) usage("--target device needs a GPU");
    } else if (a == "--cold") {
      o.cold = true;
    } else if (a == "--direct") {
      o.direct = true;
    } else if (a == "--gds") {
      const std::string v = value();
      if (v != "off" && v != "auto" && v != "on")
        usage("--gds takes off, auto or on, got '" + v + "'");
      o.gds = parse_io_gds(v);
    } else if (a == "--tune") {
      o.tune = true;
    } else if (a == "--runs") {
      o.runs = static_cast<int>(positive(value(), a));
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  if (o.files.empty()) usage("no --files given");
  if (o.direct && o.task_size % 4096 != 0) usage("--direct needs a --task-size multiple of 4096");
  std::uintmax_t total = 0;
  for (const auto& f : o.files) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(f, ec)) usage("'" + f + "' is not a readable file");
    total += std::filesystem::file_size(f, ec);
  }
  // No bytes, no rate: every column would be 0 or undefined (it printed a misaligned row).
  if (total == 0) usage("the files hold no bytes: there is nothing to time");
  return o;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

std::string describe(const std::vector<int>& cpus) {
  if (cpus.empty()) return "anywhere";
  return std::to_string(cpus.size()) + " CPUs of the GPU's NUMA node (from " +
         std::to_string(cpus.front()) + ")";
}

/// The pool that, with the calling thread taking part, makes `threads` threads (none for 1).
std::unique_ptr<io::ThreadPool> pool_of(const Options& o, std::size_t threads) {
  if (threads <= 1) return nullptr;
  return std::make_unique<io::ThreadPool>(threads - 1, o.cpus);
}

struct Result {
  double real{0}, cpu{0}, gbps{0};
  std::string path;
};

/// Reads every file whole with `threads` threads (the caller and a pool), `o.runs` times;
/// the run of median time.
Result measure(const Options& o, std::size_t threads, std::size_t task_size,
               const std::vector<std::size_t>& sizes, std::span<std::byte> dst) {
  const auto pool = pool_of(o, threads);
  std::vector<Result> runs;
  for (int r = 0; r < o.runs; ++r) {
    if (o.cold) {
      for (const auto& f : o.files) io::drop_from_page_cache(f);
    }
    Result res;
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t at = 0;
    for (std::size_t i = 0; i < o.files.size(); ++i) {
      const io::ReadOptions ro{task_size, o.direct, o.gds};
      if (o.device) {
        const auto how =
            io::read_file_to_device(o.files[i], dst.data() + at, sizes[i], 0, pool.get(), ro);
        res.path = how == io::DevicePath::bounce ? "pinned bounce"
                   : how == io::DevicePath::gds  ? "GDS (cuFile)"
                                                 : "pageable";
      } else {
        const auto how = io::read_file(o.files[i], dst.data() + at, sizes[i], 0, pool.get(), ro);
        res.path = how == io::ReadPath::direct ? "direct" : "buffered";
      }
      at += sizes[i];
    }
    res.real = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    res.cpu = cpu_seconds() - c0;
    res.gbps = static_cast<double>(at) / res.real / 1e9;
    runs.push_back(res);
  }
  std::sort(runs.begin(), runs.end(),
            [](const Result& x, const Result& y) { return x.real < y.real; });
  return runs[runs.size() / 2];
}

/// The host copy ceiling for `threads` threads: `dst` filled from `src` (repeated) by memcpy
/// in pieces of `task_size` on the same kind of pool as the reads, `o.runs` times; the median
/// GB/s. Reads out of the page cache are copies too, so this is what they can reach.
double memcpy_gbps(const Options& o, std::size_t threads, std::size_t task_size,
                   std::span<const std::byte> src, std::span<std::byte> dst) {
  const auto pool = pool_of(o, threads);
  const std::size_t pieces = (dst.size() + task_size - 1) / task_size;
  auto copy = [&](std::size_t i) {
    const std::size_t at = i * task_size;
    const std::size_t n = std::min(task_size, dst.size() - at);
    const std::size_t from = at % src.size();
    const std::size_t first = std::min(n, src.size() - from);  // src wraps around
    std::memcpy(dst.data() + at, src.data() + from, first);
    if (first < n) std::memcpy(dst.data() + at + first, src.data(), n - first);
  };
  std::vector<double> gbps;
  for (int r = 0; r < o.runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    if (pool) {
      pool->parallel_for(pieces, copy);
    } else {
      for (std::size_t i = 0; i < pieces; ++i) copy(i);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbps.push_back(static_cast<double>(dst.size()) / s / 1e9);
  }
  std::sort(gbps.begin(), gbps.end());
  return gbps[gbps.size() / 2];
}

/// --tune: threads 1, 2, 4, ... up to the cores x task sizes 1, 4, 16, 64 MiB.
void tune(const Options& o, const std::vector<std::size_t>& sizes, std::span<std::byte> dst) {
  const std::size_t cores = std::max(1U, std::thread::hardware_concurrency());
  std::vector<std::size_t> threads;
  for (std::size_t t = 1; t < cores; t *= 2) threads.push_back(t);
  threads.push_back(cores);
  const std::vector<std::size_t> tasks{1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB};
  std::cout << std::setw(8) << "threads";
  for (std::size_t task : tasks) std::cout << std::setw(12) << format_bytes(double(task));
  std::cout << "   (GB/s)\n";
  double best = 0;
  std::size_t best_t = 1;
  std::size_t best_task = tasks.front();
  for (std::size_t t : threads) {
    std::cout << std::setw(8) << t;
    for (std::size_t task : tasks) {
      const Result r = measure(o, t, task, sizes, dst);
      std::cout << std::fixed << std::setprecision(2) << std::setw(12) << r.gbps << std::flush;
      if (r.gbps > best * 1.02) {  // a clear gain, else keep fewer threads / smaller tasks
        best = r.gbps;
        best_t = t;
        best_task = task;
      }
    }
    std::cout << "\n";
  }
  std::cout << "best: " << std::setprecision(2) << best << " GB/s\n"
            << "export SPILLWAY_IO_THREADS=" << best_t << "\n"
            << "export SPILLWAY_IO_TASK_SIZE=" << best_task / MiB << "MiB\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<Options> parsed;
  try {
    parsed.emplace(parse(argc, argv));
  } catch (const std::exception& e) {  // a bad SPILLWAY_IO_* setting
    std::cerr << "spillway-readspeed: " << e.what() << "\n";
    return 2;
  }
  const Options& o = *parsed;
  try {
    if (o.device) parsed->cpus = io::io_cpus();
    std::vector<std::size_t> sizes;
    std::size_t total = 0;
    for (const auto& f : o.files) {
      sizes.push_back(std::filesystem::file_size(f));
      total += sizes.back();
    }
    // Host: page-aligned (as pinned or pool memory would be), touched: no page faults when
    // timed. Device: GPU memory of the current device.
    const std::size_t alloc = (total + 4095) / 4096 * 4096 + 4096;
    std::unique_ptr<std::byte, void (*)(void*)> mem(
        static_cast<std::byte*>(o.device ? cuda::malloc_device(alloc)
                                         : std::aligned_alloc(4096, alloc)),
        o.device ? cuda::free_device : [](void* p) { std::free(p); });
    if (!mem) throw out_of_memory("no memory for the destination");
    (void)topology::bind_this_thread(o.cpus);  // the caller reads too
    std::span<std::byte> dst(mem.get(), total);
    if (o.device) {
      cuda::memset_device(dst.data(), 0, dst.size());
    } else {
      std::memset(dst.data(), 0, dst.size());
    }
    const double ceiling = o.device ? tools::pcie_ceiling(total, true) : 0;
    std::cout << "spillway-readspeed: " << o.files.size() << " file(s), "
              << format_bytes(double(total)) << " | task " << format_bytes(double(o.task_size))
              << " | " << (o.direct ? "O_DIRECT" : "page cache") << " | "
              << (o.cold ? "cold (dropped before each run)" : "warm") << " | median of " << o.runs
              << (o.device ? " | into GPU memory" : " | into host memory") << " | threads "
              << describe(o.cpus) << "\n";
    if (o.device) {
      std::cout << "pinned host-to-device ceiling (same run): " << std::fixed
                << std::setprecision(2) << ceiling << " GB/s\n";
    }
    if (o.tune) {
      tune(o, sizes, dst);
      return 0;
    }
    // Host: each thread count's memcpy of the same bytes (from a 1 GiB source, touched).
    std::vector<std::byte> src;
    if (!o.device) src.assign(std::min<std::size_t>(total, GiB), std::byte{1});
    std::cout << std::setw(8) << "threads" << std::setw(11) << "GB/s" << std::setw(10) << "real s"
              << std::setw(10) << "CPU s" << std::setw(10) << "CPU eff" << std::setw(10)
              << "speed-up" << std::setw(10) << "Amdahl"
              << (o.device ? "  of H2D" : "    memcpy  speed-up  of memcpy") << "  path\n";
    double base = 0;
    double memcpy_base = 0;
    for (std::size_t t : o.threads) {
      const Result m = measure(o, t, o.task_size, sizes, dst);
      if (base == 0) base = m.gbps;
      const double speedup = base > 0 ? m.gbps / base : 0;  // 0: empty files
      const double n = double(t) / double(o.threads.front());
      std::cout << std::setw(8) << t << std::fixed << std::setprecision(2) << std::setw(11)
                << m.gbps << std::setprecision(3) << std::setw(10) << m.real << std::setw(10)
                << m.cpu << std::setprecision(2) << std::setw(10) << (m.cpu / double(t)) / m.real
                << std::setw(10) << speedup;
      if (n > 1 && speedup > 0) {
        std::cout << std::setw(9) << std::setprecision(1) << 100 * (1 - 1 / speedup) / (1 - 1 / n)
                  << "%";
      } else {
        std::cout << std::setw(10) << "-";
      }
      if (o.device) {
        std::cout << std::setw(8) << std::setprecision(2) << m.gbps / ceiling;
      } else if (!src.empty()) {
        const double copy = memcpy_gbps(o, t, o.task_size, src, dst);
        if (memcpy_base == 0) memcpy_base = copy;
        std::cout << std::setw(10) << std::setprecision(2) << copy << std::setw(10)
                  << copy / memcpy_base << std::setw(11) << m.gbps / copy;
      }
      std::cout << "  " << m.path << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "spillway-readspeed: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
