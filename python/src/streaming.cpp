// spillway.streaming's network (streaming/network.hpp) from Python: channels, the C++ actors
// (shuffle, join, group-by, sort) and actors whose work is a Python callable (source, map,
// sink). A Python callable runs in a blocking call of its actor with the GIL taken, so that a
// coroutine thread never waits for the GIL; run() releases it while the network runs. A Python
// exception in an actor stops the network and is what run() raises, with its traceback.
#include "bindings.hpp"
#include "operator_io.hpp"
#include "table.hpp"

#include <spillway/comm/communicator.hpp>
#include <spillway/core/error.hpp>
#include <spillway/ops/actors.hpp>
#include <spillway/streaming/actors.hpp>
#include <spillway/streaming/network.hpp>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace spillway::python {

namespace {

using streaming::Actor;
using streaming::Channel;
using streaming::Context;
using streaming::Message;

/// A Python callable shared by the actors that use it: copies of the pointer need no GIL, and
/// the network keeps one, so the object itself is released only with the network (GIL held).
using PyFn = std::shared_ptr<nb::object>;

MemoryType tier_of(const std::string& text) {
  const MemoryType t = parse_memory_type(text);
  SPILLWAY_EXPECTS(t == MemoryType::HOST || t == MemoryType::DEVICE,
                   "streaming: tier must be HOST or DEVICE, not " + text);
  return t;
}

/// `t` as a Python object that keeps `br` alive (GIL held).
nb::object to_python(Table&& t, BufferResource& br) {
  nb::object o = nb::cast(std::move(t), nb::rv_policy::move);
  keep_resource_alive(o, br);
  return o;
}

/// A spillway Table returned by a Python callable, moved out of its object; nullopt for None.
std::optional<Table> from_python(const nb::object& o, const std::string& who) {
  if (o.is_none()) return std::nullopt;
  SPILLWAY_EXPECTS(nb::isinstance<Table>(o), who + " returned a " +
                                                 std::string(nb::type_name(o.type()).c_str()) +
                                                 ", not a spillway Table or None");
  return std::move(nb::cast<Table&>(o));
}

Actor py_source(Context& ctx, PyFn next) {
  for (std::uint64_t seq = 0;; ++seq) {
    auto call = [&]() -> std::optional<Table> {
      nb::gil_scoped_acquire gil;
      return from_python((*next)(), "source '" + ctx.name() + "'");
    };
    std::optional<Table> t = co_await ctx.blocking(call);
    if (!t) break;
    Message m{0, seq, std::move(*t)};
    const bool sent = co_await ctx.send(0, std::move(m));
    if (!sent) break;
  }
}

Actor py_map(Context& ctx, PyFn fn, MemoryType tier) {
  for (;;) {
    std::optional<Message> in = co_await ctx.receive(0, tier);
    if (!in) break;
    auto call = [&]() -> std::optional<Table> {
      nb::gil_scoped_acquire gil;
      return from_python((*fn)(to_python(std::move(in->table), ctx.br())),
                         "map '" + ctx.name() + "'");
    };
    std::optional<Table> t = co_await ctx.blocking(call);
    if (!t) continue;
    Message out{in->partition, in->sequence, std::move(*t)};
    const bool sent = co_await ctx.send(0, std::move(out));
    if (!sent) break;
  }
}

Actor py_sink(Context& ctx, PyFn fn, MemoryType tier) {
  for (;;) {
    std::optional<Message> in = co_await ctx.receive(0, tier);
    if (!in) break;
    auto call = [&] {
      nb::gil_scoped_acquire gil;
      (*fn)(in->partition, to_python(std::move(in->table), ctx.br()));
    };
    co_await ctx.blocking(call);
  }
}

/// The network of one rank, with the Python objects its actors call.
class PyNetwork {
 public:
  PyNetwork(BufferResource& br, Communicator* comm, std::size_t threads, std::size_t max_messages,
            std::size_t max_bytes)
      : defaults_{max_messages, max_bytes, 0},
        net_{std::make_unique<streaming::Network>(br, comm,
                                                  streaming::NetworkOptions{threads, defaults_})} {}
  ~PyNetwork() {
    net_.reset();  // the actors' frames (and their copies of the callables) first
    fns_.clear();
  }
  PyNetwork(const PyNetwork&) = delete;
  PyNetwork& operator=(const PyNetwork&) = delete;

