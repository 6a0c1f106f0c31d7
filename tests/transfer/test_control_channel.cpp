// The transfer engine's control channel (internal): frames written by send_frame come out of
// FrameReader whole and in order, a whole frame is handed over before what was sent behind it
// has been read, and bytes that are not a frame are refused.
#include <spillway/core/error.hpp>

#include "transfer/detail/control_channel.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace spillway::transfer::detail {
namespace {

using namespace std::chrono_literals;

/// A connected pair of non-blocking stream sockets with room for `buffer` bytes in flight.
struct SocketPair {
  int fd[2]{-1, -1};
  explicit SocketPair(int buffer) {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0);
    for (const int f : fd) {
      ::setsockopt(f, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
      ::setsockopt(f, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
      ::fcntl(f, F_SETFL, ::fcntl(f, F_GETFL) | O_NONBLOCK);
    }
  }
  ~SocketPair() {
    for (const int f : fd) {
      if (f >= 0) ::close(f);
    }
  }
  SocketPair(const SocketPair&) = delete;
  SocketPair& operator=(const SocketPair&) = delete;
};

std::vector<std::uint8_t> bytes(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + i * 7);
  return v;
}

int unread(int fd) {
  int n = 0;
  EXPECT_EQ(::ioctl(fd, FIONREAD, &n), 0);
  return n;
}

TEST(ControlChannel, AWholeFrameIsHandedOverBeforeWhatFollowsIsRead) {
  SocketPair s(1 << 20);
  const auto first = bytes(100, 1);
  const auto second = bytes(150000, 2);  // several of the reader's 64 KiB reads
  ASSERT_TRUE(send_frame(s.fd[0], FrameType::backend, first, 5s));
  ASSERT_TRUE(send_frame(s.fd[0], FrameType::control, second, 5s));
  ASSERT_GT(unread(s.fd[1]), 150000);

  FrameReader reader;
  std::string why;
  ASSERT_TRUE(reader.fill(s.fd[1], why)) << why;
  // The first frame came whole with the first read; the rest of the second waits in the
  // socket (reading it all first held the first frame back behind it).
  EXPECT_GT(unread(s.fd[1]), 0);
  auto f = reader.next();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->type, FrameType::backend);
  EXPECT_EQ(f->body, first);
  EXPECT_FALSE(reader.next().has_value());

  // Whatever is left comes with later fills, whole and unchanged.
  std::optional<Frame> g;
  for (int i = 0; i < 100 && !g; ++i) {
    ASSERT_TRUE(reader.fill(s.fd[1], why)) << why;
    g = reader.next();
  }
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->type, FrameType::control);
  EXPECT_EQ(g->body, second);
  EXPECT_EQ(unread(s.fd[1]), 0);

  ::close(s.fd[0]);
  s.fd[0] = -1;
  EXPECT_FALSE(reader.fill(s.fd[1], why));
  EXPECT_EQ(why, "its connection closed");
}

TEST(ControlChannel, ManyFramesInOneReadAllComeOutInOrder) {
  SocketPair s(1 << 20);
  for (std::uint8_t i = 0; i < 50; ++i) {
    ASSERT_TRUE(send_frame(s.fd[0], FrameType::control, bytes(10 + i, i), 5s));
  }
  FrameReader reader;
  std::string why;
  int got = 0;
  while (got < 50) {
    ASSERT_TRUE(reader.fill(s.fd[1], why)) << why;
    while (auto f = reader.next()) {
      ASSERT_EQ(f->body, bytes(10 + got, static_cast<std::uint8_t>(got)));
      ++got;
    }
  }
  EXPECT_EQ(unread(s.fd[1]), 0);
}

TEST(ControlChannel, BytesThatAreNoFrameAreRefused) {
  for (const bool bad_type : {true, false}) {
    SocketPair s(1 << 16);
    // A header: the body's length, then its type.
    std::vector<std::uint8_t> header(5, 0);
    const std::uint32_t length = bad_type ? 4 : static_cast<std::uint32_t>(kMaxFrame + 1);
    std::memcpy(header.data(), &length, sizeof(length));
    header[4] = bad_type ? 9 : static_cast<std::uint8_t>(FrameType::control);
    ASSERT_EQ(::write(s.fd[0], header.data(), header.size()), 5);
    FrameReader reader;
    std::string why;
    ASSERT_TRUE(reader.fill(s.fd[1], why)) << why;
    try {
      (void)reader.next();
      ADD_FAILURE() << "a bad frame header was taken";
    } catch (const corrupt_data_error& e) {
      EXPECT_NE(std::string(e.what()).find(bad_type ? "unknown type" : "bytes (at most"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace spillway::transfer::detail
