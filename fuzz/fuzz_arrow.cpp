// libFuzzer target for the Arrow C Data Interface import (import_arrow), the boundary where a
// caller's ArrowSchema/ArrowArray come in. The harness builds the structs from the input:
// formats (valid and invalid), names, flags, lengths, offsets, null counts, buffer counts,
// null pointers where the specification allows none, string offsets and validity bits; each
// buffer is as large as the specification makes it for what the struct declares (the C
// interface carries no buffer sizes, so a producer that lies about them cannot be caught).
// A valid batch must import to a table whose every byte can be read (checksum); an invalid
// one must give spillway::logic_error naming the column and the problem. Either way the
// structs are released exactly once. Never a crash, undefined behaviour, a leak or a read
// outside the buffers.
#include <spillway/core/error.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/arrow.hpp>
#include <spillway/table/checksum.hpp>

#include "fuzz_common.hpp"

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

/// Everything the harness allocated; freed by the top-level release callbacks.
struct Owned {
  std::vector<std::unique_ptr<std::uint8_t[]>> blocks;
  std::vector<std::string> strings;
  std::vector<std::unique_ptr<ArrowSchema>> schemas;
  std::vector<std::unique_ptr<ArrowArray>> arrays;
  std::vector<std::unique_ptr<ArrowSchema*[]>> schema_lists;
  std::vector<std::unique_ptr<ArrowArray*[]>> array_lists;
  std::vector<std::unique_ptr<const void*[]>> buffer_lists;
  int releases{0};
};

std::uint8_t* block(Owned& o, std::size_t bytes, FuzzedDataProvider& in) {
  o.blocks.emplace_back(new std::uint8_t[std::max<std::size_t>(bytes, 1)]);
  std::uint8_t* p = o.blocks.back().get();
  const auto fill = in.ConsumeBytes<std::uint8_t>(bytes);
  std::memset(p, 0, bytes);
  if (!fill.empty()) std::memcpy(p, fill.data(), fill.size());
  return p;
}

void release_schema(ArrowSchema* s) {
  static_cast<Owned*>(s->private_data)->releases += 1;
  s->release = nullptr;
}
void release_array(ArrowArray* a) {
  static_cast<Owned*>(a->private_data)->releases += 1;
  a->release = nullptr;
}
void release_child_schema(ArrowSchema* s) {
  s->release = nullptr;
}
void release_child_array(ArrowArray* a) {
  a->release = nullptr;
}

