#pragma once
// The control channel between transfer engines: TCP connections carrying length-prefixed
// frames (hello, heartbeat, control message, backend message). It is also how an engine knows a
// peer is alive: a connection that closes, errs or stays silent past the timeout means the peer is
// gone (internal).

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace spillway::transfer::detail {

/// `backend`: a message between the backends of two engines (cuda_ipc's copy requests).
enum class FrameType : std::uint8_t { hello = 1, heartbeat = 2, control = 3, backend = 4 };

/// The largest frame body: a control message of 1 MiB plus room for the header.
inline constexpr std::size_t kMaxFrame = (std::size_t{1} << 20) + 64;

struct Frame {
  FrameType type{FrameType::heartbeat};
  std::vector<std::uint8_t> body;
};

/// A listening socket on `host` (an IPv4 address) and a port the kernel picks.
/// @throws spillway::comm_error
int listen_on(const std::string& host, std::string& bound);
/// A connection to "host:port" within `timeout`. @throws spillway::comm_error naming it
int connect_to(const std::string& address, std::chrono::milliseconds timeout);
/// Makes `fd` non-blocking, with TCP_NODELAY and close-on-exec.
void prepare(int fd);
/// Writes a whole frame within `timeout`; false when the connection failed or the time passed.
bool send_frame(int fd, FrameType type, std::span<const std::uint8_t> body,
                std::chrono::milliseconds timeout);

/// Ends connections so that what was sent on them arrives: each is shut for writing, then read
/// (what comes is dropped) until its peer closes it too or `timeout` passes. Closing a socket
/// that holds unread bytes resets the connection, and what was still in flight is lost.
void shut_down(std::span<const int> fds, std::chrono::milliseconds timeout);

/// Reassembles the frames of one connection from what arrives.
class FrameReader {
 public:
  /// Reads what the socket has, up to the end of the first whole frame (the socket may hold
  /// more: it stays readable). @returns false when the peer closed it or it failed; `why`
  /// says which
  bool fill(int fd, std::string& why);
  /// The next whole frame, if one has arrived. @throws spillway::corrupt_data_error for a
  /// frame of an unknown type or over kMaxFrame
  std::optional<Frame> next();

 private:
  [[nodiscard]] bool whole_frame() const;
  std::vector<std::uint8_t> buffer_;
  std::size_t start_{0};
};

}  // namespace spillway::transfer::detail
