#include <spillway/comm/communicator.hpp>

#include <spillway/core/error.hpp>
#include <spillway/core/options.hpp>

#include "core/detail/nvtx.hpp"

#include <thread>

namespace spillway {

std::string to_string(Tag tag) {
  return "op " + std::to_string(tag.op) + " stage " + std::to_string(tag.stage) +
         (tag.generation != 0 ? " (use " + std::to_string(tag.generation) + ")" : "");
}

namespace detail {

std::string Request::describe() const {
  return std::string(is_send ? "send of " : "receive of ") + std::to_string(bytes) + " bytes " +
         (is_send ? "to" : "from") + " rank " + std::to_string(peer) + " (" + to_string(tag) + ")";
}

}  // namespace detail

Communicator::Communicator(Rank rank, int nranks)
    : rank_{rank}, nranks_{nranks}, logger_{rank, nranks}, timeout_{options::get().comm_timeout} {}

std::unique_ptr<Future> Communicator::send(std::unique_ptr<Buffer> buffer, Rank dst, Tag tag) {
  SPILLWAY_NVTX_RANGE("send");
  check_rank(dst, "send");
  check_buffer(buffer.get(), "send");
  return do_send(std::move(buffer), dst, tag);
}

std::unique_ptr<Future> Communicator::recv(Rank src, Tag tag, std::unique_ptr<Buffer> buffer) {
  SPILLWAY_NVTX_RANGE("receive");
  check_rank(src, "recv");
  check_buffer(buffer.get(), "recv");
  return do_recv(src, tag, std::move(buffer));
}

void Communicator::send_message(std::vector<std::uint8_t> data, Rank dst, Tag tag) {
  check_rank(dst, "send_message");
  do_send_message(std::move(data), dst, tag);
}

bool Communicator::has_left(Rank peer) const {
  check_rank(peer, "has_left");
  return do_has_left(peer);
}

void Communicator::check_rank(Rank r, const char* what) const {
  SPILLWAY_EXPECTS(r >= 0 && r < nranks(), std::string(what) + ": rank " + std::to_string(r) +
                                               " does not exist (" + std::to_string(nranks()) +
                                               " ranks)");
}

void Communicator::check_buffer(const Buffer* b, const char* what) {
  SPILLWAY_EXPECTS(b != nullptr, std::string(what) + ": no buffer");
  SPILLWAY_EXPECTS(b->mem_type() != MemoryType::DISK,
                   std::string(what) +
                       ": a DISK buffer cannot be sent or received into; move "
                       "it to a memory tier first");
}

bool Communicator::test(Future& future) {
  if (!future.done_) future.done_ = future.request_->progress();
  return future.done_;
}

std::vector<std::size_t> Communicator::test_some(std::span<const std::unique_ptr<Future>> futures) {
  std::vector<std::size_t> done;
  for (std::size_t i = 0; i < futures.size(); ++i) {
    if (futures[i] && test(*futures[i])) done.push_back(i);
  }
  return done;
}

void Communicator::wait(Future& future) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout_;
  while (!test(future)) {
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline) {
      SPILLWAY_FAIL(logger_.prefix() + "timed out after " + std::to_string(timeout_.count()) +
                        " ms waiting for the " + future.request().describe() +
                        ": the peer is dead or stuck",
                    comm_error);
    }
    // Poll hard for the first 2 ms (latency), then politely (a long wait burns no core).
    if (now - start < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

std::uint8_t Communicator::claim_op(OpID op) {
  std::lock_guard lock(ops_mutex_);
  OpUse& use = ops_[op];
  SPILLWAY_EXPECTS(!use.live, "op id " + std::to_string(op) +
                                  " is in use on this communicator: two live operations with "
                                  "one id would take each other's messages");
  use.live = true;
  return static_cast<std::uint8_t>(use.uses++ % op_generations);
}

void Communicator::release_op(OpID op) noexcept {
  std::lock_guard lock(ops_mutex_);
  if (auto it = ops_.find(op); it != ops_.end()) it->second.live = false;
}

ProgressThread& Communicator::progress_thread() {
  std::lock_guard lock(progress_mutex_);
  if (!progress_) {
    ProgressThread::Backoff backoff;
    backoff.spin = options::get().progress_spin;
    progress_ = std::make_unique<ProgressThread>(logger_, backoff);
  }
  return *progress_;
}

std::unique_ptr<Buffer> Communicator::release(std::unique_ptr<Future> future) {
  SPILLWAY_EXPECTS(future != nullptr && test(*future),
                   "release: the transfer has not completed (test() or wait() first)");
  return std::move(future->buffer_);
}

}  // namespace spillway
