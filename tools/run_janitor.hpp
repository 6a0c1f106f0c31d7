#pragma once
// spillway-run's janitor: a process of its own that outlives the launcher to remove what the
// launch leaves, whatever ends it (a normal end, a failed launch, SIGKILL or SIGHUP to the
// launcher): the ranks' spill directories (which the library links into the launch
// directory) and the launch directory itself.

#include <sys/types.h>

#include <string>

namespace spillway::run {

/// A running janitor: it starts cleaning up when `release` closes (or the launcher dies).
struct Janitor {
  pid_t pid{-1};
  int release{-1};  ///< the launcher's end of the pipe (close-on-exec: ranks do not hold it)
};

/// Starts the janitor of `dir` (as `program --janitor FD DIR`, a fresh process image: the
/// launcher may have threads by then). @throws std::runtime_error when it cannot start
Janitor start_janitor(const std::string& program, const std::string& dir);

/// Closes the janitor's pipe and waits until it has cleaned up (the launcher's normal end).
void finish(Janitor& janitor);

/// The janitor's main, when spillway-run is run as `spillway-run --janitor FD DIR`; else -1.
int janitor_main(int argc, char** argv);

}  // namespace spillway::run
