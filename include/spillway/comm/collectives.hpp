#pragma once
/// @file collectives.hpp
/// Collectives over any Communicator (single, local, MPI), built on its transfers and small
/// messages: allgather of buffers of any tier, the receiver choosing the tier, and allreduce
/// of small arrays of numbers. Every rank calls them in the same order with the same op id,
/// which each call claims for itself (Communicator::claim_op), so one op id serves any number
/// of calls in a row and never mixes them. A dead or stuck peer is a comm_error within the
/// communicator's timeout.

#include <spillway/comm/communicator.hpp>
#include <spillway/comm/tag.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace spillway {

/// Every rank's `mine`, in rank order (this rank's own a copy), each in a new buffer of tier
/// `into` of `br` (DEVICE, PINNED_HOST or HOST). The ranks' buffers may differ in size and
/// tier; `mine`'s queued writes must be done or on its stream, and it must stay alive until
/// this returns.
/// @throws spillway::comm_error for a dead or stuck peer; spillway::out_of_memory when `into`
///         has no room for all of them; spillway::logic_error for a DISK tier or `mine`
std::vector<std::unique_ptr<Buffer>> allgather(Communicator& comm, OpID op, const Buffer& mine,
                                               BufferResource& br, MemoryType into);

/// Receives one small message of `tag` from each rank of `from` (not this one), in whatever
/// order they come, handing each to `fn`. For the rounds of a collective: a rank that has left
/// (Communicator::has_left) without sending its message fails the wait at once, not after the
/// timeout; what it sent before leaving is still received.
/// @throws spillway::comm_error naming the ranks not heard from, when one of them has left or
///         the timeout passes; for a second message from one rank or one from a rank not in
///         `from`
void receive_from_each(Communicator& comm, Tag tag, std::span<const Rank> from,
                       const std::function<void(Message&)>& fn);

/// Sends `mine` to every other rank and returns every rank's small message of `tag`, in rank
/// order (this rank's own a copy): one round of a collective over small messages.
/// @throws spillway::comm_error naming the ranks not heard from (receive_from_each)
std::vector<std::vector<std::uint8_t>> exchange_messages(Communicator& comm, Tag tag,
                                                         const std::vector<std::uint8_t>& mine);

enum class ReduceOp : std::uint8_t { sum, min, max };

/// The element-wise reduction of every rank's `values` over the ranks, on every rank. Every
/// rank gives the same number of values; floating-point sums are taken in rank order, so
/// every rank gets the same bits.
/// @throws spillway::logic_error when the ranks' lengths differ (on every rank);
///         spillway::comm_error for a dead or stuck peer
std::vector<std::int64_t> allreduce(Communicator& comm, OpID op,
                                    std::span<const std::int64_t> values, ReduceOp how);
std::vector<std::uint64_t> allreduce(Communicator& comm, OpID op,
                                     std::span<const std::uint64_t> values, ReduceOp how);
std::vector<double> allreduce(Communicator& comm, OpID op, std::span<const double> values,
                              ReduceOp how);

}  // namespace spillway
