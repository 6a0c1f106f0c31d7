// The MPI communicator's transfer state machine (detail/mpi_request.hpp): a transfer's steps
// in host, staged and IPC-window modes.
#include "comm/detail/mpi_request.hpp"

#include <algorithm>
#include <string>

namespace spillway::detail {

MpiRequest::MpiRequest(bool is_send, Rank peer, Tag tag, Buffer& buf, std::shared_ptr<MpiState> st)
    : Request(is_send, peer, tag, buf.size()),
      buf_{buf},
      st_{std::move(st)},
      headed_{is_send ? st_->windowed(st_->rank, peer) : st_->windowed(peer, st_->rank)},
      key_{is_send, peer, MpiState::buffer_tag(tag)} {
  set_piece(piece);
  const bool device = buf.mem_type() == MemoryType::DEVICE;
  mode_ = headed_ ? Mode::header : device ? Mode::staged : Mode::host;
  stepped_ = mode_ != Mode::host;
  if (device || (headed_ && !is_send && buf.mem_type() == MemoryType::PINNED_HOST)) {
    // Copies run after what is queued on the buffer's stream now: its allocation (a
    // receive: the copies into it wait on the GPU) or the writes that make its contents (a
    // send: its copies start once they are done, so that the shared streams do not hold
    // other transfers behind writes that finish late, such as a column still being placed).
    ready_.record(buf.stream());
    if (!is_send) ready_.wait_on(st_->stream);
  }
  std::lock_guard lock(st_->progress_mutex);
  st_->posting[key_].push_back(this);
  if (mode_ == Mode::staged) start_staged();
  if (mode_ == Mode::host) {
    auto g = st_->lock();
    try_post_all();
  }
}

bool MpiRequest::progress() {
  if (!stepped_) {  // a host transfer of a pair without headers
    std::lock_guard lock(st_->progress_mutex);
    if (done()) return true;
    auto g = st_->lock();
    if (try_post_all()) return test_all();
    if (g.owns_lock()) g.unlock();
    progress_stepped(*st_);  // earlier transfers of its key may be stepped ones
    return false;
  }
  progress_stepped(*st_);
  std::lock_guard lock(st_->progress_mutex);
  if (error_) std::rethrow_exception(error_);
  return done();
}

void MpiRequest::step() noexcept {
  if (done() || error_) return;
  try {
    auto g = st_->lock();
    if (mode_ == Mode::header) step_header();
    if (is_send && header_req_ != MPI_REQUEST_NULL) {  // a small send: it completes soon
      int flag = 0;
      SPILLWAY_MPI_TRY(MPI_Test(&header_req_, &flag, MPI_STATUS_IGNORE), st_->rank,
                       "MPI_Test (header)");
    }
    switch (mode_) {
      case Mode::header:
        return;
      case Mode::host:
        if (try_post_all()) test_all();
        return;
      case Mode::staged:
        for (std::size_t s = 0; s < slot_.size(); ++s) advance(s);
        return;
      case Mode::window:
        if (is_send) {
          step_window_send();
        } else {
          step_window_recv();
        }
        return;
    }
  } catch (...) {
    error_ = std::current_exception();
  }
}

void MpiRequest::progress_stepped(MpiState& st) {
  std::lock_guard lock(st.progress_mutex);
  std::erase_if(st.stepped, [](const std::weak_ptr<MpiRequest>& w) { return w.expired(); });
  for (std::size_t i = 0; i < st.stepped.size(); ++i) {
    if (auto r = st.stepped[i].lock()) r->step();
  }
}

bool MpiRequest::cancel() noexcept {
  std::lock_guard progress(st_->progress_mutex);
  leave_queue();
  if (done()) return true;
  auto g = st_->lock();
  // A request that does not settle (a send to a dead peer) leaves this transfer, with its
  // buffer, to outlive it (see cancel_request).
  bool settled = true;
  auto drop = [&](MPI_Request& r) { settled = cancel_request(*st_, r, peer, g) && settled; };
  auto settle = [](const Event& e) {
    try {
      e.synchronize();
    } catch (...) {
    }
  };
  drop(header_req_);
  drop(slot_msg_req_);
  for (auto& r : reqs_) drop(r);
  for (auto& s : slot_) {
    drop(s.req);
    settle(s.event);
  }
  for (auto& l : lanes_) {
    drop(l.req);
    settle(l.event);
    // A slot of this rank's window is reused only once nothing can still write into it:
    // a granted slot whose notice never came stays out of use.
    if (!is_send && l.phase == Lane::copying) st_->ipc->release(l.msg.slot);
  }
  lanes_.clear();
  finished_ = total_;
  return settled;
}

bool MpiRequest::try_post_all() {
  if (posted_ == total_ + (headed_ ? 1 : 0)) return true;
  if (!may_post(0)) return false;
  reqs_.assign(total_, MPI_REQUEST_NULL);
  status_.resize(total_);
  for (std::size_t i = 0; i < total_; ++i) {
    post(i, at(i), reqs_[i]);
    posted();
  }
  return true;
}

bool MpiRequest::test_all() {
  int flag = 0;
  SPILLWAY_MPI_TRY(MPI_Testall(static_cast<int>(total_), reqs_.data(), &flag, status_.data()),
                   st_->rank, "MPI_Testall (" + describe() + ")");
  if (flag == 0) return false;
  if (!is_send) {
    for (std::size_t i = 0; i < total_; ++i) check_count(status_[i], i);
  }
  finished_ = total_;
  return true;
}

void MpiRequest::check_count(const MPI_Status& status, std::size_t i) const {
  int got = 0;
  MPI_Get_count(&status, MPI_BYTE, &got);
  if (static_cast<std::size_t>(got) != length(i)) {
    fail("size mismatch: piece " + std::to_string(i) + " has " + std::to_string(got) +
         " bytes, expected " + std::to_string(length(i)));
  }
}

void MpiRequest::step_header() {
  if (posted_ == 0) {
    if (st_->posting[key_].front() != this) return;
    // A send announces itself once its bytes are written: the receiver grants window slots
    // to announced transfers, and a slot granted to one still being written (a column group
    // placed later) would sit idle while others wait for it.
    if (is_send && !ready_.is_complete()) return;
    if (is_send) {
      const bool window = buf_.mem_type() == MemoryType::DEVICE && buf_.size() > 0;
      header_.mode = window ? TransferHeader::window : TransferHeader::pieces;
      header_.bytes = buf_.size();
      post_small(header_, key_.tag, header_req_, true);
      ++posted_;  // never the last: pieces or notices follow
      mode_ = window ? Mode::window : Mode::host;
      if (window) set_piece(st_->ipc->slot_bytes(peer));
      return;
    }
    post_small(header_, key_.tag, header_req_, false);
    ++posted_;
  }
  if (is_send || !arrived<TransferHeader>(header_req_, "transfer header")) return;
  if (header_.magic != TransferHeader::expected_magic) fail("a corrupt transfer header");
  if (header_.bytes != buf_.size()) {
    fail("size mismatch: the sender sends " + std::to_string(header_.bytes) + " bytes");
  }
  if (header_.mode == TransferHeader::window && buf_.size() > 0) {
    mode_ = Mode::window;
    set_piece(st_->ipc->slot_bytes());
  } else if (header_.mode == TransferHeader::pieces) {
    mode_ = buf_.mem_type() == MemoryType::DEVICE ? Mode::staged : Mode::host;
    if (mode_ == Mode::staged) start_staged();
  } else {
    fail("a transfer header with the unknown mode " + std::to_string(header_.mode));
  }
}

void MpiRequest::start_staged() {
  BufferResource& br = *st_->br;
  const MemoryType bounce_tier =
      br.is_live(MemoryType::PINNED_HOST) ? MemoryType::PINNED_HOST : MemoryType::HOST;
  bounce_ = br.allocate(bounce_tier, std::min(total_, slots) * piece);
  slot_.resize(std::min(total_, slots));
}

void MpiRequest::advance(std::size_t s) {
  Slot& sl = slot_[s];
  std::byte* bounce = bounce_->data() + s * piece;
  switch (sl.phase) {
    case Phase::free:
      if (next_ == total_) return;
      if (!is_send && !may_post(next_)) return;
      if (is_send && !ready_.is_complete()) return;  // its contents are still being written
      sl.index = next_++;
      if (is_send) {
        if (length(sl.index) > 0) {
          cuda::memcpy_async(bounce, at(sl.index), length(sl.index), st_->stream);
        }
        sl.event.record(st_->stream);
        sl.phase = Phase::copying;
      } else {
        post(sl.index, bounce, sl.req);
        posted();
        sl.phase = Phase::transferring;
      }
      return;
    case Phase::copying:
      if (!sl.event.is_complete()) return;
      if (is_send) {
        if (!may_post(sl.index)) return;
        post(sl.index, bounce, sl.req);
        posted();
        sl.phase = Phase::transferring;
      } else {
        sl.phase = Phase::free;
        ++finished_;
      }
      return;
    case Phase::transferring: {
      int flag = 0;
      MPI_Status status;
      SPILLWAY_MPI_TRY(MPI_Test(&sl.req, &flag, &status), st_->rank,
                       "MPI_Test (" + describe() + ")");
      if (flag == 0) return;
      if (is_send) {
        sl.phase = Phase::free;
        ++finished_;
        return;
      }
      check_count(status, sl.index);
      if (length(sl.index) > 0) {
        cuda::memcpy_async(at(sl.index), bounce, length(sl.index), st_->stream);
      }
      sl.event.record(st_->stream);
      sl.phase = Phase::copying;
      return;
    }
  }
}

void MpiRequest::step_window_send() {
  for (;;) {  // grants
    if (!grant_held_) {
      if (slot_msg_req_ == MPI_REQUEST_NULL) {
        if (granted_ == total_) break;
        post_small(slot_msg_, MpiState::grant_tag(tag), slot_msg_req_, false);
      }
      if (!arrived<SlotMessage>(slot_msg_req_, "slot grant")) break;
      if (slot_msg_.magic != SlotMessage::expected_magic || slot_msg_.index != granted_) {
        fail("a corrupt slot grant (piece " + std::to_string(slot_msg_.index) + ", expected " +
             std::to_string(granted_) + ")");
      }
      grant_held_ = true;
    }
    if (!ready_.is_complete()) break;  // its contents are still being written
    grant_held_ = false;
    Lane& l = lanes_.emplace_back();
    l.msg = slot_msg_;
    l.phase = Lane::copying;
    cuda::memcpy_async(st_->ipc->peer_slot(peer, l.msg.slot), at(granted_), length(granted_),
                       st_->ipc->push_stream());
    l.event.record(st_->ipc->push_stream());
    ++granted_;
  }
  for (auto it = lanes_.begin(); it != lanes_.end();) {
    if (it->phase == Lane::copying) {
      if (!it->event.is_complete() || !may_post(it->msg.index)) break;
      post_small(it->msg, key_.tag, it->req, true);
      posted();
      it->phase = Lane::noticed;
    }
    int flag = 0;
    SPILLWAY_MPI_TRY(MPI_Test(&it->req, &flag, MPI_STATUS_IGNORE), st_->rank,
                     "MPI_Test (slot notice)");
    if (flag == 0) {
      ++it;
      continue;
    }
    ++finished_;
    it = lanes_.erase(it);
  }
}

void MpiRequest::step_window_recv() {
  IpcWindows& ipc = *st_->ipc;
  while (granted_ < total_) {
    const auto s = ipc.acquire();
    if (!s) break;
    Lane& l = lanes_.emplace_back();
    l.msg.index = granted_++;
    l.msg.slot = *s;
    post_small(l.msg, MpiState::grant_tag(tag), l.req, true);
  }
  for (;;) {  // notices, one posted at a time, only for granted pieces
    if (slot_msg_req_ == MPI_REQUEST_NULL) {
      if (noticed_ == granted_ || !may_post(noticed_)) break;
      post_small(slot_msg_, key_.tag, slot_msg_req_, false);
      posted();
    }
    if (!arrived<SlotMessage>(slot_msg_req_, "slot notice")) break;
    const auto it = std::find_if(lanes_.begin(), lanes_.end(), [&](const Lane& l) {
      return l.phase == Lane::granted && l.msg.index == noticed_;
    });
    if (slot_msg_.magic != SlotMessage::expected_magic || slot_msg_.index != noticed_ ||
        it == lanes_.end() || it->msg.slot != slot_msg_.slot) {
      fail("a corrupt slot notice (piece " + std::to_string(slot_msg_.index) + ", slot " +
           std::to_string(slot_msg_.slot) + ")");
    }
    cuda::memcpy_async(at(noticed_), ipc.slot(it->msg.slot), length(noticed_), st_->stream);
    it->event.record(st_->stream);
    it->phase = Lane::copying;
    ++noticed_;
  }
  for (auto it = lanes_.begin(); it != lanes_.end();) {
    int flag = 0;
    SPILLWAY_MPI_TRY(MPI_Test(&it->req, &flag, MPI_STATUS_IGNORE), st_->rank,
                     "MPI_Test (slot grant)");
    if (it->phase != Lane::copying || flag == 0 || !it->event.is_complete()) {
      ++it;
      continue;
    }
    ipc.release(it->msg.slot);
    ++finished_;
    it = lanes_.erase(it);
  }
}

void MpiRequest::post(std::size_t i, void* where, MPI_Request& req) {
  const int n = static_cast<int>(length(i));
  if (is_send) {
    SPILLWAY_MPI_TRY(MPI_Isend(where, n, MPI_BYTE, peer, key_.tag, st_->comm, &req), st_->rank,
                     "MPI_Isend");
  } else {
    SPILLWAY_MPI_TRY(MPI_Irecv(where, n, MPI_BYTE, peer, key_.tag, st_->comm, &req), st_->rank,
                     "MPI_Irecv");
  }
}

std::shared_ptr<MpiRequest> start(bool is_send, Rank peer, Tag tag, Buffer& buf,
                                  const std::shared_ptr<MpiState>& st) {
  auto req = std::make_shared<MpiRequest>(is_send, peer, tag, buf, st);
  if (req->stepped()) {
    {
      std::lock_guard lock(st->progress_mutex);
      st->stepped.push_back(req);
    }
    MpiRequest::progress_stepped(*st);
  }
  return req;
}

}  // namespace spillway::detail
