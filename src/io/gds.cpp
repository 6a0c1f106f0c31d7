#include "io/detail/gds.hpp"

#include "io/detail/tasks.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/io/file_handle.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/types.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <mutex>

namespace spillway::io::detail {

namespace {

// The parts of cufile.h's ABI used here (cuFile 1.x).
struct CUfileError {
  int err;     // CUfileOpError; 0 = CU_FILE_SUCCESS
  int cu_err;  // CUresult
};
struct CUfileDescr {
  int type;  // CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1
  union {
    int fd;
    void* handle;
  } handle;
  const void* fs_ops;
};
using CUfileHandle = void*;

}  // namespace

struct CuFile::Api {
  CUfileError (*driver_open)();
  CUfileError (*handle_register)(CUfileHandle*, CUfileDescr*);
  void (*handle_deregister)(CUfileHandle);
  ssize_t (*read)(CUfileHandle, void*, std::size_t, off_t, off_t);
  ssize_t (*write)(CUfileHandle, const void*, std::size_t, off_t, off_t);
};

namespace {

/// Loads libcufile and opens its driver; null (and a log line) where either fails.
const CuFile::Api* load() {
  void* lib = dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen("libcufile.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    SPILLWAY_LOG(info, "GDS: libcufile not found; reads into GPU memory use bounce buffers");
    return nullptr;
  }
  static CuFile::Api api{};
  auto sym = [&](const char* name) { return dlsym(lib, name); };
  api.driver_open = reinterpret_cast<decltype(api.driver_open)>(sym("cuFileDriverOpen"));
  api.handle_register =
      reinterpret_cast<decltype(api.handle_register)>(sym("cuFileHandleRegister"));
  api.handle_deregister =
      reinterpret_cast<decltype(api.handle_deregister)>(sym("cuFileHandleDeregister"));
  api.read = reinterpret_cast<decltype(api.read)>(sym("cuFileRead"));
  api.write = reinterpret_cast<decltype(api.write)>(sym("cuFileWrite"));
  if (api.driver_open == nullptr || api.handle_register == nullptr ||
      api.handle_deregister == nullptr || api.read == nullptr || api.write == nullptr) {
    SPILLWAY_LOG(warn, "GDS: libcufile lacks the cuFile entry points; not used");
    return nullptr;
  }
  if (const CUfileError e = api.driver_open(); e.err != 0) {
    SPILLWAY_LOG(info, "GDS: cuFileDriverOpen failed (error " << e.err << "); not used");
    return nullptr;
  }
  return &api;
}

std::atomic<bool> refused{false};  // cuFile would not register a file here

/// The file opened for cuFile (O_DIRECT where allowed: true GDS needs it) and registered;
/// `ok()` is false when cuFile refused it.
class Registered {
 public:
  Registered(const CuFile::Api& api, const std::string& path, int flags) : api_{api} {
    file_ = open_direct(path, flags);
    if (!file_.is_open()) file_ = FileHandle(path, flags);
    CUfileDescr d{};
    d.type = 1;
    d.handle.fd = file_.fd();
    if (const CUfileError e = api_.handle_register(&handle_, &d); e.err != 0) {
      handle_ = nullptr;
      if (!refused.exchange(true)) {
        SPILLWAY_LOG(warn, "GDS: cuFile cannot register files here (error "
                               << e.err << ", no nvidia-fs and no compatibility mode?); "
                               << "reads and writes of GPU memory use bounce buffers");
      }
    }
  }
  ~Registered() {
    if (handle_ != nullptr) api_.handle_deregister(handle_);
  }
  [[nodiscard]] bool ok() const { return handle_ != nullptr; }
  Registered(const Registered&) = delete;
  Registered& operator=(const Registered&) = delete;
  [[nodiscard]] CUfileHandle handle() const { return handle_; }

 private:
  const CuFile::Api& api_;
  FileHandle file_;
  CUfileHandle handle_{nullptr};
};

std::string range(const std::string& path, std::uint64_t offset, std::size_t bytes) {
  return path + " at offset " + std::to_string(offset) + ", " + std::to_string(bytes) + " bytes";
}

}  // namespace

CuFile* CuFile::get(IoGds mode) {
  if (mode == IoGds::off) return nullptr;
  static const Api* api = load();
  static CuFile driver(api);
  if (api == nullptr || refused.load()) return nullptr;
  if (mode == IoGds::automatic && !std::filesystem::exists("/proc/driver/nvidia-fs/version")) {
    return nullptr;  // compatibility mode only: the bounce path is at least as fast
  }
  return &driver;
}

bool CuFile::read(const std::string& path, void* dst, std::size_t bytes,
                  std::uint64_t offset) const {
  const Registered f(*api_, path, O_RDONLY);
  if (!f.ok()) return false;
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t n = api_->read(f.handle(), dst, bytes - done, static_cast<off_t>(offset + done),
                                 static_cast<off_t>(done));
    if (n < 0)
      SPILLWAY_FAIL("GDS read failed (" + std::to_string(n) + "): " + range(path, offset, bytes),
                    io_error);
    if (n == 0)
      SPILLWAY_FAIL("short read (the file ends first): " + range(path, offset, bytes), io_error);
    done += static_cast<std::size_t>(n);
  }
  return true;
}

bool CuFile::write(const std::string& path, const void* src, std::size_t bytes,
                   std::uint64_t offset) const {
  const Registered f(*api_, path, O_WRONLY | O_CREAT);
  if (!f.ok()) return false;
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t n = api_->write(f.handle(), src, bytes - done, static_cast<off_t>(offset + done),
                                  static_cast<off_t>(done));
    if (n <= 0)
      SPILLWAY_FAIL("GDS write failed (" + std::to_string(n) + "): " + range(path, offset, bytes),
                    io_error);
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace spillway::io::detail
