// libFuzzer target for spilled blocks coming back from disk: a block is written through the
// spill files (its pieces checksummed), then the input corrupts it on disk (bytes changed,
// the file cut short) or in its record (a piece's checksum), and the block is read back.
// A block must come back byte for byte as written, or the read must give spillway::io_error
// naming the file and offset: corrupted data is never returned. Never a crash or undefined
// behaviour.
// Input: the block size (1 B..64 KiB, 4 KiB pieces) | the block's bytes | corruptions
// (kind, where, value) until the input ends.
#include <spillway/core/error.hpp>
#include <spillway/memory/spill_files.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const std::size_t bytes = in.ConsumeIntegralInRange<std::size_t>(1, 1 << 16);
  std::vector<std::uint8_t> block = in.ConsumeBytes<std::uint8_t>(bytes);
  block.resize(bytes, 0x5a);
  static spillway::SpillFiles files(std::filesystem::temp_directory_path().string(), 1 << 20, 4096,
                                    1);
  spillway::DiskExtent e = files.allocate(bytes);
  files.write(e, 0, block.data(), bytes);
  while (in.remaining_bytes() >= 6) {
    const auto kind = in.ConsumeIntegralInRange<int>(0, 2);
    const auto where = in.ConsumeIntegral<std::uint32_t>();
    const auto value = in.ConsumeIntegral<std::uint8_t>();
    const std::size_t i = where % e.num_pieces();
    const auto [file, at] = e.locate(i);
    if (kind == 0) {  // a byte of piece i changed on disk
      const std::size_t len = std::min(e.piece_size, bytes - i * e.piece_size);
      const std::uint64_t pos = at + (where / e.num_pieces()) % len;
      if (::pwrite(file->fd(), &value, 1, static_cast<off_t>(pos)) != 1) std::abort();
    } else if (kind == 1) {  // the file cut short inside or before piece i
      const std::uint64_t cut = at + value % (e.piece_size + 1);
      if (::ftruncate(file->fd(), static_cast<off_t>(cut)) != 0) std::abort();
    } else {  // the record of piece i's checksum changed
      e.checksums[i] ^= std::uint64_t{value} << (where % 57);
    }
  }
  std::vector<std::uint8_t> back(bytes);
  try {
    files.read(e, 0, back.data(), bytes);
    if (back != block) std::abort();  // corrupted data returned as if it were intact
  } catch (const spillway::io_error&) {
  }
  files.release(e);
  return 0;
}
