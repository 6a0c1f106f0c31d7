#pragma once
/// @file actor.hpp
/// The coroutine type of an actor: what a function returns that reads and writes channels with
/// co_await (see context.hpp).

#include <coroutine>
#include <exception>
#include <functional>
#include <utility>

namespace spillway::streaming {

/// An actor's coroutine, owned by its Network. It starts suspended; the network schedules it,
/// and is told when it ends (normally or with an exception, which the network reports).
class Actor {
 public:
  struct promise_type {
    std::exception_ptr error;
    std::function<void()> on_start;  // set by the network before the first step
    std::function<void()> on_end;

    Actor get_return_object() noexcept {
      return Actor{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    struct InitialAwaiter {
      promise_type& p;
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<>) const noexcept {}
      void await_resume() const {
        if (p.on_start) p.on_start();
      }
    };
    InitialAwaiter initial_suspend() noexcept { return {*this}; }
    struct FinalAwaiter {
      bool await_ready() const noexcept { return false; }
      // The frame is suspended here: the network may destroy it as soon as on_end has run.
      void await_suspend(std::coroutine_handle<promise_type> h) noexcept { h.promise().on_end(); }
      void await_resume() const noexcept {}
    };
    FinalAwaiter final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { error = std::current_exception(); }
  };

  Actor() = default;
  Actor(Actor&& o) noexcept : h_{std::exchange(o.h_, {})} {}
  Actor& operator=(Actor&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  Actor(const Actor&) = delete;
  Actor& operator=(const Actor&) = delete;
  ~Actor() { reset(); }

  [[nodiscard]] std::coroutine_handle<promise_type> handle() const noexcept { return h_; }
  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(h_); }

 private:
  explicit Actor(std::coroutine_handle<promise_type> h) noexcept : h_{h} {}
  void reset() noexcept {
    if (h_) h_.destroy();
    h_ = {};
  }
  std::coroutine_handle<promise_type> h_;
};

}  // namespace spillway::streaming
