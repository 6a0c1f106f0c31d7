// The transfer engine's worker: it posts what was submitted, drives the backend, ends what
// passed its deadline, keeps the control connections (hellos, heartbeats, messages) and finds
// peers that died or fell silent.

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/topology.hpp>

#include "transfer/detail/engine_impl.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

namespace spillway::transfer {

using detail::Peer;

detail::Connection::~Connection() {
  if (fd >= 0) ::close(fd);
}

namespace {
constexpr auto kSendTimeout = std::chrono::milliseconds(200);  // a heartbeat's
constexpr auto kSpinAfterActivity = std::chrono::milliseconds(20);
}  // namespace

void TransferEngine::Impl::run() {
  if (options.device >= 0) {
    const auto cpus = topology::cpus_near_gpu(options.device);
    if (!cpus.empty()) topology::bind_this_thread(cpus);
  }
  while (!stopping.load()) {
    try {
      post_submitted();
      // The backend lock is only tried here and below: a user thread may hold it a while
      // (registering memory waits for a busy libfabric lane), and the worker must go on
      // reading heartbeats and keeping deadlines meanwhile.
      bool busy = false;
      if (std::unique_lock lock(backend_mutex, std::try_to_lock); lock.owns_lock()) {
        for (auto& b : backends) busy = b->progress() || busy;
      }
      if (busy) last_activity = Clock::now();
      check_deadlines();
      tend_peers();
      poll_sockets(busy);
    } catch (const std::exception& e) {
      // A backend failure ends what is in flight rather than the process.
      SPILLWAY_LOG(error, std::string("transfer: worker: ") + e.what());
      std::lock_guard lock(mutex);
      for (auto& op : ops) op->ticket->finish(Status::error, e.what());
    }
  }
}

void TransferEngine::Impl::post_submitted() {
  std::deque<std::shared_ptr<detail::Op>> batch;
  {
    std::lock_guard lock(mutex);
    batch.swap(submitted);
  }
  if (batch.empty()) return;
  std::unique_lock backend_lock(backend_mutex, std::try_to_lock);
  if (!backend_lock.owns_lock()) {  // posted on a later pass, before what came since
    std::lock_guard lock(mutex);
    submitted.insert(submitted.begin(), batch.begin(), batch.end());
    return;
  }
  for (auto& op : batch) post(op);
  backend_lock.unlock();
  std::lock_guard lock(mutex);
  unposted -= batch.size();
}

void TransferEngine::Impl::check_deadlines() {
  const auto now = Clock::now();
  std::lock_guard lock(mutex);
  for (auto& op : ops) {
    if (!op->ticket->ended() && op->deadline.passed(now)) {
      op->ticket->finish(Status::timed_out, "the batch of " + std::to_string(op->chunks.size()) +
                                                " chunks to peer " + std::to_string(op->peer) +
                                                " passed its deadline with " +
                                                std::to_string(op->completed.load()) + " done");
    }
  }
  std::erase_if(ops, [](const auto& op) { return op->ticket->ended(); });
  for (auto& [imm, list] : expecting) {
    for (auto& e : list) {
      if (!e.ticket->ended() && e.deadline.passed(now)) {
        e.ticket->finish(Status::timed_out,
                         "imm " + std::to_string(imm) + ": " + std::to_string(arrived[imm]) +
                             " of " + std::to_string(e.count) + " arrived by the deadline");
      }
    }
  }
}

void TransferEngine::Impl::tend_peers() {
  const auto now = Clock::now();
  const bool heartbeat = now >= next_heartbeat;
  if (heartbeat) next_heartbeat = now + options.heartbeat_interval;
  std::vector<std::shared_ptr<Peer>> all;
  {
    std::lock_guard lock(mutex);
    for (auto& [id, peer] : peers) all.push_back(peer);
  }
  for (auto& peer : all) {
    bool alive = false;
    {
      std::lock_guard lock(mutex);
      alive = peer->alive;
    }
    if (!alive) {  // close what a failed or removed peer left (on a later pass if busy)
      std::unique_lock backend_lock(backend_mutex, std::try_to_lock);
      if (!backend_lock.owns_lock()) continue;
      {
        std::lock_guard send_lock(peer->send_mutex);
        std::lock_guard lock(mutex);
        peer->connections.clear();
        peers.erase(peer->id);
      }
      for (std::size_t i = 0; i < backends.size(); ++i) {
        if (peer->backend_peers[i]) backends[i]->remove_peer(*peer->backend_peers[i]);
      }
      continue;
    }
    if (now - peer->last_heard > options.peer_timeout) {
      fail_peer(peer, "sent nothing for " +
                          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                             now - peer->last_heard)
                                             .count()) +
                          " ms (peer timeout " + std::to_string(options.peer_timeout.count()) +
                          " ms)");
      continue;
    }
    if (heartbeat) {
      std::vector<detail::Connection*> failed;
      {
        std::lock_guard send_lock(peer->send_mutex);
        std::vector<detail::Connection*> connections;
        {
          std::lock_guard lock(mutex);
          for (auto& c : peer->connections) connections.push_back(c.get());
        }
        for (auto* c : connections) {
          if (!detail::send_frame(c->fd, detail::FrameType::heartbeat, {}, kSendTimeout)) {
            failed.push_back(c);
          }
        }
      }
      // A peer that ended resets the connection; what it sent before is still to be read.
      for (auto* c : failed) {
        std::string why;
        try {
          while (read_connection(peer, *c, why) > 0) {
          }
        } catch (const std::exception& e) {
          fail_peer(peer, std::string("sent a malformed control frame: ") + e.what());
          break;
        }
        close_connection(peer, *c, "did not take a heartbeat (its connection failed)");
      }
    }
  }
}

