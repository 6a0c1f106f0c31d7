#include <spillway/core/error.hpp>
#include <spillway/streaming/channel.hpp>

#include <utility>

namespace spillway::streaming {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

Channel::Channel(std::string name, BufferResource& br, ChannelOptions options,
                 std::size_t producers)
    : name_{std::move(name)},
      options_{options},
      open_producers_{producers},
      tables_{br, options.spill_priority} {
  if (options_.max_messages == 0) {
    throw logic_error("streaming::Channel '" + name_ + "': max_messages is 0");
  }
}

void Channel::set_producers(std::size_t n) {
  std::lock_guard lock(mutex_);
  open_producers_ = n;
}

bool Channel::over_bounds() const {
  return queue_.size() > options_.max_messages ||
         (queue_.size() > 1 && bytes_ > options_.max_bytes);
}

bool Channel::receivable() const {
  return cancelled_ || !queue_.empty() || open_producers_ == 0;
}

void Channel::throw_if_cancelled() const {
  if (cancelled_) throw cancelled("channel '" + name_ + "': the network stopped");
}

void Channel::wake_receiver() {
  cv_.notify_all();
  if (receiver_) {
    receiver_executor_->schedule(std::exchange(receiver_, {}));
  }
}

void Channel::wake_senders() {
  cv_.notify_all();
  for (auto& [h, ex] : senders_) ex->schedule(h);
  senders_.clear();
}

bool Channel::push(Message&& m, ActorStats& stats) {
  throw_if_cancelled();
  if (open_producers_ == 0) {
    throw logic_error("streaming::Channel '" + name_ + "': a send after every producer closed it");
  }
  if (shut_) return false;
  const std::size_t bytes = m.table.total_bytes();
  const std::size_t rows = m.table.num_rows();
  tables_.push(std::move(m.table));
  queue_.push_back({m.partition, m.sequence, bytes});
  bytes_ += bytes;
  ++stats.messages_out;
  stats.rows_out += rows;
  stats.bytes_out += bytes;
  wake_receiver();
  return true;
}

std::optional<Message> Channel::pop(Lock& lock, MemoryType to, ActorStats& stats) {
  throw_if_cancelled();
  if (queue_.empty()) return std::nullopt;  // closed
  // One consumer: the queue's front and the tables' oldest stay a pair while unlocked.
  const Queued q = queue_.front();
  queue_.pop_front();
  lock.unlock();
  const auto t0 = Clock::now();
  std::optional<Table> table;
  try {
    table = tables_.pop(to);
  } catch (...) {
    lock.lock();
    queue_.push_front(q);
    throw;
  }
  stats.blocked_memory += Clock::now() - t0;
  lock.lock();
  if (!table) {
    throw logic_error("streaming::Channel '" + name_ + "': two consumers at once");
  }
  bytes_ -= q.bytes;
  ++delivered_;
  ++stats.messages_in;
  stats.rows_in += table->num_rows();
  stats.bytes_in += q.bytes;
  if (!over_bounds()) wake_senders();
  return Message{q.partition, q.sequence, std::move(*table)};
}

Channel::SendAwaiter Channel::send(Message&& m, Executor& ex, ActorStats& stats) {
  return SendAwaiter(*this, std::move(m), ex, stats);
}

Channel::ReceiveAwaiter Channel::receive(MemoryType to, Executor& ex, ActorStats& stats) {
  return ReceiveAwaiter(*this, to, ex, stats);
}

bool Channel::SendAwaiter::await_suspend(std::coroutine_handle<> h) {
  std::lock_guard lock(ch_.mutex_);
  try {
    queued_ = ch_.push(std::move(msg_), stats_);
  } catch (...) {
    error_ = std::current_exception();
    return false;
  }
  if (!queued_ || !ch_.over_bounds()) return false;
  since_ = Clock::now();
  ch_.senders_.emplace_back(h, &ex_);  // last: from here another thread may resume h
  return true;
}

bool Channel::SendAwaiter::await_resume() {
  if (error_) std::rethrow_exception(error_);
  if (since_ != Clock::time_point{}) stats_.blocked_output += Clock::now() - since_;
  std::lock_guard lock(ch_.mutex_);
  ch_.throw_if_cancelled();
  return queued_;
}

bool Channel::ReceiveAwaiter::await_suspend(std::coroutine_handle<> h) {
  std::lock_guard lock(ch_.mutex_);
  if (ch_.receivable()) return false;
  if (ch_.receiver_) {
    throw logic_error("streaming::Channel '" + ch_.name_ + "': two consumers at once");
  }
  since_ = Clock::now();
  ch_.receiver_executor_ = &ex_;
  ch_.receiver_ = h;  // last: from here another thread may resume h
  return true;
}

std::optional<Message> Channel::ReceiveAwaiter::await_resume() {
  if (since_ != Clock::time_point{}) stats_.blocked_input += Clock::now() - since_;
  Lock lock(ch_.mutex_);
  return ch_.pop(lock, to_, stats_);
}

bool Channel::send_sync(Message&& m, ActorStats& stats) {
  Lock lock(mutex_);
  if (!push(std::move(m), stats)) return false;
  const auto t0 = Clock::now();
  cv_.wait(lock, [&] { return cancelled_ || shut_ || !over_bounds(); });
  stats.blocked_output += Clock::now() - t0;
  throw_if_cancelled();
  return true;
}

std::optional<Message> Channel::receive_sync(MemoryType to, ActorStats& stats) {
  Lock lock(mutex_);
  const auto t0 = Clock::now();
  cv_.wait(lock, [&] { return receivable(); });
  stats.blocked_input += Clock::now() - t0;
  return pop(lock, to, stats);
}

void Channel::close() {
  std::lock_guard lock(mutex_);
  if (open_producers_ == 0) return;
  if (--open_producers_ == 0) wake_receiver();
}

void Channel::shutdown() {
  std::lock_guard lock(mutex_);
  shut_ = true;
  queue_.clear();
  tables_.clear();
  bytes_ = 0;
  wake_senders();
}

void Channel::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
  wake_receiver();
  wake_senders();
}

std::size_t Channel::queued() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

std::size_t Channel::bytes_in(MemoryType t) const {
  return tables_.bytes_in(t);
}

std::uint64_t Channel::delivered() const {
  std::lock_guard lock(mutex_);
  return delivered_;
}

}  // namespace spillway::streaming
