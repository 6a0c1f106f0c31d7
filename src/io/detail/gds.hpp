#pragma once
// GPUDirect Storage through cuFile, loaded at run time (internal): no build-time dependency,
// and a machine without libcufile simply uses the bounce-buffer path.

#include <spillway/core/options.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace spillway::io::detail {

/// libcufile's driver, opened once per process.
class CuFile {
 public:
  /// The driver when `mode` allows it here (see OptionValues::io_gds), else nullptr.
  static CuFile* get(IoGds mode);
  /// Reads exactly `bytes` at `offset` of `path` into device memory `dst` (the current GPU).
  /// Returns false, having read nothing, when cuFile will not take the file (no GDS support
  /// and no compatibility mode here: the first such refusal turns GDS off for the process).
  /// @throws spillway::io_error naming file, offset and size
  bool read(const std::string& path, void* dst, std::size_t bytes, std::uint64_t offset) const;
  /// Writes `bytes` of device memory `src` to `path` at `offset` (creating the file); false as
  /// for read.
  bool write(const std::string& path, const void* src, std::size_t bytes,
             std::uint64_t offset) const;

  struct Api;  // the loaded entry points

 private:
  explicit CuFile(const Api* api) : api_{api} {}
  const Api* api_;
};

}  // namespace spillway::io::detail
