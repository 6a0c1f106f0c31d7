// spillway-run: a single-node launcher (like RapidsMPF's rrun). Starts N ranks of a program,
// one GPU each (round-robin over -g), binds each to the CPUs and NUMA node nearest its GPU,
// gives them what they need to find each other (bootstrap.hpp: a private directory with a
// random token, and for MPI programs an ompi-server so that MPI singletons can connect), and
// when a rank fails stops the others and exits with that rank's code.
#include <spillway/comm/bootstrap.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/topology.hpp>

#include "cli.hpp"
#include "run_janitor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace spillway;
using Clock = std::chrono::steady_clock;

[[noreturn]] void usage(const std::string& error) {
  cli::print_usage(
      "spillway-run", error,
      "usage: spillway-run [options] [--] program [args...]\n"
      "  -n N                  ranks to start (default: one per GPU of -g, else 1)\n"
      "  -g LIST               GPUs to use, comma-separated, round-robin (default: all)\n"
      "  --bind-to cpu|memory|none\n"
      "                        bind each rank to the CPUs (cpu), and also prefer the NUMA\n"
      "                        node (memory), nearest its GPU, read from sysfs (default cpu)\n"
      "  -x VAR=val            set VAR in every rank's environment (repeatable)\n"
      "  --tag-output          prefix every output line with [rank]\n"
      "  -h, --help            this text\n"
      "Each rank gets SPILLWAY_RUN_RANK, SPILLWAY_RUN_NRANKS, SPILLWAY_RUN_DEVICE, "
      "SPILLWAY_RUN_DIR\n"
      "and SPILLWAY_RUN_TOKEN; spillway's MPI programs (-C mpi) join through them. When a\n"
      "rank fails, the others are stopped and spillway-run exits with its code.\n");
}

struct Options {
  int ranks{0};
  std::vector<int> gpus;
  bool gpus_given{false};
  std::string bind{"cpu"};
  std::vector<std::string> env;
  bool tag_output{false};
  std::vector<std::string> command;
};

std::vector<int> parse_gpu_list(const std::string& text, int visible) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    char* end = nullptr;
    const long g = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || g < 0 || g >= visible) {
      usage("-g: '" + item + "' is not a GPU of this machine (it has " + std::to_string(visible) +
            ")");
    }
    out.push_back(static_cast<int>(g));
  }
  if (out.empty()) usage("-g needs at least one GPU");
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  const int visible = cuda::device_count();
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-') break;
    if (a == "-h" || a == "--help") usage("");
    if (a == "-n") {
      o.ranks = static_cast<int>(cli::number(argc, argv, i, 1, 4096, usage));
    } else if (a == "-g") {
      o.gpus = parse_gpu_list(cli::value(argc, argv, i, usage), visible);
      o.gpus_given = true;
    } else if (a == "--bind-to") {
      o.bind = cli::value(argc, argv, i, usage);
      if (o.bind != "cpu" && o.bind != "memory" && o.bind != "none") {
        usage("--bind-to takes cpu, memory or none, got '" + o.bind + "'");
      }
    } else if (a == "-x") {
      const std::string kv = cli::value(argc, argv, i, usage);
      const auto eq = kv.find('=');
      if (eq == 0 || eq == std::string::npos) usage("-x takes VAR=value, got '" + kv + "'");
      o.env.push_back(kv);
    } else if (a == "--tag-output") {
      o.tag_output = true;
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  for (; i < argc; ++i) o.command.emplace_back(argv[i]);
  if (o.command.empty()) usage("no program to run");
  if (!o.gpus_given) {
    for (int g = 0; g < visible; ++g) o.gpus.push_back(g);
  }
  if (o.ranks == 0) o.ranks = o.gpus.empty() ? 1 : static_cast<int>(o.gpus.size());
  return o;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

/// Where a GPU sits (sysfs), with a line for the log.
struct Placement {
  topology::GpuPlacement at;
  std::string where;
};

Placement placement_of(int gpu) {
  Placement p{topology::gpu_placement(gpu), {}};
  p.where = "GPU " + std::to_string(gpu) + " (" + p.at.bus +
            "): " + std::to_string(p.at.cpus.size()) + " CPUs, NUMA node " +
            std::to_string(p.at.numa_node);
  return p;
}

/// In the child, before exec: binds to the GPU's CPUs and, for `memory`, prefers its node
/// (system calls only: async-signal-safe).
void bind_child(const Placement& p, bool memory) {
  (void)topology::bind_this_thread(p.at.cpus);
  if (memory) (void)topology::prefer_node(p.at.numa_node);
}

std::string random_token() {
  std::random_device rd;
  std::ostringstream s;
  for (int i = 0; i < 4; ++i) s << std::hex << rd();
  return s.str();
}

/// ompi-server, so that the ranks' MPI singletons can connect (OpenMPI needs it for
/// MPI_Comm_connect across jobs). Returns its pid, or -1 when there is none on PATH.
pid_t start_ompi_server(const std::string& uri_file, const std::vector<std::string>& env) {
  std::vector<char*> envp;  // (made before fork: the child must not allocate)
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t launcher = getpid();
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // it ends with the launcher, also one killed outright
    if (getppid() != launcher) _exit(1);
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
    }
    const char* args[] = {"ompi-server", "--no-daemonize", "-r", uri_file.c_str(), nullptr};
    execvpe(args[0], const_cast<char* const*>(args), envp.data());
    _exit(127);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    if (std::filesystem::exists(uri_file) && !read_line(uri_file).empty()) return pid;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return -1;  // not installed, or failed
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

/// This process's environment with `launch` (empty values are left out) and then the user's
/// VAR=val settings put in, replacing variables of the same name.
std::vector<std::string> rank_environment(
    const std::vector<std::pair<std::string, std::string>>& launch,
    const std::vector<std::string>& user) {
  std::vector<std::string> out;
  std::map<std::string, std::size_t> where;
  auto put = [&](const std::string& kv) {
    const std::string name = kv.substr(0, kv.find('='));
    if (const auto it = where.find(name); it != where.end()) {
      out[it->second] = kv;
    } else {
      where[name] = out.size();
      out.push_back(kv);
    }
  };
  for (char** e = environ; *e != nullptr; ++e) put(*e);
  for (const auto& [name, value] : launch) {
    if (!value.empty()) put(name + "=" + value);
  }
  for (const auto& kv : user) put(kv);
  return out;
}

volatile std::sig_atomic_t interrupted = 0;
void on_signal(int sig) {
  interrupted = sig;
}

/// Prefixes complete lines from a rank's pipe with "[rank] ".
struct Tagger {
  int fd{-1};
  int rank{0};
  FILE* out{nullptr};
  std::string pending;

  /// Reads what is there; false at end of file.
  bool drain() {
    char buf[65536];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) {
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
      if (!pending.empty()) std::fprintf(out, "[%d] %s\n", rank, pending.c_str());
      pending.clear();
      close(fd);
      fd = -1;
      return false;
    }
    pending.append(buf, static_cast<std::size_t>(n));
    for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      std::fprintf(out, "[%d] %.*s\n", rank, static_cast<int>(nl), pending.data());
      pending.erase(0, nl + 1);
    }
    std::fflush(out);
    return true;
  }
};

}  // namespace

