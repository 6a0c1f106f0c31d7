#include <spillway/io/page_cache.hpp>

#include <spillway/core/error.hpp>
#include <spillway/io/file_handle.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace spillway::io {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  SPILLWAY_FAIL("" + what + " of '" + path + "' failed: " + std::strerror(err), io_error);
}

}  // namespace

double resident_fraction(const std::string& path) {
  FileHandle f(path, O_RDONLY);
  const std::size_t size = f.size();
  if (size == 0) return 1.0;
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, f.fd(), 0);
  if (map == MAP_FAILED) fail("mmap", path, errno);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec((size + page - 1) / page);
  const int rc = ::mincore(map, size, vec.data());
  const int err = errno;
  ::munmap(map, size);
  if (rc != 0) fail("mincore", path, err);
  std::size_t resident = 0;
  for (unsigned char v : vec) resident += v & 1U;
  return static_cast<double>(resident) / static_cast<double>(vec.size());
}

void drop_from_page_cache(const std::string& path) {
  FileHandle f(path, O_RDONLY);
  if (::fdatasync(f.fd()) != 0 && errno != EINVAL && errno != EROFS) fail("fdatasync", path, errno);
  if (const int rc = ::posix_fadvise(f.fd(), 0, 0, POSIX_FADV_DONTNEED); rc != 0) {
    fail("posix_fadvise(DONTNEED)", path, rc);
  }
}

}  // namespace spillway::io
