#pragma once
/// @file timeline.hpp
/// spillway-bench-shuffle's --timeline: when each step of a rank's run ended, in milliseconds
/// from the run's start. Host steps are read from the clock when they return; GPU steps from
/// events recorded on the rank's stream (read after the run, so timing does not synchronize
/// anything). Off, every call does nothing.

#include <spillway/core/cuda.hpp>
#include <spillway/core/stream.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace spillway::tools {

class Timeline {
 public:
  Timeline(bool on, bool gpu, Stream stream) : on_{on}, gpu_{on && gpu}, stream_{stream} {}
  ~Timeline() {
    for (Mark& m : marks_) {
      if (m.event != nullptr) cuda::event_destroy(m.event);
    }
    if (start_event_ != nullptr) cuda::event_destroy(start_event_);
  }
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  /// The run starts now (the stream is idle).
  void start() {
    if (!on_) return;
    t0_ = Clock::now();
    if (gpu_) {
      start_event_ = cuda::event_create();
      cuda::event_record(start_event_, stream_);
    }
  }
  /// A host step ended now.
  void host(std::string what) {
    if (on_) marks_.push_back({std::move(what), ms_since_start(), nullptr});
  }
  /// The work queued on the stream so far is a step (on the CPU path: a host step).
  void gpu(std::string what) {
    if (!on_) return;
    if (!gpu_) return host(std::move(what));
    void* e = cuda::event_create();
    cuda::event_record(e, stream_);
    marks_.push_back({std::move(what) + " (GPU)", 0, e});
  }
  /// One line per step, in the order they were marked; the stream must be idle.
  [[nodiscard]] std::string report(int rank) const {
    std::string out;
    char line[256];
    for (const Mark& m : marks_) {
      const double ms = m.event != nullptr ? cuda::event_elapsed_ms(start_event_, m.event) : m.ms;
      std::snprintf(line, sizeof line, "  rank %d %9.2f ms  %s\n", rank, ms, m.what.c_str());
      out += line;
    }
    return out;
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Mark {
    std::string what;
    double ms;
    void* event;
  };
  [[nodiscard]] double ms_since_start() const {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0_).count();
  }

  bool on_;
  bool gpu_;
  Stream stream_;
  Clock::time_point t0_{};
  void* start_event_{nullptr};
  std::vector<Mark> marks_;
};

}  // namespace spillway::tools