  Channel& channel(std::string name, std::optional<std::size_t> max_messages,
                   std::optional<std::size_t> max_bytes) {
    streaming::ChannelOptions o = defaults_;  // the network's bounds, or the channel's own
    if (max_messages) o.max_messages = *max_messages;
    if (max_bytes) o.max_bytes = *max_bytes;
    return net().channel(std::move(name), o);
  }
  void add(std::string name, std::vector<Channel*> in, std::vector<Channel*> out,
           streaming::ActorBody body) {
    net().add(std::move(name), std::move(in), std::move(out), std::move(body));
  }
  PyFn keep(nb::callable fn) {
    fns_.push_back(std::make_shared<nb::object>(std::move(fn)));
    return fns_.back();
  }
  /// After a run: the callables are no longer called, and holding them would keep a cycle
  /// (a callable that uses a channel, the channel its network) alive for ever.
  void release_callables() { fns_.clear(); }
  streaming::Network& net() {
    SPILLWAY_EXPECTS(net_ != nullptr, "streaming: the network was closed");
    return *net_;
  }

 private:
  streaming::ChannelOptions defaults_;
  std::unique_ptr<streaming::Network> net_;
  std::vector<PyFn> fns_;
};

nb::list report_of(const streaming::NetworkReport& r) {
  nb::list out;
  auto seconds = [](auto d) { return std::chrono::duration<double>(d).count(); };
  for (const auto& e : r.actors) {
    const streaming::ActorStats& s = e.stats;
    nb::dict d;
    d["name"] = e.name;
    d["started"] = seconds(s.started);
    d["ended"] = seconds(s.ended);
    d["blocked_input"] = seconds(s.blocked_input);
    d["blocked_output"] = seconds(s.blocked_output);
    d["blocked_memory"] = seconds(s.blocked_memory);
    d["messages_in"] = s.messages_in;
    d["rows_in"] = s.rows_in;
    d["bytes_in"] = s.bytes_in;
    d["messages_out"] = s.messages_out;
    d["rows_out"] = s.rows_out;
    d["bytes_out"] = s.bytes_out;
    out.append(d);
  }
  return out;
}

}  // namespace

