// Writes seed inputs for fuzz_unpack (u32 metadata length | metadata | payload) into argv[1].
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/pack.hpp>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  spillway::BufferResourceConfig c;
  c.use_gpu = false;
  spillway::BufferResource br(c);
  int k = 0;
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
      const std::string path = std::string(argv[1]) + "/seed-" + std::to_string(k++);
      FILE* f = std::fopen(path.c_str(), "wb");
      if (f == nullptr) return 1;
      const auto len = static_cast<std::uint32_t>(p.metadata.size());
      std::fwrite(&len, 4, 1, f);
      std::fwrite(p.metadata.data(), 1, p.metadata.size(), f);
      if (p.payload->size() > 0) std::fwrite(p.payload->data(), 1, p.payload->size(), f);
      std::fclose(f);
    }
  }
  return 0;
}
