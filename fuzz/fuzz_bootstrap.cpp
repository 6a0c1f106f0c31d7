// libFuzzer target for the bootstrap of spillway-run: the SPILLWAY_RUN_* variables a rank
// reads (bootstrap::from_environment), then the rendezvous through the launch directory
// (publish, then lookup, of a value such as rank 0's MPI port name).
// Valid variables must give a LaunchInfo that keeps its promises (0 <= rank < nranks,
// device >= -1, a token without '/'), and a published value must be read back byte for byte;
// invalid variables must give spillway::logic_error naming the variable. Never a crash,
// undefined behaviour, or a file outside the launch directory.
// Input: the five values (rank, nranks, device, token, whether to set the directory) and the
// value to publish, taken in turn.
#include <spillway/comm/bootstrap.hpp>
#include <spillway/core/error.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

const std::string& launch_dir() {
  // Never destroyed: the exit handler that removes the directory runs after static destructors.
  static const std::string* dir = [] {
    std::string t = (std::filesystem::temp_directory_path() / "spillway-fuzz-XXXXXX").string();
    if (::mkdtemp(t.data()) == nullptr) std::abort();
    auto* d = new std::string(t);
    std::atexit([] { std::filesystem::remove_all(launch_dir()); });
    return d;
  }();
  return *dir;
}

void set(const char* name, const std::string& value) {
  if (value.find('\0') != std::string::npos) {
    ::unsetenv(name);  // an environment value cannot hold NUL
  } else {
    ::setenv(name, value.c_str(), 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  set("SPILLWAY_RUN_RANK", in.ConsumeRandomLengthString(12));
  set("SPILLWAY_RUN_NRANKS", in.ConsumeRandomLengthString(12));
  if (in.ConsumeBool()) {
    set("SPILLWAY_RUN_DEVICE", in.ConsumeRandomLengthString(8));
  } else {
    ::unsetenv("SPILLWAY_RUN_DEVICE");
  }
  set("SPILLWAY_RUN_TOKEN", in.ConsumeRandomLengthString(16));
  if (in.ConsumeBool()) {
    ::setenv("SPILLWAY_RUN_DIR", launch_dir().c_str(), 1);
  } else {
    ::unsetenv("SPILLWAY_RUN_DIR");
  }
  const std::string value = in.ConsumeRemainingBytesAsString();
  try {
    const auto launch = spillway::bootstrap::from_environment();
    if (!launch) return 0;  // SPILLWAY_RUN_RANK was not set
    if (launch->rank < 0 || launch->rank >= launch->nranks || launch->device < -1 ||
        launch->token.empty() || launch->token.find('/') != std::string::npos ||
        launch->dir != launch_dir()) {
      std::abort();
    }
    spillway::bootstrap::publish(*launch, "fuzz", value);
    const std::string back =
        spillway::bootstrap::lookup(*launch, "fuzz", launch->rank, std::chrono::milliseconds(1000));
    if (back != value) std::abort();
    std::filesystem::remove(launch->dir + "/" + launch->token + ".fuzz");
  } catch (const spillway::logic_error&) {
  } catch (const spillway::io_error&) {
    // A token such as ".." or one too long for a file name: the launcher never makes those,
    // and publish says it cannot write rather than writing elsewhere.
  }
  return 0;
}
