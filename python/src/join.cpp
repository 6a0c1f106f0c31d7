// The local hash join of two spillway tables (table/join.hpp), for spillway.join and each
// partition pair of spillway.hash_join.
#include "bindings.hpp"
#include "table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/table/join.hpp>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

namespace spillway::python {

namespace {

JoinType join_type(const std::string& how) {
  for (JoinType t : {JoinType::inner, JoinType::left, JoinType::left_semi, JoinType::left_anti,
                     JoinType::full}) {
    if (how == to_string(t)) return t;
  }
  SPILLWAY_FAIL("join: how='" + how + "' (want inner, left, left_semi, left_anti or full)",
                logic_error);
}

}  // namespace

void bind_join(nb::module_& m) {
  m.def(
      "join_tables",
      [](const Table& left, const Table& right, const std::vector<std::size_t>& left_keys,
         const std::vector<std::size_t>& right_keys, const std::string& how, BufferResource& br) {
        const JoinType type = join_type(how);
        SPILLWAY_EXPECTS(on_host(left) && on_host(right),
                         "join: both tables must be in host memory");
        nb::gil_scoped_release nogil;
        return hash_join(left.view(), left_keys, right.view(), right_keys, type, br);
      },
      nb::arg("left"), nb::arg("right"), nb::arg("left_keys"), nb::arg("right_keys"),
      nb::arg("how"), nb::arg("br"), nb::keep_alive<0, 6>(),
      "The local hash join of two host tables on key column indices (SQL nulls).");
}

}  // namespace spillway::python
