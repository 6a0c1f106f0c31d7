#pragma once
/// @file single.hpp
/// A communicator of one rank: a rank sends only to itself.

#include <spillway/comm/local.hpp>

namespace spillway {

/// One rank; the local communicator of a group of one.
std::unique_ptr<Communicator> make_single_communicator();

}  // namespace spillway
