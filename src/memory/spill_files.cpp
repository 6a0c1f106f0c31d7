#include <spillway/memory/spill_files.hpp>

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/units.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <set>

namespace spillway {

namespace {

constexpr std::size_t piece_alignment = 4096;

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

/// Under spillway-run (SPILLWAY_RUN_DIR, the launch's private directory), leaves a link to the
/// private spill directory `dir` there ("spill-<pid>-<name>"): the launcher removes the
/// directory once this process is gone, also when it was killed before it could.
void tell_launcher(const std::string& dir) noexcept {
  const char* run_dir = std::getenv("SPILLWAY_RUN_DIR");
  if (run_dir == nullptr || *run_dir == '\0') return;
  const std::string name = dir.substr(dir.rfind('/') + 1);  // spillway-<pid>-XXXXXX
  (void)::symlink(dir.c_str(), (std::string(run_dir) + "/spill-" + name).c_str());
}

std::uint64_t checksum(const void* p, std::size_t n) noexcept {
  return XXH3_64bits(p, n);
}

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
      piece_size_{round_up(piece_size, piece_alignment)},
      pool_{io_threads, io::io_cpus()} {
  SPILLWAY_EXPECTS(!parent_.empty(), "the spill directory must not be empty");
  // Killed processes (SIGKILL, MPI_Abort, a launcher's kill) leave their empty private
  // directories: every resource clears them at start-up, not only one that spills.
  remove_stale_directories(parent_);
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
  tell_launcher(dir_);
  SPILLWAY_LOG(info, "spill directory " << dir_);
}

std::pair<const io::FileHandle*, std::uint64_t> DiskExtent::locate(std::size_t i) const {
  const std::size_t nfiles = offsets.size();
  const std::size_t f = (first_file + i) % nfiles;
  return {&group->files[f], offsets[f] + (i / nfiles) * piece_size};
}

std::shared_ptr<detail::SpillFileGroup> SpillFiles::open_group() {
  ensure_directory();
  auto g = std::make_shared<detail::SpillFileGroup>();
  const std::size_t nfiles = pool_.size();
  for (std::size_t f = 0; f < nfiles; ++f) {
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
    g->files.emplace_back(fd, name + " (unnamed)");
  }
  g->append.assign(nfiles, 0);
  return g;
}

namespace {
/// How many of an extent's `pieces` pieces go to the file `j` places after its first file.
std::size_t pieces_in_file(std::size_t pieces, std::size_t j, std::size_t nfiles) {
  return pieces > j ? (pieces - j + nfiles - 1) / nfiles : 0;
}
/// The bytes an extent of `bytes` in pieces of `piece` takes in the file `j` places after its
/// first: whole pieces, but the extent's last piece (the last in its file) only in whole
/// blocks, so that a small extent takes a block, not a piece.
std::size_t space_in_file(std::size_t bytes, std::size_t piece, std::size_t j, std::size_t nfiles) {
  const std::size_t count = pieces_in_file(npieces(bytes, piece), j, nfiles);
  if (count == 0) return 0;
  const std::size_t last = j + (count - 1) * nfiles;  // the piece index of the file's last one
  return (count - 1) * piece + round_up(std::min(piece, bytes - last * piece), piece_alignment);
}
}  // namespace

std::size_t SpillFiles::footprint(std::size_t bytes) noexcept {
  return round_up(bytes, piece_alignment);
}

DiskExtent SpillFiles::allocate(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  const std::size_t pieces = npieces(bytes, piece_size_);
  const std::size_t nfiles = pool_.size();
  const std::size_t per_file = space_in_file(bytes, piece_size_, 0, nfiles);
  const std::uint64_t high =
      current_ ? *std::max_element(current_->append.begin(), current_->append.end()) : 0;
  if (!current_ || (high > 0 && high + per_file > file_size_)) current_ = open_group();
  DiskExtent e;
  e.group = current_;
  e.first_file = next_first_file_++ % nfiles;
  e.offsets.assign(nfiles, 0);
  for (std::size_t j = 0; j < nfiles; ++j) {
    const std::size_t f = (e.first_file + j) % nfiles;
    e.offsets[f] = current_->append[f];
    current_->append[f] += space_in_file(bytes, piece_size_, j, nfiles);
  }
  e.size = bytes;
  e.piece_size = piece_size_;
  e.checksums.assign(pieces, 0);
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
    const auto [file, at] = e.locate(first + i);
    file->pwrite(p, n, at);
  });
}

void SpillFiles::read(const DiskExtent& e, std::size_t pos, void* dst, std::size_t len) {
  check_range(e, pos, len);
  const std::size_t first = pos / e.piece_size;
  pool_.parallel_for(npieces(len, e.piece_size), [&](std::size_t i) {
    const std::size_t off = i * e.piece_size;
    const std::size_t n = std::min(e.piece_size, len - off);
    auto* p = static_cast<std::byte*>(dst) + off;
    const auto [file, at] = e.locate(first + i);
    file->pread(p, n, at);
    if (checksum(p, n) != e.checksums[first + i]) {
      SPILLWAY_FAIL("checksum mismatch reading spilled data from '" + file->name() + "' (offset " +
                        std::to_string(at) + ", size " + std::to_string(n) +
                        "): the spill file was corrupted",
                    io_error);
    }
  });
}

void SpillFiles::release(DiskExtent& e) noexcept {
  if (!e.group) return;
  const std::size_t nfiles = e.offsets.size();
  for (std::size_t j = 0; j < nfiles; ++j) {
    const std::size_t f = (e.first_file + j) % nfiles;
    e.group->files[f].punch_hole(e.offsets[f], space_in_file(e.size, e.piece_size, j, nfiles));
  }
  {
    std::lock_guard lock(mutex_);
    if (--e.group->live_extents == 0 && e.group == current_) {
      // Reuse the empty files from their start.
      try {
        for (auto& f : current_->files) f.truncate(0);
        std::fill(current_->append.begin(), current_->append.end(), 0);
      } catch (...) {
        current_.reset();
      }
    }
  }
  e.group.reset();  // the last extent of an old group closes its files, freeing their space
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
