// Sources and output callbacks of the distributed operators from Python (operator_io.hpp).
#include "operator_io.hpp"

#include "table.hpp"

#include <spillway/core/error.hpp>

#include <optional>
#include <string>
#include <utility>

namespace spillway::python {

ops::TableSource source_of(nb::callable next, const char* what) {
  return [next = std::move(next), what]() -> std::optional<Table> {
    nb::gil_scoped_acquire gil;
    nb::object t = next();
    if (t.is_none()) return std::nullopt;
    SPILLWAY_EXPECTS(nb::isinstance<Table>(t), std::string(what) + ": a source gave a " +
                                                   std::string(nb::type_name(t.type()).c_str()) +
                                                   ", not a spillway Table");
    return std::move(nb::cast<Table&>(t));
  };
}

std::function<void(std::uint32_t, Table&&)> sink_of(nb::callable out, BufferResource& br) {
  return [out = std::move(out), &br](std::uint32_t pid, Table&& t) {
    nb::gil_scoped_acquire gil;
    nb::object table = nb::cast(std::move(t), nb::rv_policy::move);
    keep_resource_alive(table, br);
    out(pid, table);
  };
}

JoinType join_type(const std::string& how) {
  for (JoinType t : {JoinType::inner, JoinType::left, JoinType::left_semi, JoinType::left_anti,
                     JoinType::full}) {
    if (how == to_string(t)) return t;
  }
  SPILLWAY_FAIL("join: how='" + how + "' (want inner, left, left_semi, left_anti or full)",
                logic_error);
}

std::vector<Aggregation> aggregations_of(const AggSpecs& aggs) {
  std::vector<Aggregation> a;
  for (const auto& [column, name] : aggs) {
    bool found = false;
    for (AggOp op : {AggOp::count, AggOp::sum, AggOp::min, AggOp::max, AggOp::mean}) {
      if (name == to_string(op)) {
        a.push_back({column, op});
        found = true;
      }
    }
    SPILLWAY_EXPECTS(found,
                     "groupby: aggregation '" + name + "' (want count, sum, min, max or mean)");
  }
  return a;
}

}  // namespace spillway::python
