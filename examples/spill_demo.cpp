// spillway-spill-demo: pushes more data than the memory limits allow through the memory layer
// and shows that it spills down the tiers, stays under every limit, and gets every byte back.
//
//   spillway-spill-demo [--data MiB] [--buffer MiB] [--device-limit MiB] [--host-limit MiB]
//                       [--disk-limit MiB] [--threads N] [--spill-dir DIR] [--cpu]
#include <spillway/spillway.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace spillway;

namespace {

struct Args {
  std::size_t data_mib{1024};
  std::size_t buffer_mib{16};
  std::optional<std::size_t> device_limit_mib;
  std::size_t host_limit_mib{128};
  std::optional<std::size_t> disk_limit_mib;
  int threads{2};
  std::optional<std::string> spill_dir;
  bool cpu{false};
};

void usage(std::ostream& os) {
  os << "usage: spillway-spill-demo [options]\n"
        "  --data MiB          total data to push through (default 1024)\n"
        "  --buffer MiB        size of each buffer (default 16)\n"
        "  --device-limit MiB  DEVICE limit (default: data/8 with a GPU)\n"
        "  --host-limit MiB    HOST limit (default 128)\n"
        "  --disk-limit MiB    DISK limit (default unlimited)\n"
        "  --threads N         producer threads (default 2)\n"
        "  --spill-dir DIR     where spill files go (default $SPILLWAY_SPILL_DIR or /tmp)\n"
        "  --cpu               do not use the GPU even if there is one\n"
        "  -h, --help          this text\n";
}

std::size_t parse_count(const std::string& flag, const char* text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-') {
    throw logic_error(flag + ": '" + text + "' is not a non-negative integer");
  }
  return static_cast<std::size_t>(v);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "-h" || f == "--help") {
      usage(std::cout);
      std::exit(0);
    }
    if (f == "--cpu") {
      a.cpu = true;
      continue;
    }
    if (i + 1 >= argc) throw logic_error("unknown flag or missing value: " + f);
    const char* v = argv[++i];
    if (f == "--data") {
      a.data_mib = parse_count(f, v);
    } else if (f == "--buffer") {
      a.buffer_mib = parse_count(f, v);
    } else if (f == "--device-limit") {
      a.device_limit_mib = parse_count(f, v);
    } else if (f == "--host-limit") {
      a.host_limit_mib = parse_count(f, v);
    } else if (f == "--disk-limit") {
      a.disk_limit_mib = parse_count(f, v);
    } else if (f == "--threads") {
      a.threads = static_cast<int>(parse_count(f, v));
    } else if (f == "--spill-dir") {
      a.spill_dir = v;
    } else {
      throw logic_error("unknown flag: " + f);
    }
  }
  if (a.buffer_mib == 0 || a.data_mib < a.buffer_mib) {
    throw logic_error("--buffer must be at least 1 and at most --data");
  }
  if (a.threads < 1 || a.threads > 256) throw logic_error("--threads must be within 1..256");
  return a;
}

