#include "run_janitor.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

namespace spillway::run {

namespace {

namespace fs = std::filesystem;

/// Waits (up to 30 s) until process `pid` is gone: its ranks die with the launcher
/// (PR_SET_PDEATHSIG), but not at the same instant.
void wait_gone(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (::kill(pid, 0) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

/// Removes the ranks' spill directories linked into `dir` ("spill-spillway-<pid>-XXXXXX",
/// see SpillFiles) once their process is gone, then `dir`.
void clean_up(const std::string& dir) {
  std::error_code ec;
  const std::string prefix = "spill-spillway-";
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || !e.is_symlink(ec)) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0) wait_gone(static_cast<pid_t>(pid));
    const fs::path target = fs::read_symlink(e.path(), ec);
    // Its files are unnamed (freed with the process): only the empty directory is left.
    if (!ec) ::rmdir(target.c_str());
  }
  // OpenMPI's own processes may still be removing their session directories inside it (which
  // fails a removal that meets a file going at the same time): try again for a while.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (fs::remove_all(dir, ec),
         fs::exists(dir, ec) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

Janitor start_janitor(const std::string& program, const std::string& dir) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  const std::string fd = std::to_string(fds[0]);
  const char* args[] = {program.c_str(), "--janitor", fd.c_str(), dir.c_str(), nullptr};
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {  // async-signal-safe calls only, then a fresh image
    ::fcntl(fds[0], F_SETFD, 0);
    ::execv(program.c_str(), const_cast<char* const*>(args));
    ::_exit(127);
  }
  ::close(fds[0]);
  return {pid, fds[1]};
}

void finish(Janitor& janitor) {
  if (janitor.release >= 0) ::close(janitor.release);
  janitor.release = -1;
  if (janitor.pid > 0) ::waitpid(janitor.pid, nullptr, 0);
  janitor.pid = -1;
}

int janitor_main(int argc, char** argv) {
  if (argc != 4 || std::strcmp(argv[1], "--janitor") != 0) return -1;
  // The signals that stop a launch stop the launcher, which then releases the janitor; the
  // janitor itself must live on to clean up.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(sig, SIG_IGN);
  const int fd = std::atoi(argv[2]);
  for (char c = 0;;) {  // until the launcher closes its end (or dies): nobody writes
    const ssize_t n = ::read(fd, &c, 1);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  clean_up(argv[3]);
  return 0;
}

}  // namespace spillway::run