void bind_streaming(nb::module_& m) {
  nb::class_<Channel>(m, "Channel", "A bounded queue of tables between two actors of a network.")
      .def_prop_ro("name", &Channel::name)
      .def_prop_ro("queued", &Channel::queued)
      .def_prop_ro("delivered", &Channel::delivered);
  using Ch = Channel&;
  nb::class_<PyNetwork>(m, "Network", "The actor network of one rank (spillway.streaming).")
      .def(nb::init<BufferResource&, Communicator*, std::size_t, std::size_t, std::size_t>(),
           nb::arg("br"), nb::arg("comm").none(), nb::arg("threads"), nb::arg("max_messages"),
           nb::arg("max_bytes"), nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>())
      .def("channel", &PyNetwork::channel, nb::arg("name"), nb::arg("max_messages").none(),
           nb::arg("max_bytes").none(), nb::rv_policy::reference_internal)
      .def(
          "source",
          [](PyNetwork& n, std::string name, Ch out, nb::callable next) {
            PyFn fn = n.keep(std::move(next));
            n.add(std::move(name), {}, {&out}, [fn](Context& ctx) { return py_source(ctx, fn); });
          },
          nb::arg("name"), nb::arg("out"), nb::arg("next"))
      .def(
          "map",
          [](PyNetwork& n, std::string name, Ch in, Ch out, nb::callable f,
             const std::string& tier) {
            PyFn fn = n.keep(std::move(f));
            const MemoryType t = tier_of(tier);
            n.add(std::move(name), {&in}, {&out},
                  [fn, t](Context& ctx) { return py_map(ctx, fn, t); });
          },
          nb::arg("name"), nb::arg("input"), nb::arg("out"), nb::arg("fn"), nb::arg("tier"))
      .def(
          "sink",
          [](PyNetwork& n, std::string name, Ch in, nb::callable f, const std::string& tier) {
            PyFn fn = n.keep(std::move(f));
            const MemoryType t = tier_of(tier);
            n.add(std::move(name), {&in}, {},
                  [fn, t](Context& ctx) { return py_sink(ctx, fn, t); });
          },
          nb::arg("name"), nb::arg("input"), nb::arg("fn"), nb::arg("tier"))
      .def(
          "concat",
          [](PyNetwork& n, std::string name, std::vector<Channel*> in, Ch out,
             const std::string& tier) {
            n.add(std::move(name), std::move(in), {&out}, streaming::concat(tier_of(tier)));
          },
          nb::arg("name"), nb::arg("inputs"), nb::arg("out"), nb::arg("tier"))
      .def(
          "shuffle",
          [](PyNetwork& n, std::string name, Ch in, Ch out, std::vector<std::size_t> keys,
             std::uint32_t partitions, std::uint32_t op, const std::string& tier) {
            n.add(std::move(name), {&in}, {&out},
                  ops::shuffle_actor(std::move(keys), partitions, static_cast<OpID>(op),
                                     tier_of(tier)));
          },
          nb::arg("name"), nb::arg("input"), nb::arg("out"), nb::arg("keys"), nb::arg("partitions"),
          nb::arg("op"), nb::arg("tier"))
      .def(
          "join",
          [](PyNetwork& n, std::string name, Ch left, Ch right, Ch out,
             std::vector<std::size_t> left_keys, std::vector<std::size_t> right_keys,
             const std::string& how, std::uint32_t partitions, std::uint32_t op,
             const std::string& tier) {
            ops::HashJoinOptions o;
            o.type = join_type(how);
            o.partitions = partitions;
            o.op = static_cast<OpID>(op);
            n.add(std::move(name), {&left, &right}, {&out},
                  ops::hash_join_actor(std::move(left_keys), std::move(right_keys), o,
                                       tier_of(tier)));
          },
          nb::arg("name"), nb::arg("left"), nb::arg("right"), nb::arg("out"), nb::arg("left_keys"),
          nb::arg("right_keys"), nb::arg("how"), nb::arg("partitions"), nb::arg("op"),
          nb::arg("tier"))
      .def(
          "groupby",
          [](PyNetwork& n, std::string name, Ch in, Ch out, std::vector<std::size_t> keys,
             const AggSpecs& aggs, std::uint32_t partitions, std::uint32_t op,
             const std::string& tier) {
            std::vector<Aggregation> a = aggregations_of(aggs);
            ops::GroupByOptions o;
            o.partitions = partitions;
            o.op = static_cast<OpID>(op);
            n.add(std::move(name), {&in}, {&out},
                  ops::groupby_actor(std::move(keys), std::move(a), o, tier_of(tier)));
          },
          nb::arg("name"), nb::arg("input"), nb::arg("out"), nb::arg("keys"),
          nb::arg("aggregations"), nb::arg("partitions"), nb::arg("op"), nb::arg("tier"))
      .def(
          "sort",
          [](PyNetwork& n, std::string name, Ch in, Ch out,
             const std::vector<std::tuple<std::size_t, bool, bool>>& keys, std::size_t samples,
             std::optional<std::uint64_t> limit, std::uint32_t op) {
            std::vector<SortKey> k;
            for (const auto& [column, desc, nulls_first] : keys)
              k.push_back({column, desc, nulls_first});
            ops::SortOptions o;
            o.samples_per_rank = samples;
            o.limit = limit;
            o.op = static_cast<OpID>(op);
            n.add(std::move(name), {&in}, {&out}, ops::sort_actor(std::move(k), o));
          },
          nb::arg("name"), nb::arg("input"), nb::arg("out"), nb::arg("keys"), nb::arg("samples"),
          nb::arg("limit").none(), nb::arg("op"))
      .def("plan", [](PyNetwork& n) { return n.net().plan(); })
      .def(
          "run",
          [](PyNetwork& n) {
            streaming::NetworkReport r;
            try {
              nb::gil_scoped_release nogil;
              r = n.net().run();
            } catch (...) {
              n.release_callables();
              throw;
            }
            n.release_callables();
            return nb::make_tuple(report_of(r), r.timeline(),
                                  std::chrono::duration<double>(r.wall).count());
          },
          "Runs every actor until all have ended (without the GIL but in Python actors); "
          "returns (per-actor counters, the timeline as text, wall seconds). Raises the first "
          "error of an actor.");
}

}  // namespace spillway::python
