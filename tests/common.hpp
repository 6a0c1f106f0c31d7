#pragma once
// Helpers shared by the test suites.

#include <spillway/core/units.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/memory/spill_injection_adaptor.hpp>

#include <gtest/gtest.h>

#include <dirent.h>
#include <ftw.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace spillway::test {

/// Resident memory of this process (/proc/self/statm).
inline std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t size = 0;
  std::size_t resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

/// CPU time this process has used (every thread, user and system), in seconds.
inline double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

/// Regular files under `dir`, recursively (spill files left behind, say).
inline std::size_t files_in(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    n += e.is_regular_file() ? 1 : 0;
  }
  return n;
}

/// A fresh directory under /tmp, removed with its contents at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/spillway-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }
  /// Names of the entries in the directory, recursively.
  [[nodiscard]] std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::recursive_directory_iterator(path_)) {
      out.push_back(e.path().string());
    }
    return out;
  }

 private:
  std::string path_;
};

/// A configuration with small pieces and staging, so that tests cross many piece boundaries.
inline BufferResourceConfig small_config(const std::string& spill_dir) {
  BufferResourceConfig c;
  c.spill_dir = spill_dir;
  c.io_threads = 3;
  c.spill_task_size = 64 * KiB;
  c.spill_file_size = 4 * MiB;
  c.staging_size = 256 * KiB;
  c.device_allocator = DeviceAllocator::async;
  return c;
}

/// small_config without the GPU tiers.
inline BufferResourceConfig host_config(const std::string& spill_dir) {
  auto c = small_config(spill_dir);
  c.use_gpu = false;
  return c;
}

/// `c` with a SpillInjectionAdaptor of `probability` added (none for 0).
inline BufferResourceConfig with_spill_injection(BufferResourceConfig c, double probability) {
  if (probability > 0) c.adaptors.push_back(spill_injection_adaptor(probability));
  return c;
}

/// splitmix64: a fast, seeded byte pattern that differs at every 8-byte word.
inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline void fill_pattern(std::byte* p, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint64_t v = mix(seed * 0x100000001b3ULL + i);
    std::memcpy(p + i, &v, std::min<std::size_t>(8, n - i));
  }
}

/// Index of the first byte that differs from the pattern, or n when all match.
inline std::size_t check_pattern(const std::byte* p, std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> want(n);
  fill_pattern(want.data(), n, seed);
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != want[i]) return i;
  }
  return n;
}

/// A HOST buffer filled with the pattern.
inline std::unique_ptr<Buffer> make_host(BufferResource& br, std::size_t n, std::uint64_t seed) {
  auto buf = br.allocate(MemoryType::HOST, n);
  fill_pattern(buf->data(), n, seed);
  return buf;
}

/// A buffer of tier `t` holding the pattern (made on the host, then moved).
inline std::unique_ptr<Buffer> make_in(BufferResource& br, MemoryType t, std::size_t n,
                                       std::uint64_t seed) {
  auto host = make_host(br, n, seed);
  if (t == MemoryType::HOST) return host;
  return br.move(std::move(host), t, br.stream());
}

/// Checks `buf` against the pattern (through a HOST copy when it is not host memory); returns
/// the first bad index.
inline std::size_t verify(BufferResource& br, const Buffer& buf, std::uint64_t seed) {
  if (is_host_accessible(buf.mem_type())) {
    buf.wait();
    return check_pattern(buf.data(), buf.size(), seed);
  }
  auto res = br.reserve(MemoryType::HOST, buf.size());
  auto host = br.copy(buf, res, br.stream());
  host->wait();
  return check_pattern(host->data(), host->size(), seed);
}

#define SPILLWAY_SKIP_UNLESS_LIVE(br, tier)                                      \
  do {                                                                           \
    if (!(br).is_live(tier)) {                                                   \
      GTEST_SKIP() << ::spillway::to_string(tier) << " tier not available here " \
                   << "(no GPU or CPU-only build)";                              \
    }                                                                            \
  } while (0)

}  // namespace spillway::test
