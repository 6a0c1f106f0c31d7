// The control channel's sockets and frames.

#include "transfer/detail/control_channel.hpp"

#include <spillway/core/error.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace spillway::transfer::detail {
namespace {

constexpr std::size_t kHeader = sizeof(std::uint32_t) + sizeof(std::uint8_t);

sockaddr_in parse_ipv4(const std::string& host, std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  SPILLWAY_EXPECTS(inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1,
                   "transfer engine: '" + host + "' is not an IPv4 address");
  return addr;
}

[[noreturn]] void fail_errno(const std::string& what) {
  SPILLWAY_FAIL("transfer engine: " + what + ": " + spillway::detail::errno_string(errno),
                comm_error);
}

}  // namespace

void prepare(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int listen_on(const std::string& host, std::string& bound) {
  sockaddr_in addr = parse_ipv4(host, 0);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail_errno("socket");
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 128) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    fail_errno("cannot listen on " + host);
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  prepare(fd);
  bound = host + ":" + std::to_string(ntohs(addr.sin_port));
  return fd;
}

int connect_to(const std::string& address, std::chrono::milliseconds timeout) {
  const auto colon = address.rfind(':');
  SPILLWAY_EXPECTS(colon != std::string::npos,
                   "transfer engine: '" + address + "' is not host:port", corrupt_data_error);
  const std::string host = address.substr(0, colon);
  int port = 0;
  try {
    port = std::stoi(address.substr(colon + 1));
  } catch (const std::exception&) {
    port = -1;
  }
  SPILLWAY_EXPECTS(port > 0 && port < 65536, "transfer engine: bad port in '" + address + "'",
                   corrupt_data_error);
  sockaddr_in addr = parse_ipv4(host, static_cast<std::uint16_t>(port));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail_errno("socket");
  prepare(fd);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) {
      const int err = errno;
      ::close(fd);
      errno = err;
      fail_errno("cannot connect to peer at " + address);
    }
    pollfd p{fd, POLLOUT, 0};
    const int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    int err = 0;
    socklen_t len = sizeof(err);
    if (n == 1) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (n != 1 || err != 0) {
      ::close(fd);
      errno = n == 1 ? err : ETIMEDOUT;
      fail_errno("cannot connect to peer at " + address);
    }
  }
  return fd;
}

bool send_frame(int fd, FrameType type, std::span<const std::uint8_t> body,
                std::chrono::milliseconds timeout) {
  std::uint8_t header[kHeader];
  const auto length = static_cast<std::uint32_t>(body.size());
  std::memcpy(header, &length, sizeof(length));
  header[sizeof(length)] = static_cast<std::uint8_t>(type);
  const auto until = std::chrono::steady_clock::now() + timeout;
  // Header and body in one call: a frame is one segment on the wire, not two (each send on
  // a loopback connection runs the receiver's TCP path in this thread).
  iovec parts[2] = {{header, kHeader}, {const_cast<std::uint8_t*>(body.data()), body.size()}};
  std::size_t first = 0;
  while (first < 2) {
    msghdr m{};
    m.msg_iov = parts + first;
    m.msg_iovlen = 2 - first;
    const ssize_t n = ::sendmsg(fd, &m, MSG_NOSIGNAL);
    if (n >= 0) {
      auto sent = static_cast<std::size_t>(n);
      for (; first < 2 && sent >= parts[first].iov_len; ++first) sent -= parts[first].iov_len;
      if (first < 2) {
        parts[first].iov_base = static_cast<std::uint8_t*>(parts[first].iov_base) + sent;
        parts[first].iov_len -= sent;
      }
      if (n > 0) continue;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return false;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, static_cast<int>(left.count()));
  }
  return true;
}

void shut_down(std::span<const int> fds, std::chrono::milliseconds timeout) {
  std::vector<pollfd> open;
  for (const int fd : fds) {
    if (::shutdown(fd, SHUT_WR) == 0) open.push_back({fd, POLLIN, 0});
  }
  const auto until = std::chrono::steady_clock::now() + timeout;
  std::uint8_t sink[4096];
  while (!open.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0 ||
        ::poll(open.data(), open.size(), static_cast<int>(left.count())) <= 0) {
      return;
    }
    std::erase_if(open, [&](const pollfd& p) {
      if (p.revents == 0) return false;
      for (;;) {
        const ssize_t n = ::recv(p.fd, sink, sizeof(sink), 0);
        if (n > 0) continue;
        return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
      }
    });
  }
}

bool FrameReader::whole_frame() const {
  if (buffer_.size() - start_ < kHeader) return false;
  std::uint32_t length = 0;
  std::memcpy(&length, buffer_.data() + start_, sizeof(length));
  return buffer_.size() - start_ >= kHeader + std::size_t{length};
}

bool FrameReader::fill(int fd, std::string& why) {
  for (;;) {
    // A whole frame is handled before what was sent behind it is read: reading to EAGAIN
    // first held a batch's first request back until its last had arrived.
    if (whole_frame()) return true;
    if (start_ > 0 && start_ == buffer_.size()) {
      buffer_.clear();
      start_ = 0;
    }
    const std::size_t at = buffer_.size();
    buffer_.resize(at + 65536);
    const ssize_t n = ::recv(fd, buffer_.data() + at, 65536, 0);
    buffer_.resize(at + static_cast<std::size_t>(n > 0 ? n : 0));
    if (n > 0) continue;
    if (n == 0) {
      why = "its connection closed";
      return false;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    if (errno == EINTR) continue;
    why = "its connection failed: " + spillway::detail::errno_string(errno);
    return false;
  }
}

std::optional<Frame> FrameReader::next() {
  if (buffer_.size() - start_ < kHeader) return std::nullopt;
  std::uint32_t length = 0;
  std::memcpy(&length, buffer_.data() + start_, sizeof(length));
  const auto type = buffer_[start_ + sizeof(length)];
  SPILLWAY_EXPECTS(type >= 1 && type <= 4,
                   "transfer engine: control frame of unknown type " + std::to_string(type),
                   corrupt_data_error);
  SPILLWAY_EXPECTS(length <= kMaxFrame,
                   "transfer engine: control frame of " + std::to_string(length) +
                       " bytes (at most " + std::to_string(kMaxFrame) + ")",
                   corrupt_data_error);
  if (buffer_.size() - start_ < kHeader + length) return std::nullopt;
  Frame f;
  f.type = static_cast<FrameType>(type);
  const auto* body = buffer_.data() + start_ + kHeader;
  f.body.assign(body, body + length);
  start_ += kHeader + length;
  if (start_ > (1u << 20) && start_ * 2 > buffer_.size()) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(start_));
    start_ = 0;
  }
  return f;
}

}  // namespace spillway::transfer::detail
