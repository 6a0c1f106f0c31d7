#include <spillway/core/units.hpp>
#include <spillway/stats/statistics.hpp>

#include <gtest/gtest.h>

#include <thread>
#include <vector>

using namespace spillway;

TEST(Statistics, AccumulatesAndReportsLikeRapidsMPF) {
  Statistics s;
  s.add("copy-device-to-pinned_host", 2.0 * GiB, 0.1);
  s.add("copy-device-to-pinned_host", 2.0 * GiB, 0.1);
  s.add_bytes("recv-into-host-memory", 5 * MiB);
  s.add_count("spill-calls");
  const auto st = s.get("copy-device-to-pinned_host");
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->count, 2u);
  EXPECT_DOUBLE_EQ(st->bytes, 4.0 * GiB);
  EXPECT_DOUBLE_EQ(st->seconds, 0.2);
  EXPECT_FALSE(s.get("nothing").has_value());
  const std::string r = s.report();
  EXPECT_NE(r.find("copy-device-to-pinned_host: 4.00 GiB | 200.00 ms | 20.00 GiB/s"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("recv-into-host-memory: 5.00 MiB"), std::string::npos) << r;
  EXPECT_NE(r.find(" - spill-calls: 1 call\n"), std::string::npos) << r;
}

// Entries of zero bytes (a shuffle's empty payloads) once printed their call count as their
// value: "shuffle-payload-recv: 5 (5 calls)".
TEST(Statistics, ACountIsNotPrintedAsAValue) {
  Statistics s;
  for (int i = 0; i < 5; ++i) s.add_bytes("shuffle-payload-recv", 0);
  const std::string r = s.report();
  EXPECT_NE(r.find(" - shuffle-payload-recv: 5 calls\n"), std::string::npos) << r;
  EXPECT_EQ(r.find("5 (5 calls)"), std::string::npos) << r;
}

TEST(Statistics, Json) {
  Statistics s;
  s.add("a\"b", 10, 0.5);
  const std::string j = s.to_json();
  EXPECT_NE(j.find(R"("a\"b":{"count":1,"bytes":10,"seconds":0.5})"), std::string::npos) << j;
  EXPECT_NE(j.find("\"memory_profile\""), std::string::npos);
}

TEST(Statistics, DisabledIsANoOp) {
  Statistics s(false);
  s.add("x", 1, 1);
  EXPECT_FALSE(s.get("x").has_value());
  EXPECT_NE(s.report().find("disabled"), std::string::npos);
}

TEST(Statistics, ConcurrentAdds) {
  Statistics s;
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) s.add("n", 1, 0);
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(s.get("n")->count, 4000u);
  EXPECT_DOUBLE_EQ(s.get("n")->bytes, 4000.0);
}

TEST(Statistics, TheEntriesSinceASnapshot) {
  Statistics st;
  st.add("copy", 100, 0.5);
  st.add("alloc", 10, 0.1);
  const auto before = st.snapshot();
  st.add("copy", 40, 0.25, 2);
  st.add("new", 7, 0);
  const auto d = Statistics::since(before, st.snapshot());
  ASSERT_EQ(d.size(), 2u);  // "alloc" did not move
  EXPECT_EQ(d.at("copy").count, 2u);
  EXPECT_DOUBLE_EQ(d.at("copy").bytes, 40);
  EXPECT_DOUBLE_EQ(d.at("copy").seconds, 0.25);
  EXPECT_EQ(d.at("new").count, 1u);
  EXPECT_EQ(Statistics::to_json(d),
            "{\"copy\":{\"count\":2,\"bytes\":40,\"seconds\":0.25},"
            "\"new\":{\"count\":1,\"bytes\":7,\"seconds\":0}}");
}