void TransferEngine::Impl::poll_sockets(bool busy) {
  struct Watched {
    std::shared_ptr<Peer> peer;  // null for the wake fd, the listener and pending connections
    detail::Connection* connection{nullptr};
  };
  std::vector<pollfd> fds;
  std::vector<Watched> watched;
  fds.push_back({wake_fd, POLLIN, 0});
  watched.push_back({});
  fds.push_back({listen_fd, POLLIN, 0});
  watched.push_back({});
  for (auto& c : pending) {
    fds.push_back({c->fd, POLLIN, 0});
    watched.push_back({nullptr, c.get()});
  }
  bool have_peers = false;
  {
    std::lock_guard lock(mutex);
    for (auto& [id, peer] : peers) {
      if (!peer->alive) continue;
      have_peers = true;
      for (auto& c : peer->connections) {
        fds.push_back({c->fd, POLLIN, 0});
        watched.push_back({peer, c.get()});
      }
    }
    // Operations of a backend with threads of its own (libfabric) are not the worker's to
    // spin for: it wakes for their deadlines, as for heartbeats.
    busy = busy || !submitted.empty() || std::any_of(ops.begin(), ops.end(), [&](const auto& op) {
             return !backends[op->backend]->self_driven();
           });
  }
  bool may_sleep = true;
  if (std::unique_lock lock(backend_mutex, std::try_to_lock); !lock.owns_lock()) {
    may_sleep = false;  // (polled again in a millisecond)
  } else {
    for (auto& b : backends) {
      const int backend_fd = b->wait_fd();
      if (backend_fd >= 0) {
        fds.push_back({backend_fd, POLLIN, 0});
        watched.push_back({});
      }
      may_sleep = b->may_sleep() && may_sleep;
    }
  }
  const auto now = Clock::now();
  const auto until_heartbeat =
      std::chrono::duration_cast<std::chrono::milliseconds>(next_heartbeat - now);
  int timeout = static_cast<int>(std::clamp<long long>(until_heartbeat.count(), 1, 50));
  if (busy) {
    timeout = 0;
  } else if (!may_sleep && have_peers) {
    // Without a wait fd the backend progresses only when polled, also for what peers write
    // into this engine: poll it without sleeping for a while after it last did something,
    // then every millisecond.
    timeout = now - last_activity < kSpinAfterActivity ? 0 : 1;
  }
  // Spinning with nothing to do, give way to runnable threads: on 2 cores the spinning target
  // of a polled backend kept a writer's threads off the CPU (one waited 64 KiB write took 4 ms
  // once the target spun).
  if (timeout == 0 && !busy) std::this_thread::yield();
  const int n = ::poll(fds.data(), fds.size(), timeout);
  if (n <= 0) return;
  if (fds[0].revents != 0) {
    std::uint64_t v = 0;
    [[maybe_unused]] const auto r = ::read(wake_fd, &v, sizeof(v));
  }
  if (fds[1].revents & POLLIN) accept_waiting();
  bool pending_ready = false;
  for (std::size_t i = 2; i < fds.size(); ++i) {
    if (fds[i].revents == 0 || watched[i].connection == nullptr) continue;
    if (!watched[i].peer) {
      pending_ready = true;
      continue;
    }
    const auto& peer = watched[i].peer;
    std::string why;
    long frames = 0;
    try {
      frames = read_connection(peer, *watched[i].connection, why);
    } catch (const std::exception& e) {
      fail_peer(peer, std::string("sent a malformed control frame: ") + e.what());
      continue;
    }
    if (frames < 0) close_connection(peer, *watched[i].connection, why);
  }
  if (pending_ready) accept_pending();
}