int run(const Args& a) {
  auto cfg = BufferResourceConfig::from_options();
  cfg.use_gpu = !a.cpu;
  if (a.spill_dir) cfg.spill_dir = *a.spill_dir;
  const std::size_t device_limit =
      a.device_limit_mib.value_or(std::max<std::size_t>(a.data_mib / 8, 2 * a.buffer_mib));
  cfg.limits[index(MemoryType::DEVICE)] = Limit::bytes(device_limit * MiB);
  cfg.limits[index(MemoryType::PINNED_HOST)] = Limit::bytes(device_limit * MiB);
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(a.host_limit_mib * MiB);
  if (a.disk_limit_mib) cfg.limits[index(MemoryType::DISK)] = Limit::bytes(*a.disk_limit_mib * MiB);
  std::string priv;
  int rc = 0;
  {
    BufferResource br(cfg);
    const MemoryType top = br.top_tier();
    std::cout << "spillway-spill-demo: " << a.data_mib << " MiB in " << a.buffer_mib
              << " MiB buffers into " << to_string(top) << ", " << a.threads << " threads\n"
              << br.describe();
    SpillableStore store(br);
    const std::size_t nbuf = a.data_mib / a.buffer_mib;
    const std::size_t n = a.buffer_mib * MiB;
    std::vector<std::pair<SpillableStore::Key, std::uint64_t>> keys(nbuf);
    std::atomic<std::size_t> next{0};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> producers;
    std::atomic<bool> failed{false};
    std::string error;
    std::mutex error_mutex;
    for (int t = 0; t < a.threads; ++t) {
      producers.emplace_back([&, t] {
        try {
          OwningStream stream;
          std::mt19937_64 rng(1234 + t);
          for (std::size_t i = next++; i < nbuf && !failed; i = next++) {
            auto host = br.allocate(MemoryType::HOST, n);
            auto* w = reinterpret_cast<std::uint64_t*>(host->data());
            for (std::size_t k = 0; k < n / 8; ++k) w[k] = rng();
            const std::uint64_t sum = XXH3_64bits(host->data(), n);
            keys[i] = {store.insert(br.move(std::move(host), top, stream)), sum};
          }
        } catch (const std::exception& e) {
          std::lock_guard lock(error_mutex);
          error = e.what();
          failed = true;
        }
      });
    }
    for (auto& p : producers) p.join();
    if (failed) throw std::runtime_error(error);
    const double fill_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "inserted " << nbuf << " buffers in " << format_duration(fill_s) << "; now in "
              << "DEVICE " << format_bytes(static_cast<double>(store.bytes_in(MemoryType::DEVICE)))
              << ", PINNED_HOST "
              << format_bytes(static_cast<double>(store.bytes_in(MemoryType::PINNED_HOST)))
              << ", HOST " << format_bytes(static_cast<double>(store.bytes_in(MemoryType::HOST)))
              << ", DISK " << format_bytes(static_cast<double>(store.bytes_in(MemoryType::DISK)))
              << "\n";
    priv = br.spill_files().directory();
    // Extract everything back into the top tier and check every byte.
    std::size_t bad = 0;
    const auto t1 = std::chrono::steady_clock::now();
    for (const auto& [key, sum] : keys) {
      auto buf = store.extract(key, top);
      auto host = br.move(std::move(buf), MemoryType::HOST);
      if (XXH3_64bits(host->data(), host->size()) != sum) ++bad;
    }
    const double drain_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    std::cout << "extracted and verified " << nbuf << " buffers in " << format_duration(drain_s)
              << ": " << (bad == 0 ? "all intact" : std::to_string(bad) + " CORRUPTED") << "\n\n";
    std::cout << "tier          peak         limit\n";
    for (MemoryType t : all_memory_types) {
      if (!br.is_live(t)) continue;
      const bool over = br.peak(t) > br.limit(t);
      std::printf("%-12s %-12s %-12s %s\n", std::string(to_string(t)).c_str(),
                  format_bytes(static_cast<double>(br.peak(t))).c_str(),
                  br.limit(t) == unlimited_bytes
                      ? "unlimited"
                      : format_bytes(static_cast<double>(br.limit(t))).c_str(),
                  over ? "OVER THE LIMIT" : "ok");
      if (over) rc = 1;
    }
    std::cout << "\n" << br.statistics().report() << std::flush;
    if (bad != 0) rc = 1;
  }
  const bool left = !priv.empty() && ::access(priv.c_str(), F_OK) == 0;
  std::cout << "spill directory " << (priv.empty() ? "(never made)" : priv)
            << (left ? ": LEFT BEHIND" : ": removed") << "\n";
  return left ? 1 : rc;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "spillway-spill-demo: " << e.what() << "\n";
    usage(std::cerr);
    return 2;
  }
  try {
    return run(args);
  } catch (const std::exception& e) {
    std::cerr << "spillway-spill-demo: error: " << e.what() << "\n";
    return 1;
  }
}
