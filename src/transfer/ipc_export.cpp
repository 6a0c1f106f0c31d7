// The cuda_ipc backend's exports: this node's name and the blobs of its regions.

#include "transfer/detail/ipc_export.hpp"

#include "core/detail/byte_codec.hpp"

#include <unistd.h>

#include <cstring>
#include <fstream>

namespace spillway::transfer::detail {

using spillway::detail::ByteReader;
using spillway::detail::ByteWriter;

std::string this_node() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return std::string(host) + "/" + id;
}

std::vector<std::uint8_t> to_blob(const Exported& e) {
  ByteWriter w;
  w.put_bytes(std::span(reinterpret_cast<const std::uint8_t*>(e.handle.data()), e.handle.size()));
  w.put(e.offset);
  w.put(e.base);
  return w.take();
}

Exported from_blob(std::span<const std::uint8_t> blob, const char* what) {
  ByteReader r(blob, std::string("cuda_ipc: ") + what + ": ");
  if (blob.size() != kBlob) {
    r.fail("a device region's blob of " + std::to_string(blob.size()) + " bytes (" +
           std::to_string(kBlob) + " expected)");
  }
  Exported e;
  const auto h = r.bytes(e.handle.size(), "IPC handle");
  std::memcpy(e.handle.data(), h.data(), h.size());
  e.offset = r.get<std::uint64_t>("offset");
  e.base = r.get<std::uint64_t>("base");
  return e;
}

std::vector<std::uint8_t> to_blob(const SharedExport& e) {
  ByteWriter w;
  for (const std::uint64_t v :
       {e.fd, e.inode, e.file_bytes, e.base, e.region_offset, e.region_bytes}) {
    w.put(v);
  }
  return w.take();
}

SharedExport shared_from_blob(std::span<const std::uint8_t> blob) {
  ByteReader r(blob, "cuda_ipc: the remote shared host region: ");
  if (blob.size() != kSharedBlob) {
    r.fail("a blob of " + std::to_string(blob.size()) + " bytes (" + std::to_string(kSharedBlob) +
           " expected)");
  }
  SharedExport e;
  e.fd = r.get<std::uint64_t>("fd");
  e.inode = r.get<std::uint64_t>("inode");
  e.file_bytes = r.get<std::uint64_t>("file size");
  e.base = r.get<std::uint64_t>("base");
  e.region_offset = r.get<std::uint64_t>("region offset");
  e.region_bytes = r.get<std::uint64_t>("region size");
  if (e.fd > 1u << 30 || e.region_offset > e.file_bytes ||
      e.region_bytes > e.file_bytes - e.region_offset) {
    r.fail("a region of " + std::to_string(e.region_bytes) + " bytes at " +
           std::to_string(e.region_offset) + " in a file of " + std::to_string(e.file_bytes) +
           " (fd " + std::to_string(e.fd) + ")");
  }
  return e;
}

}  // namespace spillway::transfer::detail