std::int64_t small_or_wild(FuzzedDataProvider& in, std::int64_t lo, std::int64_t hi) {
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0:
      return in.ConsumeIntegral<std::int64_t>();
    case 1:
      return -1;
    default:
      return in.ConsumeIntegralInRange<std::int64_t>(lo, hi);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  static const char* const formats[] = {
      "c",      "s",       "i",      "l",         "C",    "S",        "I",    "L",
      "f",      "g",       "b",      "u",         "",     "z",        "+s",   "u8",
      "U",      "tdD",     "tdm",    "tss:",      "tsm:", "tsu:",     "tsn:", "tsu:UTC",
      "d:10,2", "d:38,-3", "d:40,2", "d:5,1,256", "d:7",  "d:9,2,128"};
  Owned o;
  o.strings.reserve(8);  // names point into them: no reallocation
  ArrowSchema top_schema{};
  ArrowArray top_array{};
  const auto ncols = in.ConsumeIntegralInRange<std::int64_t>(0, 4);
  const std::int64_t batch_length = small_or_wild(in, 0, 70);
  const std::int64_t batch_offset = in.ConsumeBool() ? 0 : small_or_wild(in, 0, 9);
  top_schema.format = in.ConsumeIntegralInRange<int>(0, 9) == 0 ? "+l" : "+s";
  top_schema.n_children = in.ConsumeIntegralInRange<int>(0, 9) == 0 ? ncols + 1 : ncols;
  top_array.length = batch_length;
  top_array.offset = batch_offset;
  top_array.null_count = in.ConsumeIntegralInRange<int>(0, 9) == 0 ? 1 : 0;
  top_array.n_buffers = 1;
  o.buffer_lists.emplace_back(new const void* [1] { nullptr });
  top_array.buffers = o.buffer_lists.back().get();
  top_array.n_children = ncols;
  o.schema_lists.emplace_back(new ArrowSchema*[static_cast<std::size_t>(ncols) + 1]);
  o.array_lists.emplace_back(new ArrowArray*[static_cast<std::size_t>(ncols) + 1]);
  top_schema.children =
      in.ConsumeIntegralInRange<int>(0, 19) == 0 ? nullptr : o.schema_lists[0].get();
  top_array.children =
      in.ConsumeIntegralInRange<int>(0, 19) == 0 ? nullptr : o.array_lists[0].get();
  for (std::int64_t c = 0; c <= ncols; ++c) {  // one spare child for a wrong n_children
    o.schemas.push_back(std::make_unique<ArrowSchema>());
    o.arrays.push_back(std::make_unique<ArrowArray>());
    ArrowSchema& cs = *o.schemas.back();
    ArrowArray& ca = *o.arrays.back();
    const char* fmt = formats[in.ConsumeIntegralInRange<std::size_t>(0, std::size(formats) - 1)];
    cs.format = in.ConsumeIntegralInRange<int>(0, 29) == 0 ? nullptr : fmt;
    o.strings.push_back(in.ConsumeRandomLengthString(8));
    cs.name = in.ConsumeBool() ? o.strings.back().c_str() : nullptr;
    cs.flags = in.ConsumeBool() ? ARROW_FLAG_NULLABLE : 0;
    cs.release = release_child_schema;
    const std::string f = fmt;
    const bool str = f == "u";
    const bool bits = f == "b";
    std::size_t width = 0;
    if (f == "c" || f == "C") width = 1;
    if (f == "s" || f == "S") width = 2;
    if (f == "i" || f == "I" || f == "f" || f == "tdD") width = 4;
    if (f == "l" || f == "L" || f == "g" || f.starts_with("ts")) width = 8;
    if (f.starts_with("d:")) width = 16;
    ca.offset = in.ConsumeIntegralInRange<int>(0, 9) == 0
                    ? -1
                    : in.ConsumeIntegralInRange<std::int64_t>(0, 9);
    const std::int64_t need = (batch_length > 0 && batch_length < 1000 ? batch_length : 0) +
                              (batch_offset > 0 && batch_offset < 1000 ? batch_offset : 0);
    // A wild child length only beside a sane batch: a producer that claims more rows than
    // it has buffers for cannot be caught (see above), so the harness never is one.
    const bool sane_batch =
        batch_length >= 0 && batch_length < 1000 && batch_offset >= 0 && batch_offset < 1000;
    ca.length = sane_batch && in.ConsumeIntegralInRange<int>(0, 19) == 0
                    ? small_or_wild(in, 0, 80)
                    : need + in.ConsumeIntegralInRange<int>(0, 2);
    ca.null_count = in.ConsumeIntegralInRange<std::int64_t>(-1, 3);
    const std::int64_t expected = str ? 3 : 2;
    ca.n_buffers = in.ConsumeIntegralInRange<int>(0, 9) == 0
                       ? expected + in.ConsumeIntegralInRange<int>(-2, 1)
                       : expected;
    // Buffers sized for what this child declares (offset + length slots), when that is sane.
    // (Enough for every row the importer may read: the batch's rows past both offsets.)
    const std::int64_t sane_length = ca.length >= 0 && ca.length < 1000 ? ca.length : 0;
    const std::int64_t slots_i = std::max<std::int64_t>(ca.offset, 0) + std::max(sane_length, need);
    const auto slots = static_cast<std::size_t>(slots_i);
    const std::size_t nb = static_cast<std::size_t>(std::clamp<std::int64_t>(ca.n_buffers, 0, 4));
    o.buffer_lists.emplace_back(new const void*[std::max<std::size_t>(nb, 1)]());
    const void** bufs = o.buffer_lists.back().get();
    if (nb > 0 && ca.null_count != 0) bufs[0] = block(o, (slots + 7) / 8, in);
    if (nb > 1) {
      if (str) {
        auto* off = reinterpret_cast<std::int32_t*>(block(o, (slots + 1) * 4, in));
        std::int32_t most = 0;
        for (std::size_t i = 0; i <= slots; ++i) most = std::max(most, off[i]);
        bufs[1] = off;
        if (nb > 2) bufs[2] = block(o, static_cast<std::size_t>(std::min(most, 1 << 20)), in);
        if (nb > 2 && most > (1 << 20)) bufs[2] = nullptr;  // cannot honour such offsets
      } else {
        bufs[1] = block(o, bits ? (slots + 7) / 8 : slots * std::max<std::size_t>(width, 1), in);
      }
    }
    for (std::size_t b = 0; b < nb; ++b) {
      if (in.ConsumeIntegralInRange<int>(0, 19) == 0) bufs[b] = nullptr;
    }
    ca.buffers = bufs;
    ca.release = release_child_array;
    o.schema_lists[0][c] = in.ConsumeIntegralInRange<int>(0, 29) == 0 ? nullptr : &cs;
    o.array_lists[0][c] = in.ConsumeIntegralInRange<int>(0, 29) == 0 ? nullptr : &ca;
  }
  top_schema.private_data = &o;
  top_array.private_data = &o;
  top_schema.release = release_schema;
  top_array.release = release_array;
  try {
    auto imported = spillway::import_arrow(&top_schema, &top_array, spillway::fuzz::resource());
    (void)spillway::checksum(imported.view(), 1);  // reads every byte the view describes
  } catch (const spillway::logic_error&) {
  }
  if (o.releases != 2) std::abort();  // each struct released exactly once, also on error
  return 0;
}
