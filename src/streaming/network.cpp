#include <spillway/core/error.hpp>
#include <spillway/streaming/network.hpp>

#include "core/detail/nvtx.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace spillway::streaming {

namespace {

using Clock = std::chrono::steady_clock;

std::size_t default_threads() {
  const std::size_t cores = std::max(1U, std::thread::hardware_concurrency());
  return std::min<std::size_t>(cores, 4);
}

std::string names(const std::vector<Channel*>& channels) {
  std::string s;
  for (const Channel* c : channels) s += (s.empty() ? "" : ", ") + c->name();
  return s.empty() ? "-" : s;
}

bool is_cancelled(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const cancelled&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

Network::Network(BufferResource& br, Communicator* comm, NetworkOptions options)
    : br_{br}, comm_{comm}, options_{options} {}

Network::~Network() = default;

Channel& Network::channel(std::string name) {
  return channel(std::move(name), options_.channel);
}

Channel& Network::channel(std::string name, ChannelOptions options) {
  channels_.push_back(std::make_unique<Channel>(std::move(name), br_, options));
  return *channels_.back();
}

void Network::add(std::string name, std::vector<Channel*> inputs, std::vector<Channel*> outputs,
                  ActorBody body) {
  if (!body) throw logic_error("streaming::Network: actor '" + name + "' has no body");
  auto check = [&](const std::vector<Channel*>& list, const char* what) {
    std::set<const Channel*> seen;
    for (const Channel* c : list) {
      const bool ours = std::any_of(channels_.begin(), channels_.end(),
                                    [&](const auto& owned) { return owned.get() == c; });
      if (!ours) {
        throw logic_error("streaming::Network: actor '" + name + "' has an " + what +
                          " that is not a channel of this network");
      }
      if (!seen.insert(c).second) {
        throw logic_error("streaming::Network: actor '" + name + "' has channel '" + c->name() +
                          "' twice among its " + what + "s");
      }
    }
  };
  check(inputs, "input");
  check(outputs, "output");
  auto node = std::make_unique<Node>();
  node->name = std::move(name);
  node->inputs = std::move(inputs);
  node->outputs = std::move(outputs);
  node->body = std::move(body);
  nodes_.push_back(std::move(node));
}

void Network::check_graph() const {
  for (const auto& c : channels_) {
    std::size_t producers = 0;
    std::size_t consumers = 0;
    for (const auto& n : nodes_) {
      producers +=
          static_cast<std::size_t>(std::count(n->outputs.begin(), n->outputs.end(), c.get()));
      consumers +=
          static_cast<std::size_t>(std::count(n->inputs.begin(), n->inputs.end(), c.get()));
    }
    if (producers == 0 || consumers != 1) {
      throw logic_error("streaming::Network: channel '" + c->name() + "' has " +
                        std::to_string(producers) + " producers and " + std::to_string(consumers) +
                        " consumers (it needs at least one producer and exactly one consumer)");
    }
    c->set_producers(producers);
  }
}

std::string Network::plan() const {
  std::ostringstream os;
  for (const auto& n : nodes_) {
    os << n->name << ": " << names(n->inputs) << " -> " << names(n->outputs) << "\n";
  }
  return os.str();
}

void Network::stop(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (!first_error_) first_error_ = std::move(error);
  }
  if (stopped_.exchange(true, std::memory_order_acq_rel)) return;
  for (const auto& c : channels_) c->cancel();
}

void Network::on_end(Node& n) {
  Context& ctx = *n.ctx;
  const std::exception_ptr error = n.actor.handle().promise().error;
  if (error && !(stopped_.load(std::memory_order_acquire) && is_cancelled(error))) stop(error);
  try {
    ctx.close_outputs();
    ctx.shutdown_inputs();
  } catch (...) {
    stop(std::current_exception());
  }
  ctx.stats().ended = Clock::now() - start_;
  std::lock_guard lock(mutex_);
  n.ended = true;
  --running_;
  ended_cv_.notify_all();
}

std::string Network::waiting_actors() const {
  std::string s;
  for (const auto& n : nodes_) {
    if (!n->ended) s += (s.empty() ? "" : ", ") + n->name;
  }
  return s;
}

NetworkReport Network::run() {
  if (ran_) throw logic_error("streaming::Network: run() twice");
  ran_ = true;
  check_graph();
  executor_ =
      std::make_unique<Executor>(options_.threads == 0 ? default_threads() : options_.threads);
  start_ = Clock::now();
  std::vector<std::uint64_t> ranges(nodes_.size(), 0);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = *nodes_[i];
    n.ctx =
        std::make_unique<Context>(n.name, n.inputs, n.outputs, br_, comm_, *executor_, stopped_);
    try {
      n.actor = n.body(*n.ctx);
      n.body = nullptr;  // the coroutine has its own copies of what it uses
      if (!n.actor)
        throw logic_error("streaming::Network: actor '" + n.name + "' made no coroutine");
    } catch (...) {
      stop(std::current_exception());
      n.ended = true;
      n.ctx->close_outputs();
      continue;
    }
    auto& promise = n.actor.handle().promise();
    promise.on_start = [this, &n, &range = ranges[i]] {
      n.ctx->stats().started = Clock::now() - start_;
      range = detail::nvtx_start(n.name);
    };
    promise.on_end = [this, &n, &range = ranges[i]] {
      detail::nvtx_end(range);
      on_end(n);
    };
    ++running_;
  }
  for (const auto& n : nodes_) {
    if (!n->ended) executor_->schedule(n->actor.handle());
  }
  {
    std::unique_lock lock(mutex_);
    while (running_ > 0) {
      ended_cv_.wait_for(lock, std::chrono::milliseconds(50));
      // Nothing queued, running or blocking: no one can wake the actors still suspended.
      if (running_ > 0 && !stopped_.load(std::memory_order_acquire) && executor_->idle()) {
        const std::string waiting = waiting_actors();
        lock.unlock();
        stop(std::make_exception_ptr(logic_error(
            "streaming::Network: deadlock: every actor left waits on a channel that nothing "
            "will fill or drain (" +
            waiting + ")")));
        lock.lock();
      }
    }
  }
  NetworkReport report;
  report.wall = Clock::now() - start_;
  for (const auto& n : nodes_) report.actors.push_back({n->name, n->ctx->stats()});
  executor_.reset();  // every thread joined: the frames can go
  for (auto& n : nodes_) n->actor = Actor{};
  if (first_error_) std::rethrow_exception(first_error_);
  return report;
}

std::string NetworkReport::timeline() const {
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::ostringstream os;
  char line[256];
  std::snprintf(line, sizeof line, "%-22s %9s %9s %9s %9s %9s %8s %10s %8s %10s\n", "actor",
                "start ms", "end ms", "in-wait", "out-wait", "mem-wait", "msgs in", "MiB in",
                "msgs out", "MiB out");
  os << line;
  for (const Entry& e : actors) {
    const ActorStats& s = e.stats;
    std::snprintf(line, sizeof line,
                  "%-22s %9.1f %9.1f %9.1f %9.1f %9.1f %8llu %10.1f %8llu %10.1f\n", e.name.c_str(),
                  ms(s.started), ms(s.ended), ms(s.blocked_input), ms(s.blocked_output),
                  ms(s.blocked_memory), static_cast<unsigned long long>(s.messages_in),
                  s.bytes_in / 1048576.0, static_cast<unsigned long long>(s.messages_out),
                  s.bytes_out / 1048576.0);
    os << line;
  }
  std::snprintf(line, sizeof line, "wall %.1f ms\n", ms(wall));
  os << line;
  return os.str();
}

}  // namespace spillway::streaming
