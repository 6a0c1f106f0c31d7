// The transfer engine's backends: opening those EngineOptions::backend names, and choosing
// the one that carries a batch (the first in the engine's order that the peer has too, that
// both regions are registered with, and that can carry the batch's kinds of memory).

#include <spillway/core/error.hpp>

#include "transfer/detail/engine_impl.hpp"

#include <algorithm>

namespace spillway::transfer {

namespace {

std::string trimmed(std::string_view s) {
  const auto a = s.find_first_not_of(" \t");
  if (a == std::string_view::npos) return {};
  const auto b = s.find_last_not_of(" \t");
  return std::string(s.substr(a, b - a + 1));
}

/// The names in `list` (comma-separated), "auto" resolved.
std::vector<std::string> backend_list(const std::string& list) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = list.find(',', at);
    out.push_back(trimmed(std::string_view(list).substr(at, comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (out.size() == 1 && out.front() == "auto") {
    out.front() = detail::fabric_compiled() ? "libfabric" : "loopback";
  }
  SPILLWAY_EXPECTS(out.size() <= detail::kMaxBackends,
                   "transfer engine: " + std::to_string(out.size()) + " backends in '" + list +
                       "' (at most " + std::to_string(detail::kMaxBackends) + ")");
  return out;
}

}  // namespace

namespace detail {

void BackendLink::deliver_imm(std::uint32_t imm) {
  engine_.deliver_imm(imm);
}

bool BackendLink::send_to_peer(std::uint64_t backend_peer, std::span<const std::uint8_t> body,
                               const std::function<void()>& first) {
  return engine_.send_to_peer(index_, backend_peer, body, first);
}

}  // namespace detail

void TransferEngine::Impl::open_backends() {
  for (const std::string& name : backend_list(options.backend)) {
    EngineOptions o = options;
    std::string kind = name;
    if (name.starts_with("libfabric/")) {
      kind = "libfabric";
      o.provider = name.substr(std::string_view("libfabric/").size());
      SPILLWAY_EXPECTS(!o.provider.empty(), "transfer engine: '" + name + "' names no provider");
    }
    links.push_back(std::make_unique<detail::BackendLink>(*this, links.size()));
    detail::BackendHost& host = *links.back();
    if (kind == "loopback") {
      backends.push_back(detail::make_loopback_backend(host));
    } else if (kind == "libfabric") {
      backends.push_back(detail::make_fabric_backend(host, o));
    } else if (kind == "cuda_ipc") {
      backends.push_back(detail::make_cuda_ipc_backend(host, o));
    } else {
      SPILLWAY_FAIL("transfer engine: unknown backend '" + name + "' in '" + options.backend +
                    "' (auto, loopback, libfabric, libfabric/<provider> or cuda_ipc, or several "
                    "of them separated by commas)");
    }
    const std::string opened = backends.back()->name();
    SPILLWAY_EXPECTS(opened.size() <= 64, "transfer engine: a backend name of " +
                                              std::to_string(opened.size()) +
                                              " characters (at most 64): '" + opened + "'");
    SPILLWAY_EXPECTS(
        std::count_if(backends.begin(), backends.end(),
                      [&](const auto& b) { return b->name() == opened; }) == 1,
        "transfer engine: backend " + opened + " is named twice in '" + options.backend + "'");
  }
}

std::string TransferEngine::Impl::backend_names() const {
  std::string out;
  for (const auto& b : backends) out += (out.empty() ? "" : ",") + b->name();
  return out;
}

bool TransferEngine::Impl::shares_a_backend(const detail::EngineMetadata& metadata) const {
  return std::any_of(backends.begin(), backends.end(),
                     [&](const auto& b) { return metadata.backend(b->name()) != nullptr; });
}

std::size_t TransferEngine::Impl::backend_named(std::string_view name) const {
  for (std::size_t i = 0; i < backends.size(); ++i) {
    if (backends[i]->name() == name) return i;
  }
  return npos;
}

std::size_t TransferEngine::Impl::choose(const detail::Peer& peer,
                                         const detail::Registration& local,
                                         const RemoteRegion& remote, std::string& why) const {
  why.clear();
  for (std::size_t i = 0; i < backends.size(); ++i) {
    const std::string name = backends[i]->name();
    const auto has_key = [&](const RemoteKey& k) { return k.backend == name; };
    const char* lacks = nullptr;
    if (!peer.backend_peers[i]) {
      lacks = "the peer does not have it";
    } else if (!local.records[i]) {
      lacks = "the local region is not registered with it";
    } else if (std::none_of(remote.keys.begin(), remote.keys.end(), has_key)) {
      lacks = "the remote region is not registered with it";
    } else if (!backends[i]->carries(local.region.type, remote.type)) {
      lacks = "it does not carry these kinds of memory";
    } else {
      return i;
    }
    why += (why.empty() ? "" : "; ") + name + ": " + lacks;
  }
  return npos;
}

}  // namespace spillway::transfer
