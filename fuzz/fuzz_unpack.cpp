// libFuzzer target for unpack(), the trust boundary of packed data: bytes from another process
// must give a table whose every view lies in the payload, or spillway::corrupt_data_error.
// Input: u32 metadata length | metadata | payload.
#include <spillway/core/error.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/checksum.hpp>

#include <spillway/table/pack.hpp>
#include "fuzz_common.hpp"

#include <cstdint>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  std::uint32_t meta_len = 0;
  std::memcpy(&meta_len, data, 4);
  if (meta_len > size - 4) return 0;
  auto& br = spillway::fuzz::resource();
  spillway::PackedData p;
  p.metadata.assign(data + 4, data + 4 + meta_len);
  const std::size_t payload = size - 4 - meta_len;
  p.payload = br.allocate(spillway::MemoryType::HOST, payload);
  if (payload > 0) std::memcpy(p.payload->data(), data + 4 + meta_len, payload);
  try {
    auto u = spillway::unpack(std::move(p));
    // Touch every byte the views describe (ASan reports any read outside the payload).
    (void)spillway::checksum(u.view(), 1);
  } catch (const spillway::corrupt_data_error&) {
  }
  return 0;
}
