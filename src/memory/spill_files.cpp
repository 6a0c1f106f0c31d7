#include <spillway/memory/spill_files.hpp>

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/units.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <dirent.h>
#include <exception>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace spillway {

namespace {

constexpr std::size_t extent_alignment = 4096;

/// Every private directory alive in this process, so that exit and std::terminate can remove
/// them even when a BufferResource was never destroyed.
class DirectoryRegistry {
 public:
  static DirectoryRegistry& instance() {
    // Leaked on purpose: it must still exist when atexit handlers and terminate run.
    static auto* r = new DirectoryRegistry();
    return *r;
  }
  void add(const std::string& dir) {
    std::lock_guard lock(mutex_);
    dirs_.insert(dir);
  }
  void remove(const std::string& dir) {
    std::lock_guard lock(mutex_);
    dirs_.erase(dir);
    ::rmdir(dir.c_str());
  }
  void remove_all() noexcept {
    // try_lock: terminate may run while another thread holds the lock.
    std::unique_lock lock(mutex_, std::try_to_lock);
    for (const auto& d : dirs_) ::rmdir(d.c_str());
  }

 private:
  DirectoryRegistry() {
    std::atexit([] { instance().remove_all(); });
    previous_terminate_ = std::set_terminate([] {
      instance().remove_all();
      if (previous_terminate_ != nullptr) previous_terminate_();
      std::abort();
    });
  }
  static inline std::terminate_handler previous_terminate_{nullptr};
  std::mutex mutex_;
  std::set<std::string> dirs_;
};

/// Removes empty "spillway-<pid>-*" directories of processes that no longer exist.
void remove_stale_directories(const std::string& parent) noexcept {
  DIR* d = ::opendir(parent.c_str());
  if (d == nullptr) return;
  const std::string prefix = "spillway-";
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    ::rmdir((parent + "/" + name).c_str());  // only succeeds when empty
  }
  ::closedir(d);
}

std::uint64_t checksum(const void* p, std::size_t n) noexcept { return XXH3_64bits(p, n); }

std::size_t npieces(std::size_t bytes, std::size_t piece) {
  return bytes == 0 ? 0 : (bytes + piece - 1) / piece;
}

void check_range(const DiskExtent& e, std::size_t pos, std::size_t len) {
  SPILLWAY_EXPECTS(pos + len <= e.size && pos % e.piece_size == 0 &&
                       (len % e.piece_size == 0 || pos + len == e.size),
                   "spill extent access [" + std::to_string(pos) + ", " +
                       std::to_string(pos + len) + ") is not piece-aligned within " +
                       std::to_string(e.size) + " bytes");
}

}  // namespace

SpillFiles::SpillFiles(std::string parent_dir, std::size_t file_size, std::size_t piece_size,
                       std::size_t io_threads)
    : parent_{std::move(parent_dir)},
      file_size_{file_size},
      piece_size_{round_up(piece_size, extent_alignment)},
      pool_{io_threads} {
  SPILLWAY_EXPECTS(!parent_.empty(), "the spill directory must not be empty");
}

SpillFiles::~SpillFiles() {
  std::lock_guard lock(mutex_);
  current_.reset();
  if (!dir_.empty()) DirectoryRegistry::instance().remove(dir_);
}

void SpillFiles::ensure_directory() {
  if (!dir_.empty()) return;
  struct stat st {};
  if (::stat(parent_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    SPILLWAY_FAIL("spill directory '" + parent_ + "' does not exist or is not a directory " +
                      "(set SPILLWAY_SPILL_DIR)",
                  io_error);
  }
  remove_stale_directories(parent_);
  std::string tmpl = parent_ + "/spillway-" + std::to_string(::getpid()) + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {  // mkdtemp makes it with mode 0700
    const int err = errno;
    SPILLWAY_FAIL("cannot create a private spill directory in '" + parent_ +
                      "': " + detail::errno_string(err),
                  io_error);
  }
  dir_ = tmpl;
  DirectoryRegistry::instance().add(dir_);
  SPILLWAY_LOG(info, "spill directory " << dir_);
}

std::shared_ptr<detail::SpillFile> SpillFiles::open_file() {
  ensure_directory();
  const std::string name = dir_ + "/spill-" + std::to_string(files_made_++);
  int fd = ::open(dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    // O_TMPFILE is not supported on every file system: create, then unlink at once.
    fd = ::open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
      const int err = errno;
      SPILLWAY_FAIL("cannot create spill file '" + name + "': " + detail::errno_string(err),
                    io_error);
    }
    ::unlink(name.c_str());
  }
  auto f = std::make_shared<detail::SpillFile>();
  f->handle = io::FileHandle(fd, name + " (unnamed)");
  return f;
}

DiskExtent SpillFiles::allocate(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (!current_ || (current_->append_offset > 0 && current_->append_offset + bytes > file_size_)) {
    current_ = open_file();
  }
  DiskExtent e;
  e.file = current_;
  e.offset = current_->append_offset;
  e.size = bytes;
  e.piece_size = piece_size_;
  e.checksums.assign(npieces(bytes, piece_size_), 0);
  current_->append_offset += round_up(std::max<std::size_t>(bytes, 1), extent_alignment);
  current_->live_extents += 1;
  return e;
}

void SpillFiles::write(DiskExtent& e, std::size_t pos, const void* src, std::size_t len) {
  check_range(e, pos, len);
  const std::size_t first = pos / e.piece_size;
  pool_.parallel_for(npieces(len, e.piece_size), [&](std::size_t i) {
    const std::size_t off = i * e.piece_size;
    const std::size_t n = std::min(e.piece_size, len - off);
    const auto* p = static_cast<const std::byte*>(src) + off;
    e.checksums[first + i] = checksum(p, n);
    e.file->handle.pwrite(p, n, e.offset + pos + off);
  });
}

void SpillFiles::read(const DiskExtent& e, std::size_t pos, void* dst, std::size_t len) {
  check_range(e, pos, len);
  const std::size_t first = pos / e.piece_size;
  pool_.parallel_for(npieces(len, e.piece_size), [&](std::size_t i) {
    const std::size_t off = i * e.piece_size;
    const std::size_t n = std::min(e.piece_size, len - off);
    auto* p = static_cast<std::byte*>(dst) + off;
    e.file->handle.pread(p, n, e.offset + pos + off);
    if (checksum(p, n) != e.checksums[first + i]) {
      SPILLWAY_FAIL("checksum mismatch reading spilled data from '" + e.file->handle.name() +
                        "' (offset " + std::to_string(e.offset + pos + off) + ", size " +
                        std::to_string(n) + "): the spill file was corrupted",
                    io_error);
    }
  });
}

void SpillFiles::release(DiskExtent& e) noexcept {
  if (!e.file) return;
  e.file->handle.punch_hole(e.offset, round_up(std::max<std::size_t>(e.size, 1), extent_alignment));
  {
    std::lock_guard lock(mutex_);
    if (--e.file->live_extents == 0 && e.file == current_) {
      // Reuse the empty file from its start.
      try {
        current_->handle.truncate(0);
        current_->append_offset = 0;
      } catch (...) {
        current_.reset();
      }
    }
  }
  e.file.reset();  // the last extent of an old file closes it, which frees its space
  e.checksums.clear();
}

std::string SpillFiles::directory() const {
  std::lock_guard lock(mutex_);
  return dir_;
}

std::size_t SpillFiles::free_space() const {
  struct statvfs vfs {};
  if (::statvfs(parent_.c_str(), &vfs) != 0) return 0;
  return static_cast<std::size_t>(vfs.f_bavail) * vfs.f_frsize;
}

}  // namespace spillway
