#include <spillway/comm/bootstrap.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace spillway::bootstrap {

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

int env_int(const char* name, int lo, int hi) {
  const auto v = env(name);
  SPILLWAY_EXPECTS(v.has_value(), std::string(name) + " is not set (SPILLWAY_RUN_RANK is)");
  int out = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  SPILLWAY_EXPECTS(ec == std::errc() && end == v->data() + v->size() && out >= lo && out <= hi,
                   std::string(name) + " must be an integer within " + std::to_string(lo) + ".." +
                       std::to_string(hi) + ", got '" + *v + "'");
  return out;
}

std::string path_of(const LaunchInfo& launch, const std::string& key) {
  return launch.dir + "/" + launch.token + "." + key;
}

}  // namespace

std::optional<LaunchInfo> from_environment() {
  if (!env("SPILLWAY_RUN_RANK")) return std::nullopt;
  LaunchInfo l;
  l.nranks = env_int("SPILLWAY_RUN_NRANKS", 1, 1 << 20);
  l.rank = env_int("SPILLWAY_RUN_RANK", 0, l.nranks - 1);
  if (env("SPILLWAY_RUN_DEVICE")) l.device = env_int("SPILLWAY_RUN_DEVICE", -1, 1 << 16);
  l.dir = env("SPILLWAY_RUN_DIR").value_or("");
  l.token = env("SPILLWAY_RUN_TOKEN").value_or("");
  SPILLWAY_EXPECTS(!l.dir.empty(), "SPILLWAY_RUN_DIR is not set (SPILLWAY_RUN_RANK is)");
  SPILLWAY_EXPECTS(!l.token.empty() && l.token.find('/') == std::string::npos,
                   "SPILLWAY_RUN_TOKEN must be a non-empty name without '/'");
  return l;
}

int device_for_rank(int rank) {
  const int gpus = cuda::device_count();
  if (gpus == 0) return -1;
  if (const auto l = from_environment(); l && l->device >= 0) {
    SPILLWAY_EXPECTS(l->device < gpus, "SPILLWAY_RUN_DEVICE is " + std::to_string(l->device) +
                                           " but this process sees " + std::to_string(gpus) +
                                           " GPUs");
    return l->device;
  }
  return rank % gpus;
}

void publish(const LaunchInfo& launch, const std::string& key, const std::string& value) {
  const std::string path = path_of(launch, key);
  const std::string tmp = path + ".tmp" + std::to_string(launch.rank);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << value;
    out.flush();
    if (!out) SPILLWAY_FAIL("bootstrap: cannot write " + tmp, io_error);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    SPILLWAY_FAIL("bootstrap: cannot rename " + tmp + " to " + path + ": " + std::strerror(errno),
                  io_error);
  }
}

namespace {
std::optional<std::string> read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
std::string exit_key(int rank) {
  return "exited-" + std::to_string(rank);
}
}  // namespace

std::string lookup(const LaunchInfo& launch, const std::string& key, int from,
                   std::chrono::milliseconds timeout) {
  const std::string path = path_of(launch, key);
  const std::string exited = path_of(launch, exit_key(from));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto value = read_whole(path)) return *value;
    if (auto how = read_whole(exited)) {
      if (auto value = read_whole(path)) return *value;  // published just before it exited
      SPILLWAY_FAIL("bootstrap: rank " + std::to_string(from) + " exited " + *how +
                        " before it published '" + key + "' (it left the launch)",
                    comm_error);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      SPILLWAY_FAIL("bootstrap: rank " + std::to_string(from) + " did not publish '" + key +
                        "' within " + std::to_string(timeout.count()) + " ms (" + path +
                        "; is it stuck?)",
                    comm_error);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void announce_exit(const LaunchInfo& launch, int rank, const std::string& how) {
  publish(launch, exit_key(rank), how);
}

}  // namespace spillway::bootstrap
