// libFuzzer target for the parsers of user-given values: byte sizes (parse_bytes), limits
// (Limit::parse: bytes, a percentage or "unlimited"), CPU lists (parse_cpu_list), the device
// allocator and log level names, and every SPILLWAY_* variable read through the options.
// A valid value must parse (a size of decimal digits and a unit must equal its exact value);
// an invalid one, or one whose value does not fit, must give spillway::logic_error naming the
// setting: never a crash, undefined behaviour, or a silently wrapped number.
// Input: u8 which parser | the text.
#include <spillway/core/error.hpp>
#include <spillway/core/limit.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/options.hpp>
#include <spillway/core/topology.hpp>
#include <spillway/core/units.hpp>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

/// The exact value of "<digits><unit>" (no spaces, no fraction, a unit parse_bytes knows),
/// or -1 when the text is not of that form; -2 when the value exceeds SIZE_MAX.
long double exact_bytes(std::string_view text) {
  std::size_t i = 0;
  unsigned __int128 v = 0;
  bool big = false;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0) {
    v = v * 10 + static_cast<unsigned>(text[i] - '0');
    if (v > (static_cast<unsigned __int128>(1) << 100)) big = true;
    ++i;
  }
  if (i == 0 || i > 40) return -1;
  std::string unit(text.substr(i));
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  unsigned __int128 mult = 0;
  if (unit.empty() || unit == "b")
    mult = 1;
  else if (unit == "k" || unit == "kib")
    mult = 1ULL << 10;
  else if (unit == "m" || unit == "mib")
    mult = 1ULL << 20;
  else if (unit == "g" || unit == "gib")
    mult = 1ULL << 30;
  else if (unit == "t" || unit == "tib")
    mult = 1ULL << 40;
  else
    return -1;
  if (big || v * mult > static_cast<unsigned __int128>(SIZE_MAX)) return -2;
  return static_cast<long double>(v * mult);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1 || size > 256) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    switch (data[0] % 6) {
      case 0: {
        const std::size_t v = spillway::parse_bytes(text);
        const long double want = exact_bytes(text);
        if (want == -2 || (want >= 0 && static_cast<long double>(v) != want)) std::abort();
        break;
      }
      case 1:
        (void)spillway::Limit::parse(text);
        break;
      case 2:
        (void)spillway::topology::parse_cpu_list(text);
        break;
      case 3:
        (void)spillway::parse_device_allocator(text);
        break;
      case 4:
        (void)spillway::parse_log_level(text);
        break;
      default: {
        // Every setting from the environment: the text is the value of the variable named by
        // its first byte's index among the settings.
        static const char* const names[] = {
            "SPILLWAY_DEVICE_LIMIT",    "SPILLWAY_PINNED_LIMIT",     "SPILLWAY_HOST_LIMIT",
            "SPILLWAY_DISK_LIMIT",      "SPILLWAY_DEVICE_ALLOCATOR", "SPILLWAY_DEVICE_POOL_SIZE",
            "SPILLWAY_PINNED_POOL",     "SPILLWAY_PINNED_RESERVE",   "SPILLWAY_HOST_CACHE",
            "SPILLWAY_IO_THREADS",      "SPILLWAY_SPILL_TASK_SIZE",  "SPILLWAY_IO_TASK_SIZE",
            "SPILLWAY_SPILL_FILE_SIZE", "SPILLWAY_SPILL_PERIOD_MS",  "SPILLWAY_SPILL_INJECT",
            "SPILLWAY_COMM_TIMEOUT",    "SPILLWAY_LOG_LEVEL",        "SPILLWAY_IO_DIRECT"};
        const char* name = names[static_cast<std::size_t>(data[0] / 6) % std::size(names)];
        if (text.find('\0') != std::string::npos) return 0;  // not an environment value
        ::setenv(name, text.c_str(), 1);
        try {
          spillway::options::reload_from_environment();
        } catch (const spillway::logic_error&) {
        }
        ::unsetenv(name);
        break;
      }
    }
  } catch (const spillway::logic_error&) {
  }
  return 0;
}
