#pragma once
/// @file error.hpp
/// The exception hierarchy of spillway and the check macros that throw it.

#include <memory>
#include <new>
#include <stdexcept>
#include <string>

namespace spillway {

/// A broken precondition or a misuse of the API (bad argument, bad flag, missing feature).
class logic_error : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// A CUDA runtime call failed; the message names the call and the CUDA error string.
class cuda_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A limit could not be met even after spilling; the message gives used/limit per tier. A
/// std::bad_alloc (as RMM's out_of_memory), so that code catching allocation failures sees it.
class out_of_memory : public std::bad_alloc {
 public:
  explicit out_of_memory(const std::string& what)
      : what_{std::make_shared<const std::string>(what)} {}
  explicit out_of_memory(const char* what) : out_of_memory(std::string(what)) {}
  [[nodiscard]] const char* what() const noexcept override { return what_->c_str(); }

 private:
  std::shared_ptr<const std::string> what_;  // shared: copying the exception cannot throw
};

/// A file operation failed, or spilled data came back different (checksum mismatch).
/// The message names the file, offset and size.
class io_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bytes that should describe data do not (corrupt or truncated packed metadata, inconsistent
/// lengths or offsets): they came from another process or a file, not from a bug here.
class corrupt_data_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A communication failure (a peer died, timed out or sent malformed bytes).
class comm_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
/// Builds "spillway: <msg> (file:line)"; kept out of line so the macros stay small.
std::string format_error(const char* file, int line, const std::string& msg);
/// The message of the current errno, thread-safe.
std::string errno_string(int err);
}  // namespace detail

}  // namespace spillway

/// Throws `ExceptionT` (default spillway::logic_error) with file:line when `cond` is false.
/// The message expression is evaluated only on failure.
#define SPILLWAY_EXPECTS(cond, msg, ...)             \
  do {                                               \
    if (!(cond)) [[unlikely]] {                      \
      SPILLWAY_FAIL(msg __VA_OPT__(, ) __VA_ARGS__); \
    }                                                \
  } while (0)

#define SPILLWAY_FAIL_1(msg) \
  throw ::spillway::logic_error(::spillway::detail::format_error(__FILE__, __LINE__, (msg)))
#define SPILLWAY_FAIL_2(msg, ExceptionT) \
  throw ExceptionT(::spillway::detail::format_error(__FILE__, __LINE__, (msg)))
#define SPILLWAY_FAIL_PICK(_1, _2, NAME, ...) NAME
/// Throws unconditionally: SPILLWAY_FAIL(msg) or SPILLWAY_FAIL(msg, spillway::io_error).
#define SPILLWAY_FAIL(...) \
  SPILLWAY_FAIL_PICK(__VA_ARGS__, SPILLWAY_FAIL_2, SPILLWAY_FAIL_1, unused)(__VA_ARGS__)
