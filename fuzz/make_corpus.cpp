// Writes the seed inputs of every fuzz target, made from real encodings, into
// argv[1]/<target>/seed-N (scripts/fuzz.sh --seed runs it; the minimised corpora that grow
// from them are kept in fuzz/corpus/).
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/pack.hpp>

#include "shuffle/detail/wire.hpp"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace {

using Bytes = std::vector<std::uint8_t>;

void put(Bytes& b, const void* p, std::size_t n) {
  const auto* c = static_cast<const std::uint8_t*>(p);
  b.insert(b.end(), c, c + n);
}

bool write(const std::string& dir, int k, const Bytes& b) {
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/seed-" + std::to_string(k);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = b.empty() || std::fwrite(b.data(), 1, b.size(), f) == b.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus DIR\n");
    return 2;
  }
  const std::string root = argv[1];
  spillway::BufferResourceConfig c;
  c.use_gpu = false;
  spillway::BufferResource br(c);
  bool ok = true;
  int k = 0;
  // unpack: u32 metadata length | metadata | payload; wire: chunk and finish messages that
  // carry the same metadata.
  for (std::size_t rows : {0, 1, 9, 40}) {
    for (double nulls : {0.0, 0.5}) {
      spillway::RandomTableOptions o;
      o.rows = rows;
      o.types = {spillway::TypeId::INT32, spillway::TypeId::STRING, spillway::TypeId::BOOL8,
                 spillway::TypeId::FLOAT64};
      o.null_fraction = nulls;
      o.max_string = 5;
      o.seed = static_cast<std::uint64_t>(k);
      auto t = spillway::random_table(o, br);
      auto p = spillway::pack(t.view(), br);
      Bytes u;
      const auto len = static_cast<std::uint32_t>(p.metadata.size());
      put(u, &len, 4);
      put(u, p.metadata.data(), p.metadata.size());
      if (p.payload->size() > 0) put(u, p.payload->data(), p.payload->size());
      ok = write(root + "/unpack", k, u) && ok;

      const auto pid = static_cast<spillway::PartID>(k % 3);
      const spillway::detail::ChunkHeader h{pid, p.payload->size(), p.metadata};
      const std::uint16_t total = 4;
      Bytes chunk{0};
      put(chunk, &total, 2);
      const auto msg = spillway::detail::encode_chunks(std::vector{h, h});
      put(chunk, msg.data(), msg.size());
      ok = write(root + "/wire", 2 * k, chunk) && ok;
      spillway::detail::Finish f;
      f.counts = {{pid, 3}, {3, 0}};
      if (nulls == 0) f.direct.push_back(h);
      f.direct_groups = 1 + static_cast<std::uint32_t>(k % 4);
      Bytes finish{1};
      put(finish, &total, 2);
      const auto fmsg = spillway::detail::encode_finish(f);
      put(finish, fmsg.data(), fmsg.size());
      ok = write(root + "/wire", 2 * k + 1, finish) && ok;
      ++k;
    }
  }
  // options: u8 parser | text (see fuzz_options.cpp).
  const std::vector<std::pair<std::uint8_t, std::string>> texts{{0, "512MiB"},
                                                                {0, "1.5GiB"},
                                                                {0, "17592186044416M"},
                                                                {0, "18446744073709551615"},
                                                                {1, "80%"},
                                                                {1, "unlimited"},
                                                                {1, "4GiB"},
                                                                {2, "0-3,8,10-11"},
                                                                {3, "pool"},
                                                                {4, "debug"},
                                                                {5, "2GiB"},
                                                                {11, "0.5"},
                                                                {95, "0.0001"},
                                                                {83, "-1"},
                                                                {59, "1.5"}};
  int n = 0;
  for (const auto& [which, text] : texts) {
    Bytes b{which};
    put(b, text.data(), text.size());
    ok = write(root + "/options", n++, b) && ok;
  }
  // bootstrap: rank, nranks, device, token (backslash-separated, as FuzzedDataProvider reads
  // strings), then the value published; the last bytes are its booleans.
  const std::vector<std::string> launches{"0\\a2\\a0\\atok12\\aport-name:tcp://1.2.3.4:5\x01\x01",
                                          "1\\a2\\a-1\\aabc\\a1\x01\x01",
                                          "3\\a2\\a0\\a../x\\a\x01\x01", "0\\a1\\a\\a\\a\x00\x01"};
  n = 0;
  for (const auto& l : launches) {
    ok = write(root + "/bootstrap", n++, Bytes(l.begin(), l.end())) && ok;
  }
  // spill and arrow: FuzzedDataProvider inputs; a few plain patterns to start from.
  for (int s = 0; s < 4; ++s) {
    Bytes b(static_cast<std::size_t>(64 << s));
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(i * 37 + s);
    ok = write(root + "/spill", s, b) && ok;
    ok = write(root + "/arrow", s, b) && ok;
  }
  return ok ? 0 : 1;
}
