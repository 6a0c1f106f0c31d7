#pragma once
/// @file network.hpp
/// A streaming pipeline on one rank: actors connected by channels, run together on a small
/// executor under the rank's one buffer resource. Every rank runs the same network on its part
/// of the data (SPMD); the collective actors talk through the communicator.

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/streaming/actor.hpp>
#include <spillway/streaming/actor_stats.hpp>
#include <spillway/streaming/channel.hpp>
#include <spillway/streaming/context.hpp>
#include <spillway/streaming/executor.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace spillway {
class Communicator;
}

namespace spillway::streaming {

/// What an actor does: a coroutine over its context (see actors.hpp for the common ones).
using ActorBody = std::function<Actor(Context&)>;

struct NetworkOptions {
  /// Threads that resume actors; 0: the machine's cores, at most 4 (actors that compute much
  /// do it on the GPU or in blocking calls, whose threads are apart).
  std::size_t threads{0};
  /// The bounds of channels made without their own.
  ChannelOptions channel{};
};

/// What a run did: each actor's counters, in the order the actors were added.
struct NetworkReport {
  struct Entry {
    std::string name;
    ActorStats stats;
  };
  std::vector<Entry> actors;
  std::chrono::steady_clock::duration wall{};

  /// A table a person can read: per actor, when it started and ended, and how long it waited
  /// for input, for room in its outputs and for memory, with what went in and out.
  [[nodiscard]] std::string timeline() const;
};

/// Build with channel() and add(), then run() once. Every channel must have at least one
/// producer and exactly one consumer.
///
/// Errors: the first actor that throws stops the network: every channel is cancelled, so every
/// waiting actor ends (with streaming::cancelled, which is not reported), blocking calls see
/// Context::stopped(), and run() throws that first error once all have ended. The collective
/// actors of the other ranks then fail on the communicator within its timeout (a peer that
/// stopped sending), and their networks stop the same way. A network in which every actor
/// waits on a channel and nothing runs (a cycle, say) is stopped with a logic_error naming the
/// waiting actors, not left to hang.
class Network {
 public:
  /// @param comm the rank's communicator, for collective actors; may be nullptr
  explicit Network(BufferResource& br, Communicator* comm = nullptr, NetworkOptions options = {});
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  /// A new channel (owned by the network), with the network's bounds or `options`.
  Channel& channel(std::string name);
  Channel& channel(std::string name, ChannelOptions options);
  /// Adds an actor reading `inputs` and writing `outputs`; `body` is called by run().
  /// @throws spillway::logic_error for a channel of another network, or one twice in a list
  void add(std::string name, std::vector<Channel*> inputs, std::vector<Channel*> outputs,
           ActorBody body);

  /// Runs every actor until all have ended; returns their counters. Closes each actor's
  /// outputs when it ends, and shuts its inputs (a consumer that stops early releases its
  /// producers).
  /// @throws the first error of an actor; spillway::logic_error for a channel without a
  ///         producer or without exactly one consumer, for a second run, or for a deadlock
  NetworkReport run();

  /// The actors and the channels between them, one line per actor.
  [[nodiscard]] std::string plan() const;

 private:
  struct Node {
    std::string name;
    std::vector<Channel*> inputs;
    std::vector<Channel*> outputs;
    ActorBody body;
    std::unique_ptr<Context> ctx;
    Actor actor;
    bool ended{false};
  };

  void check_graph() const;
  void on_end(Node& n);
  /// Records `error` as the first unless one was, and cancels every channel.
  void stop(std::exception_ptr error);
  [[nodiscard]] std::string waiting_actors() const;

  BufferResource& br_;
  Communicator* comm_;
  NetworkOptions options_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::atomic<bool> stopped_{false};
  std::mutex mutex_;
  std::condition_variable ended_cv_;
  std::size_t running_{0};
  std::exception_ptr first_error_;
  bool ran_{false};
  std::chrono::steady_clock::time_point start_{};
  std::unique_ptr<Executor> executor_;  // last: its threads stop before the rest goes
};

}  // namespace spillway::streaming