/// What ends the launch: the first failing rank's code, or a signal's, or a launch error's.
struct Outcome {
  int exit_code{0};
  bool stopping{false};
};

int main(int argc, char** argv) {
  if (const int rc = run::janitor_main(argc, argv); rc >= 0) return rc;
  const Options o = parse(argc, argv);

  std::string tmp = std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp";
  std::string dir_template = tmp + "/spillway-run-XXXXXX";
  if (mkdtemp(dir_template.data()) == nullptr) {
    std::cerr << "spillway-run: cannot make a directory under " << tmp << ": "
              << std::strerror(errno) << "\n";
    return 1;
  }
  const std::string dir = dir_template;
  run::Janitor janitor;
  try {
    janitor = run::start_janitor("/proc/self/exe", dir);
  } catch (const std::exception& e) {
    std::cerr << "spillway-run: cannot start the process that cleans up after it: " << e.what()
              << "\n";
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return 1;
  }
  const std::string token = random_token();
  const LaunchInfo launch{o.ranks, o.ranks, -1, dir, token};  // (the launcher's own "rank")
  const std::string uri_file = dir + "/ompi-server.uri";
  // OpenMPI's session directories (of ompi-server and of the ranks' singletons) go inside the
  // launch directory, so that they go with it, also after a rank was killed.
  const std::pair<std::string, std::string> session{"OMPI_MCA_orte_tmpdir_base", dir};
  const pid_t server =
      o.ranks > 1 ? start_ompi_server(uri_file, rank_environment({session}, o.env)) : -1;

  std::vector<Placement> places;
  for (int g : o.gpus) places.push_back(placement_of(g));

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);

  const pid_t launcher = getpid();
  std::map<pid_t, int> rank_of;
  std::vector<Tagger> taggers;
  Outcome end;
  auto stop_all = [&](int sig) {
    for (const auto& [pid, r] : rank_of) kill(-pid, sig);
  };
  auto fail_launch = [&](const std::string& what) {  // stops the ranks started so far
    std::cerr << "spillway-run: " << what << ": " << std::strerror(errno)
              << "; stopping the ranks started\n";
    end = {1, true};
    stop_all(SIGTERM);
  };
  for (int r = 0; r < o.ranks && !end.stopping; ++r) {
    std::array<int, 2> out_pipe{-1, -1};
    std::array<int, 2> err_pipe{-1, -1};
    if (o.tag_output &&
        (pipe2(out_pipe.data(), O_CLOEXEC) != 0 || pipe2(err_pipe.data(), O_CLOEXEC) != 0)) {
      for (int fd : out_pipe) {
        if (fd >= 0) close(fd);
      }
      fail_launch("pipe for rank " + std::to_string(r) + "'s output");
      break;
    }
    const int gpu = o.gpus.empty() ? -1 : o.gpus[static_cast<std::size_t>(r) % o.gpus.size()];
    // Everything the child needs is made before fork: the launcher may have threads (CUDA's),
    // so the child must not allocate.
    std::vector<std::string> env_strings = rank_environment(
        {{"SPILLWAY_RUN_RANK", std::to_string(r)},
         {"SPILLWAY_RUN_NRANKS", std::to_string(o.ranks)},
         {"SPILLWAY_RUN_DIR", dir},
         {"SPILLWAY_RUN_TOKEN", token},
         {"SPILLWAY_RUN_DEVICE", gpu >= 0 ? std::to_string(gpu) : std::string()},
         {"OMPI_MCA_pmix_server_uri", server > 0 ? "file:" + uri_file : std::string()},
         session},
        o.env);
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<char*> args;
    for (const auto& a : o.command) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const Placement place =
        gpu >= 0 ? places[static_cast<std::size_t>(r) % places.size()] : Placement{};
    const pid_t pid = fork();
    if (pid < 0) {
      for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) {
        if (fd >= 0) close(fd);
      }
      fail_launch("fork of rank " + std::to_string(r));
      break;
    }
    if (pid == 0) {   // only async-signal-safe calls from here to exec
      setpgid(0, 0);  // its own process group: stopping a rank stops what it started too
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // and a launcher killed outright takes its ranks along
      if (getppid() != launcher) _exit(1);
      if (o.tag_output) {  // (dup2 clears close-on-exec on the copies)
        dup2(out_pipe[1], STDOUT_FILENO);
        dup2(err_pipe[1], STDERR_FILENO);
      }
      if (gpu >= 0 && o.bind != "none") bind_child(place, o.bind == "memory");
      execvpe(args[0], args.data(), envp.data());
      const char* why = std::strerror(errno);
      for (const char* part : std::initializer_list<const char*>{"spillway-run: cannot run '",
                                                                 args[0], "': ", why, "\n"}) {
        (void)!write(STDERR_FILENO, part, std::strlen(part));
      }
      _exit(127);
    }
    setpgid(pid, pid);  // (also here, so that a stop right away finds the group)
    rank_of[pid] = r;
    if (o.tag_output) {
      close(out_pipe[1]);
      close(err_pipe[1]);
      taggers.push_back({out_pipe[0], r, stdout, {}});
      taggers.push_back({err_pipe[0], r, stderr, {}});
    }
  }

  // Wait for the ranks; the first failure (or a signal to the launcher) stops the others.
  auto deadline = end.stopping ? Clock::now() + std::chrono::seconds(5) : Clock::time_point::max();
  while (!rank_of.empty() ||
         std::any_of(taggers.begin(), taggers.end(), [](const Tagger& t) { return t.fd >= 0; })) {
    if (!taggers.empty()) {
      std::vector<pollfd> fds;
      for (const auto& t : taggers) fds.push_back({t.fd, POLLIN, 0});  // fd -1 is ignored
      if (poll(fds.data(), fds.size(), 20) > 0) {
        for (std::size_t k = 0; k < fds.size(); ++k) {
          if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR)) != 0) taggers[k].drain();
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    int status = 0;
    for (pid_t pid; !rank_of.empty() && (pid = waitpid(-1, &status, WNOHANG)) > 0;) {
      const auto it = rank_of.find(pid);
      if (it == rank_of.end()) continue;  // ompi-server
      const int r = it->second;
      rank_of.erase(it);
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      const std::string how = WIFEXITED(status)
                                  ? "with code " + std::to_string(code)
                                  : "killed by signal " + std::to_string(WTERMSIG(status));
      try {  // ranks still waiting for it (to join) fail at once, not at their timeout
        bootstrap::announce_exit(launch, r, how);
      } catch (const std::exception&) {
      }
      if (code != 0 && !end.stopping) {
        std::cerr << "spillway-run: rank " << r << (WIFEXITED(status) ? " exited " : " was ") << how
                  << "; stopping the other ranks\n";
        end = {code, true};
        stop_all(SIGTERM);
        deadline = Clock::now() + std::chrono::seconds(5);
      }
    }
    if (interrupted != 0 && !end.stopping) {
      std::cerr << "spillway-run: signal " << interrupted << "; stopping the ranks\n";
      end = {128 + interrupted, true};
      stop_all(SIGTERM);
      deadline = Clock::now() + std::chrono::seconds(5);
    }
    if (end.stopping && Clock::now() > deadline) {
      stop_all(SIGKILL);
      deadline = Clock::time_point::max();
    }
  }
  if (server > 0) {
    kill(server, SIGTERM);
    waitpid(server, nullptr, 0);
  }
  run::finish(janitor);  // the launch directory and the ranks' spill directories go
  return end.exit_code;
}
