// One libfabric RDM endpoint and what it needs (detail/fabric_endpoint.hpp).

#include "transfer/detail/fabric_endpoint.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <cstring>

namespace spillway::transfer::detail {

namespace {

template <typename Fid>
void close_fid(Fid*& f) noexcept {
  if (f != nullptr) fi_close(&f->fid);
  f = nullptr;
}

/// fi_getinfo for an RDM endpoint with RMA of `o.provider`. The imm must not arrive before the
/// batch's bytes, and a ticket should end only once they are in place. Best: writes placed in
/// order (FI_ORDER_WAW) and completions that mean "placed" (FI_DELIVERY_COMPLETE): the batch
/// goes out at once and only its last write asks for delivery completion. Then either of the
/// two: without ordering, the last write (with the imm) is held back until the others have
/// completed. Else neither. shm asks for a counter of remote writes (FI_RMA_EVENT), which tells
/// a target without a wait fd that it is being written into, so that it keeps polling. With
/// requested keys (region ids) every lane of an engine gives a region the key it was exported
/// with.
fi_info* lane_info(const LaneOptions& o) {
  fi_info* hints = fi_allocinfo();
  SPILLWAY_EXPECTS(hints != nullptr, "libfabric: fi_allocinfo failed", comm_error);
  hints->ep_attr->type = FI_EP_RDM;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_ENDPOINT |
                                (o.requested_keys ? 0 : FI_MR_PROV_KEY);
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  if (o.tx_queue_depth > 0) hints->tx_attr->size = o.tx_queue_depth;
  hints->fabric_attr->prov_name = strdup(o.provider.c_str());
  const bool shm = o.provider == "shm";
  if (shm) {
    hints->addr_format = FI_ADDR_STR;
    hints->src_addr = strdup(o.name.c_str());
    hints->src_addrlen = o.name.size() + 1;
  }
  // tcp and verbs bind to the engine's address; shm and efa pick their own.
  const bool by_address = o.provider == "tcp" || o.provider == "verbs" || o.provider == "sockets";
  const char* node = by_address ? o.address.c_str() : nullptr;
  const std::uint64_t flags = by_address ? FI_SOURCE : 0;
  fi_info* info = nullptr;
  const auto getinfo = [&](std::uint64_t caps) {
    hints->caps = caps;
    int rc = -FI_ENODATA;
    for (const auto& [order, op_flags] :
         {std::pair<std::uint64_t, std::uint64_t>{FI_ORDER_WAW, FI_DELIVERY_COMPLETE},
          {0, FI_DELIVERY_COMPLETE},
          {FI_ORDER_WAW, 0},
          {0, 0}}) {
      hints->tx_attr->msg_order = order;
      hints->tx_attr->op_flags = op_flags;
      rc = fi_getinfo(FI_VERSION(1, 17), node, nullptr, flags, hints, &info);
      if (rc != -FI_ENODATA) break;
    }
    return rc;
  };
  const std::uint64_t caps = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  int rc = getinfo(shm ? caps | FI_RMA_EVENT : caps);
  if (shm && rc == -FI_ENODATA) rc = getinfo(caps);  // an shm without the counter
  fi_freeinfo(hints);
  SPILLWAY_EXPECTS(rc == 0 && info != nullptr,
                   "libfabric: provider '" + o.provider +
                       "' offers no RDM endpoint with RMA here (fi_getinfo: " +
                       std::string(fi_strerror(-rc)) + "); try tcp or shm",
                   comm_error);
  return info;
}

}  // namespace

void fabric_check(int rc, const char* call) {
  if (rc < 0) {
    SPILLWAY_FAIL(std::string("libfabric: ") + call + " failed: " + fi_strerror(-rc) + " (" +
                      std::to_string(rc) + ")",
                  comm_error);
  }
}

FabricEndpoint::FabricEndpoint(const LaneOptions& o)
    : provider{o.provider}, requested_keys_{o.requested_keys} {
  try {
    info_ = lane_info(o);
    open(o);
  } catch (...) {
    close_all();
    throw;
  }
}

FabricEndpoint::~FabricEndpoint() {
  close_all();
}

void FabricEndpoint::open(const LaneOptions& o) {
  fabric_check(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
  fabric_check(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_DATA;
  cq_attr.wait_obj = FI_WAIT_FD;
  if (fi_cq_open(domain_, &cq_attr, &cq, nullptr) != 0) {
    cq_attr.wait_obj = FI_WAIT_NONE;
    fabric_check(fi_cq_open(domain_, &cq_attr, &cq, nullptr), "fi_cq_open");
  } else if (fi_control(&cq->fid, FI_GETWAIT, &wait_fd) != 0) {
    wait_fd = -1;
  }
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  fabric_check(fi_av_open(domain_, &av_attr, &av_, nullptr), "fi_av_open");
  fabric_check(fi_endpoint(domain_, info_, &ep, nullptr), "fi_endpoint");
  fabric_check(fi_ep_bind(ep, &av_->fid, 0), "fi_ep_bind(av)");
  fabric_check(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  if ((info_->caps & FI_RMA_EVENT) != 0) {
    fi_cntr_attr cntr_attr{};
    cntr_attr.events = FI_CNTR_EVENTS_COMP;
    cntr_attr.wait_obj = FI_WAIT_NONE;
    fabric_check(fi_cntr_open(domain_, &cntr_attr, &written, nullptr), "fi_cntr_open");
    fabric_check(fi_ep_bind(ep, &written->fid, FI_REMOTE_WRITE | FI_REMOTE_READ),
                 "fi_ep_bind(cntr)");
  }
  fabric_check(fi_enable(ep), "fi_enable");
  std::size_t len = 0;
  fi_getname(&ep->fid, nullptr, &len);
  address.resize(len);
  fabric_check(fi_getname(&ep->fid, address.data(), &len), "fi_getname");
  address.resize(len);
  max_msg = std::max<std::size_t>(info_->ep_attr->max_msg_size, 4096);
  inject = info_->tx_attr->inject_size;
  iov_per_msg = std::clamp<std::size_t>(
      std::min(info_->tx_attr->iov_limit, info_->tx_attr->rma_iov_limit), 1, kFabricMaxPieces);
  tx_size = std::max<std::size_t>(info_->tx_attr->size, 1);
  ordered = (info_->tx_attr->msg_order & FI_ORDER_WAW) != 0;
  delivery_complete = (info_->tx_attr->op_flags & FI_DELIVERY_COMPLETE) != 0;
  SPILLWAY_EXPECTS(info_->domain_attr->cq_data_size >= 4,
                   "libfabric: provider " + provider + " carries no 4-byte remote CQ data",
                   comm_error);
  SPILLWAY_LOG(debug, "libfabric: " + std::string(info_->fabric_attr->prov_name) + " tx queue " +
                          std::to_string(tx_size) + ", " + std::to_string(iov_per_msg) +
                          " pieces a message, inject " + std::to_string(inject) +
                          ", largest message " + std::to_string(max_msg) +
                          (ordered ? ", writes ordered" : ", writes unordered") +
                          (delivery_complete ? ", delivery complete" : ", transmit complete") +
                          (wait_fd >= 0 ? ", wait fd" : ", polled") + " (tx depth asked " +
                          std::to_string(o.tx_queue_depth) + ")");
}

void FabricEndpoint::close_all() noexcept {
  for (auto& [id, mr] : mrs_) fi_close(&mr.first->fid);
  mrs_.clear();
  close_fid(ep);
  close_fid(written);
  close_fid(av_);
  close_fid(cq);
  close_fid(domain_);
  close_fid(fabric_);
  if (info_ != nullptr) fi_freeinfo(info_);
  info_ = nullptr;
}

LaneKey FabricEndpoint::register_region(const Region& r) {
  fi_mr_attr attr{};
  iovec iov{r.ptr, r.bytes};
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  attr.access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  attr.requested_key = r.id;
  if (r.type == MemoryType::DEVICE) {
    SPILLWAY_EXPECTS((info_->caps & FI_HMEM) != 0,
                     "libfabric: provider " + provider +
                         " has no FI_HMEM here, so device memory cannot be registered "
                         "with it; register pinned host memory instead");
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = r.device;
  }
  fid_mr* mr = nullptr;
  fabric_check(
      fi_mr_regattr(domain_, &attr, r.type == MemoryType::DEVICE ? FI_HMEM_DEVICE_ONLY : 0, &mr),
      "fi_mr_regattr");
  if (info_->domain_attr->mr_mode & FI_MR_ENDPOINT) {
    const int b = fi_mr_bind(mr, &ep->fid, 0);
    const int e = b == 0 ? fi_mr_enable(mr) : b;
    if (e != 0) {
      fi_close(&mr->fid);
      fabric_check(e, "fi_mr_bind/fi_mr_enable");
    }
  }
  const LaneKey key{fi_mr_key(mr), (info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
                                       ? reinterpret_cast<std::uintptr_t>(r.ptr)
                                       : 0};
  if (requested_keys_ && key.key != r.id) {
    fi_close(&mr->fid);
    SPILLWAY_FAIL("libfabric: provider " + provider + " gave region " + std::to_string(r.id) +
                      " key " + std::to_string(key.key) + " instead of the key asked for",
                  comm_error);
  }
  mrs_[r.id] = {mr, fi_mr_desc(mr)};
  return key;
}

void FabricEndpoint::deregister_region(std::uint64_t id) noexcept {
  const auto it = mrs_.find(id);
  if (it == mrs_.end()) return;
  fi_close(&it->second.first->fid);
  mrs_.erase(it);
}

void* FabricEndpoint::desc_of(std::uint64_t id) const noexcept {
  const auto it = mrs_.find(id);
  return it == mrs_.end() ? nullptr : it->second.second;
}

std::uint64_t FabricEndpoint::add_peer(std::span<const std::uint8_t> peer_address) {
  fi_addr_t addr = FI_ADDR_UNSPEC;
  const int n = fi_av_insert(av_, peer_address.data(), 1, &addr, 0, nullptr);
  SPILLWAY_EXPECTS(n == 1, "libfabric: fi_av_insert refused the peer's address", comm_error);
  return addr;
}

void FabricEndpoint::remove_peer(std::uint64_t peer) noexcept {
  fi_addr_t addr = peer;
  fi_av_remove(av_, &addr, 1, 0);
}

bool FabricEndpoint::may_sleep() const {
  fid* f = &cq->fid;
  return wait_fd >= 0 && fi_trywait(fabric_, &f, 1) == FI_SUCCESS;
}

}  // namespace spillway::transfer::detail
