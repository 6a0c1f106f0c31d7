#include <spillway/core/error.hpp>
#include <spillway/streaming/context.hpp>

namespace spillway::streaming {

Context::Context(std::string name, std::vector<Channel*> inputs, std::vector<Channel*> outputs,
                 BufferResource& br, Communicator* comm, Executor& ex,
                 const std::atomic<bool>& stopped)
    : name_{std::move(name)},
      inputs_{std::move(inputs)},
      outputs_{std::move(outputs)},
      closed_(outputs_.size(), false),
      br_{br},
      comm_{comm},
      ex_{ex},
      stopped_{stopped} {}

Communicator& Context::communicator() const {
  if (comm_ == nullptr) {
    throw logic_error("actor '" + name_ + "' needs a communicator; its network has none");
  }
  return *comm_;
}

Channel& Context::input(std::size_t i) const {
  if (i >= inputs_.size()) {
    throw logic_error("actor '" + name_ + "' has " + std::to_string(inputs_.size()) +
                      " inputs; input " + std::to_string(i) + " asked for");
  }
  return *inputs_[i];
}

Channel& Context::output(std::size_t i) const {
  if (i >= outputs_.size()) {
    throw logic_error("actor '" + name_ + "' has " + std::to_string(outputs_.size()) +
                      " outputs; output " + std::to_string(i) + " asked for");
  }
  return *outputs_[i];
}

void Context::throw_if_stopped() const {
  if (stopped()) throw cancelled("actor '" + name_ + "': the network stopped");
}

void Context::close(std::size_t i) {
  Channel& c = output(i);
  if (closed_[i]) return;
  closed_[i] = true;
  c.close();
}

void Context::close_outputs() {
  for (std::size_t i = 0; i < outputs_.size(); ++i) close(i);
}

void Context::shutdown_inputs() {
  for (Channel* c : inputs_) c->shutdown();
}

}  // namespace spillway::streaming
