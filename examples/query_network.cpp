// A query as a streaming network, on two ranks (threads) of generated data:
//   SELECT flag, count(*), sum(qty), sum(price) FROM lines WHERE qty <= 45
//   GROUP BY flag ORDER BY flag
// Each rank's network: a source of generated tables -> a filter -> the distributed group-by
// -> the distributed sort -> a sink; all under each rank's one BufferResource, the tables
// waiting in the channels spillable. The answer is checked against the same query computed
// directly, and each actor's timeline printed. Built and run by the test command.
#include <spillway/spillway.hpp>

#include <cstring>
#include <iostream>
#include <map>
#include <mutex>

using namespace spillway;

namespace {

constexpr std::size_t kPieces = 8;
constexpr std::size_t kRows = 50000;  // per piece

/// Piece p of rank r: flag = row % 4, qty = row % 50 + 1, price = row (INT64 each).
Table piece(Rank r, std::size_t p, BufferResource& br) {
  std::vector<Column> cols;
  for (int c = 0; c < 3; ++c) {
    auto b = br.allocate(MemoryType::HOST, kRows * 8);
    auto* v = reinterpret_cast<std::int64_t*>(b->data());
    for (std::size_t i = 0; i < kRows; ++i) {
      const auto row =
          static_cast<std::int64_t>((static_cast<std::size_t>(r) * kPieces + p) * kRows + i);
      v[i] = c == 0 ? row % 4 : c == 1 ? row % 50 + 1 : row;
    }
    cols.emplace_back(TypeId::INT64, kRows, std::move(b));
  }
  return Table(std::move(cols), {"flag", "qty", "price"});
}

/// The rows of `t` with qty <= 45.
std::optional<Table> cheap(Table&& t, BufferResource& br) {
  std::vector<std::int64_t> keep;
  const TableView v = t.view();
  for (std::size_t i = 0; i < v.num_rows(); ++i) {
    if (v.columns[1].value<std::int64_t>(i) <= 45) keep.push_back(static_cast<std::int64_t>(i));
  }
  return gather(v, keep, br);
}

}  // namespace

int main() {
  std::mutex m;
  std::map<std::int64_t, std::vector<std::int64_t>> got;  // flag -> count, Σqty, Σprice
  const int rc = run_ranks(
      RankKind::local, 2, BufferResourceConfig::from_options(),
      [&](Communicator& comm, BufferResource& br) {
        streaming::Network net(br, &comm);
        auto& rows = net.channel("rows");
        auto& kept = net.channel("kept");
        auto& groups = net.channel("groups");
        auto& sorted = net.channel("sorted");
        std::size_t next = 0;
        net.add("generate", {}, {&rows}, streaming::source([&]() -> std::optional<Table> {
                  if (next == kPieces) return std::nullopt;
                  return piece(comm.rank(), next++, br);
                }));
        net.add(
            "qty <= 45", {&rows}, {&kept},
            streaming::map([&](Table&& t) { return cheap(std::move(t), br); }, MemoryType::HOST));
        ops::GroupByOptions go;
        go.op = 0;
        net.add("group by flag", {&kept}, {&groups},
                ops::groupby_actor({0}, {{1, AggOp::count}, {1, AggOp::sum}, {2, AggOp::sum}}, go,
                                   MemoryType::HOST));
        ops::SortOptions so;
        so.op = 10;
        net.add("order by flag", {&groups}, {&sorted}, ops::sort_actor({{0}}, so));
        net.add("print", {&sorted}, {},
                streaming::sink(
                    [&](streaming::Message&& msg) {
                      const TableView v = msg.table.view();
                      std::lock_guard lock(m);
                      for (std::size_t i = 0; i < v.num_rows(); ++i) {
                        got[v.columns[0].value<std::int64_t>(i)] = {
                            v.columns[1].value<std::int64_t>(i),
                            v.columns[2].value<std::int64_t>(i),
                            v.columns[3].value<std::int64_t>(i)};
                      }
                    },
                    MemoryType::HOST));
        const streaming::NetworkReport report = net.run();
        if (comm.rank() == 0) {
          std::lock_guard lock(m);
          std::cout << "rank 0's network:\n" << net.plan() << report.timeline();
        }
        return 0;
      });
  // The same query directly.
  std::map<std::int64_t, std::vector<std::int64_t>> want;
  for (std::int64_t row = 0; row < static_cast<std::int64_t>(2 * kPieces * kRows); ++row) {
    if (row % 50 + 1 > 45) continue;
    auto& w = want.try_emplace(row % 4, std::vector<std::int64_t>{0, 0, 0}).first->second;
    w[0] += 1;
    w[1] += row % 50 + 1;
    w[2] += row;
  }
  for (const auto& [flag, v] : got) {
    std::cout << "flag " << flag << ": count " << v[0] << ", sum(qty) " << v[1] << ", sum(price) "
              << v[2] << "\n";
  }
  const bool ok = rc == 0 && got == want;
  std::cout << (ok ? "the answer is the direct computation's\n" : "WRONG ANSWER\n");
  return ok ? 0 : 1;
}