long TransferEngine::Impl::read_connection(const std::shared_ptr<Peer>& peer, detail::Connection& c,
                                           std::string& why) {
  const bool open = c.reader.fill(c.fd, why);
  peer->last_heard = Clock::now();
  long frames = 0;
  while (auto frame = c.reader.next()) {
    on_frame(peer, std::move(*frame));
    ++frames;
  }
  return open ? frames : -1;
}

std::size_t TransferEngine::Impl::drop_connection(Peer& peer, const detail::Connection& c) {
  std::lock_guard send_lock(peer.send_mutex);  // no send is on it
  std::lock_guard lock(mutex);
  std::erase_if(peer.connections, [&](const auto& p) { return p.get() == &c; });
  return peer.connections.size();
}

void TransferEngine::Impl::close_connection(const std::shared_ptr<Peer>& peer,
                                            const detail::Connection& c, const std::string& why) {
  if (drop_connection(*peer, c) > 0) return;
  // A connection the peer opened before it ended may still wait to be taken, with what the
  // peer sent on it.
  accept_waiting();
  accept_pending();
  bool none = false;
  {
    std::lock_guard lock(mutex);
    none = peer->connections.empty();
  }
  if (none) fail_peer(peer, why);
}

void TransferEngine::Impl::accept_waiting() {
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    detail::prepare(fd);
    auto c = std::make_unique<detail::Connection>();
    c->fd = fd;
    pending.push_back(std::move(c));
  }
}

void TransferEngine::Impl::on_frame(const std::shared_ptr<Peer>& peer, detail::Frame&& frame) {
  if (frame.type == detail::FrameType::backend) {  // u8 name length, the name, the body
    const std::span<const std::uint8_t> body(frame.body);
    SPILLWAY_EXPECTS(
        !body.empty() && body.size() > body[0],
        "a backend frame of " + std::to_string(body.size()) + " bytes names no backend",
        corrupt_data_error);
    const std::string name(body.begin() + 1, body.begin() + 1 + body[0]);
    const std::size_t i = backend_named(name);
    SPILLWAY_EXPECTS(i != npos && peer->backend_peers[i],
                     "a frame for backend '" + name + "', which this engine does not share with it",
                     corrupt_data_error);
    std::lock_guard lock(backend_mutex);
    backends[i]->on_message(*peer->backend_peers[i], body.subspan(1 + body[0]));
    return;
  }
  if (frame.type != detail::FrameType::control) return;  // heartbeats and repeated hellos
  {
    std::lock_guard lock(mutex);
    inbox.emplace_back(peer->id, std::move(frame.body));
  }
  inbox_ready.notify_all();
}

void TransferEngine::Impl::accept_pending() {
  for (auto it = pending.begin(); it != pending.end();) {
    std::string why;
    const bool open = (*it)->reader.fill((*it)->fd, why);
    std::optional<detail::EngineMetadata> metadata;
    try {
      if (auto hello = (*it)->reader.next()) {
        SPILLWAY_EXPECTS(hello->type == detail::FrameType::hello, "its first frame was no hello");
        metadata = detail::EngineMetadata::from_bytes(hello->body);
        SPILLWAY_EXPECTS(shares_a_backend(*metadata),
                         "a peer of backends " + metadata->backend_names() +
                             ", none of them this engine's (" + backend_names() + ")");
        SPILLWAY_EXPECTS(metadata->engine != id, "a hello with this engine's own identity");
      }
    } catch (const std::exception& e) {
      why = e.what();
      metadata.reset();
    }
    if (!metadata) {
      if (open && why.empty()) {
        ++it;  // the hello has not all arrived
        continue;
      }
      SPILLWAY_LOG(warn, "transfer: refused a connection: " + why);
      it = pending.erase(it);
      continue;
    }
    auto connection = std::move(*it);
    it = pending.erase(it);
    detail::Connection* c = connection.get();
    try {
      const PeerId peer_id = attach(*metadata, std::move(connection));
      std::shared_ptr<Peer> peer;
      {
        std::lock_guard lock(mutex);
        peer = peers.at(peer_id);
      }
      while (auto frame = c->reader.next()) on_frame(peer, std::move(*frame));
      if (!open && drop_connection(*peer, *c) == 0) fail_peer(peer, why);
    } catch (const std::exception& e) {
      SPILLWAY_LOG(warn, std::string("transfer: refused a peer: ") + e.what());
    }
  }
}

}  // namespace spillway::transfer
