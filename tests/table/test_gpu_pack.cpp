// The GPU packing functions against the CPU ones: split_and_pack, unpack (and its device-side
// checks), checksums, concatenation, random tables; packing that spills to the next tier or
// fits nowhere. Skips without a GPU.
#include "gpu_table_fixture.hpp"

#include <algorithm>
#include <random>

using namespace spillway;
using test::expect_same_bytes;
using test::expect_same_packs;
using test::GpuTable;

TEST_F(GpuTable, SplitAndPackEqualsTheCpuByteForByte) {
  const Table h = host_table(20000, 0.25);
  const Table d = on_device(h);
  std::mt19937_64 rng(5);
  for (int round = 0; round < 5; ++round) {
    std::vector<std::size_t> splits;
    for (int i = 0; i < 9; ++i) splits.push_back(rng() % (h.num_rows() + 1));
    splits.push_back(splits.front());  // an empty part
    splits.push_back(0);
    splits.push_back(h.num_rows());
    std::sort(splits.begin(), splits.end());
    auto cpu = split_and_pack(h.view(), splits, br);
    auto gpu_parts = gpu::split_and_pack(d.view(), splits, br, stream);
    for (auto& p : gpu_parts) p = to_host(std::move(p));
    expect_same_packs(cpu, gpu_parts);
  }
}

TEST_F(GpuTable, SplitAndPackRejectsBadSplits) {
  const Table d = on_device(host_table(100, 0));
  const std::vector<std::size_t> descending{50, 10};
  EXPECT_THROW(gpu::split_and_pack(d.view(), descending, br, stream), logic_error);
  const std::vector<std::size_t> beyond{101};
  EXPECT_THROW(gpu::split_and_pack(d.view(), beyond, br, stream), logic_error);
}

TEST_F(GpuTable, UnpackViewsDevicePayloadsAndChecksStringOffsetsOnTheGpu) {
  const Table h = host_table(3000, 0.1);
  const Table d = on_device(h);
  auto packed = gpu::split_and_pack(d.view(), {}, br, stream);
  ASSERT_EQ(packed.size(), 1U);
  // Where column 11's offsets are: pack the host table for the same layout.
  auto host_pack = split_and_pack(h.view(), {}, br);
  const UnpackedTable host_view = unpack(std::move(host_pack[0]));
  const auto offsets_at = reinterpret_cast<const std::byte*>(host_view.view().columns[11].offsets) -
                          host_view.packed().payload->data();
  {
    // Intact: unpack (dispatching to gpu::unpack) gives device views of the right shape.
    auto res = br.reserve(MemoryType::DEVICE, packed[0].payload->size());
    PackedData copy{packed[0].metadata, br.copy(*packed[0].payload, res, stream)};
    const UnpackedTable u = unpack(std::move(copy));
    EXPECT_EQ(u.view().num_rows(), 3000U);
    EXPECT_EQ(u.view().names, h.names());
  }
  auto corrupt = [&](std::size_t index, std::int32_t value, const char* expect) {
    auto res = br.reserve(MemoryType::DEVICE, packed[0].payload->size());
    PackedData bad{packed[0].metadata, br.copy(*packed[0].payload, res, stream)};
    cuda::memcpy_async(bad.payload->data() + offsets_at + index * 4, &value, 4, stream);
    stream.view().synchronize();
    try {
      (void)gpu::unpack(std::move(bad), stream);
      ADD_FAILURE() << "no error for " << expect;
    } catch (const corrupt_data_error& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  };
  corrupt(0, 3, "do not start at 0");
  corrupt(1500, -7, "decrease at row 1499");
  corrupt(3000, 1 << 30, "do not end at");
}

TEST_F(GpuTable, UnpackRejectsHostPayloads) {
  auto packed = split_and_pack(host_table(10, 0).view(), {}, br);
  EXPECT_THROW((void)gpu::unpack(std::move(packed[0]), stream), logic_error);
}

TEST_F(GpuTable, PartitionAndPackNeedsLittleMoreThanItsOutputs) {
  RandomTableOptions o;
  o.rows = 1 << 20;
  o.types = std::vector<DataType>(10, TypeId::INT32);
  const Table d = on_device(random_table(o, br));
  const std::size_t input = d.view().total_bytes();
  const std::size_t before = br.used(MemoryType::DEVICE);
  br.reset_peak(MemoryType::DEVICE);
  auto parts = gpu::partition_and_pack(d.view(), std::vector<std::size_t>{0}, 16, br, stream);
  stream.view().synchronize();
  const std::size_t extra = br.peak(MemoryType::DEVICE) - before;
  std::size_t outputs = 0;
  for (const auto& p : parts) outputs += p.payload->size();
  EXPECT_GE(extra, outputs);
  EXPECT_LE(static_cast<double>(extra), 1.1 * static_cast<double>(input))
      << "extra " << extra << " for " << input << " input bytes";
}

// Small payloads share device blocks (one allocation for many partitions): each is a view,
// aligned as an allocation of its own, and the block's memory goes with the last of them.
TEST_F(GpuTable, SmallPayloadsShareBlocksFreedWithTheLastOfThem) {
  const Table h = host_table(50000, 0.1);
  const Table d = on_device(h);
  stream.view().synchronize();
  const std::size_t before = br.used(MemoryType::DEVICE);
  auto parts = gpu::partition_and_pack(d.view(), std::vector<std::size_t>{0}, 300, br, stream);
  stream.view().synchronize();
  std::size_t views = 0;
  for (const auto& p : parts) {
    EXPECT_EQ(p.payload->mem_type(), MemoryType::DEVICE);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p.payload->data()) % 256, 0u);
    if (p.payload->is_view()) ++views;
  }
  EXPECT_EQ(views, parts.size());  // all under 4 MiB, and the GPU has room
  auto want = partition_and_pack(h.view(), std::vector<std::size_t>{0}, 300, br);
  std::vector<PackedData> back;
  for (const auto& p : parts) {
    auto res = br.reserve(MemoryType::HOST, p.payload->size());
    back.push_back(PackedData{p.metadata, br.copy(*p.payload, res, stream)});
  }
  stream.view().synchronize();
  expect_same_packs(want, back);
  PackedData last = std::move(parts.back());
  parts.clear();
  EXPECT_GE(br.used(MemoryType::DEVICE), before + last.payload->size());  // its block lives
  last.payload.reset();
  EXPECT_EQ(br.used(MemoryType::DEVICE), before);
}

TEST_F(GpuTable, ChecksumEqualsTheCpu) {
  for (const double nulls : {0.0, 0.3}) {
    for (const std::size_t rows : {std::size_t{0}, std::size_t{1}, std::size_t{77777}}) {
      const Table h = host_table(rows, nulls, rows + 3);
      const Table d = on_device(h);
      EXPECT_EQ(gpu::checksum(d.view(), br, stream), checksum(h.view()))
          << rows << " rows, nulls " << nulls;
    }
  }
}

// Fixed-width columns only take the vectorized kernel (1, 2, 4 or 8 rows per thread by the
// length, against the GPU's SM count: the lengths below take all four on a GPU of 132 SMs);
// a partial last group, tables of one column width (their own kernel), views starting 8 rows in
// (masks a byte in) and an unaligned start (the generic kernel) must all give the CPU's value.
TEST_F(GpuTable, ChecksumOfFixedWidthColumnsEqualsTheCpu) {
  auto fixed_only = [](TableView v) {
    TableView out;
    for (std::size_t c = 0; c < v.num_columns(); ++c) {
      if (v.columns[c].type == TypeId::STRING) continue;
      out.columns.push_back(v.columns[c]);
      out.names.push_back(v.names[c]);
    }
    return out;
  };
  auto from_row = [](TableView v, std::size_t first) {
    for (ColumnView& c : v.columns) {
      c.data = static_cast<const std::byte*>(c.data) + first * size_of(c.type);
      if (c.null_mask != nullptr) c.null_mask += first / 8;
      c.size -= first;
    }
    return v;
  };
  for (const double nulls : {0.0, 0.3}) {
    for (const std::size_t rows :
         {std::size_t{1}, std::size_t{8}, std::size_t{9}, std::size_t{77777}, std::size_t{300'001},
          std::size_t{700'001}, std::size_t{2'000'003}}) {
      const Table h = host_table(rows, nulls, rows + 5);
      const Table d = on_device(h);
      const TableView hv = fixed_only(h.view());
      const TableView dv = fixed_only(d.view());
      EXPECT_EQ(gpu::checksum(dv, br, stream), checksum(hv)) << rows << " rows, nulls " << nulls;
      for (std::size_t c = 0; c < hv.num_columns(); ++c) {  // six columns of one width
        TableView h6{{}, {"a", "b", "c", "d", "e", "f"}};
        TableView d6{{}, h6.names};
        for (int i = 0; i < 6; ++i) {
          h6.columns.push_back(hv.columns[c]);
          d6.columns.push_back(dv.columns[c]);
        }
        EXPECT_EQ(gpu::checksum(d6, br, stream), checksum(h6))
            << rows << " rows, nulls " << nulls << ", six of column " << c;
      }
      if (rows < 16 || rows > 100'000) continue;
      for (std::size_t c = 0; c < hv.num_columns(); ++c) {  // one column a view: aligned or not
        const TableView h1{{hv.columns[c]}, {""}};
        const TableView d1{{dv.columns[c]}, {""}};
        EXPECT_EQ(gpu::checksum(from_row(d1, 8), br, stream), checksum(from_row(h1, 8))) << c;
        if (nulls == 0.0) {
          EXPECT_EQ(gpu::checksum(from_row(d1, 1), br, stream), checksum(from_row(h1, 1))) << c;
        }
      }
    }
  }
}

TEST_F(GpuTable, AddChecksumAccumulatesPerSlot) {
  const Table a = host_table(1000, 0.1, 1);
  const Table b = host_table(2345, 0.0, 2);
  const Table da = on_device(a);
  const Table db = on_device(b);
  auto sums = br.allocate(MemoryType::DEVICE, 3 * sizeof(TableChecksum), stream);
  stream.view().synchronize();  // the allocation, ordered on `stream`
  cuda::memset_device(sums->data(), 0, sums->size());
  gpu::add_checksum(da.view(), *sums, 1, br, stream);
  gpu::add_checksum(db.view(), *sums, 1, br, stream);
  gpu::add_checksum(db.view(), *sums, 2, br, stream);
  std::vector<TableChecksum> got(3);
  cuda::memcpy_async(got.data(), sums->data(), sums->size(), stream);
  stream.view().synchronize();
  TableChecksum both = checksum(a.view());
  both += checksum(b.view());
  EXPECT_EQ(got[0], TableChecksum{});
  EXPECT_EQ(got[1], both);
  EXPECT_EQ(got[2], checksum(b.view()));
  EXPECT_THROW(gpu::add_checksum(da.view(), *sums, 3, br, stream), logic_error);
}

TEST_F(GpuTable, RandomInt32TableEqualsTheCpu) {
  for (const auto& [min, max] :
       {std::pair{0, 1000}, std::pair{-5, -5}, std::pair{INT32_MIN, INT32_MAX}}) {
    const Table h = random_int32_table(100003, 3, min, max, 11, br);
    const Table d = gpu::random_int32_table(100003, 3, min, max, 11, br, stream);
    EXPECT_EQ(d.column(0).data().mem_type(), MemoryType::DEVICE);
    expect_same_bytes(on_host(d).view(), h.view());
  }
  EXPECT_THROW(gpu::random_int32_table(10, 1, 5, 4, 1, br, stream), logic_error);
}

TEST_F(GpuTable, ConcatEqualsTheCpuByteForByte) {
  // Tables of odd sizes (validity bits at every offset), an empty one in the middle and at the
  // end, with nulls in some tables only, and strings.
  std::vector<Table> hosts;
  for (const std::size_t rows : {13, 0, 1000, 7, 4099, 0}) {
    hosts.push_back(host_table(rows, rows == 1000 ? 0.0 : 0.2, rows + 1));
  }
  std::vector<Table> devices;
  std::vector<TableView> hv, dv;
  for (const Table& h : hosts) {
    devices.push_back(on_device(h));
    hv.push_back(h.view());
    dv.push_back(devices.back().view());
  }
  const Table cpu = concat(hv, br);
  const Table gpu_table = gpu::concat(dv, br, stream);
  expect_same_bytes(on_host(gpu_table).view(), cpu.view());
  // One table, and schemas that differ.
  expect_same_bytes(on_host(gpu::concat(std::span(dv).first(1), br, stream)).view(), hv[0]);
  const Table other = on_device(random_int32_table(5, 1, 0, 9, 1, br));
  const std::vector<TableView> mixed{dv[0], other.view()};
  EXPECT_THROW(gpu::concat(mixed, br, stream), logic_error);
}

TEST_F(GpuTable, UnpackAndConcatBringsChunksUpFromEveryTier) {
  const Table h = host_table(5000, 0.1);
  const Table d = on_device(h);
  const std::vector<std::size_t> splits{1000, 2500, 4000};
  auto parts = gpu::split_and_pack(d.view(), splits, br, stream);
  // Part 1 on HOST, part 2 on DISK: they come back up to DEVICE.
  parts[1].payload = br.move(std::move(parts[1].payload), MemoryType::HOST, stream);
  parts[2].payload = br.move(std::move(parts[2].payload), MemoryType::DISK, stream);
  stream.view().synchronize();
  const Table out = gpu::unpack_and_concat(std::move(parts), br, stream);
  EXPECT_EQ(out.column(0).data().mem_type(), MemoryType::DEVICE);
  expect_same_bytes(on_host(out).view(), h.view());
  EXPECT_EQ(gpu::checksum(out.view(), br, stream), checksum(h.view()));
}

// One chunk (a shuffle's direct partition) is not copied: the columns view its payload,
// strings and masks included; a host chunk comes up to DEVICE first.
TEST_F(GpuTable, UnpackAndConcatOfOneChunkViewsItsPayload) {
  const Table h = host_table(3000, 0.2);
  for (const MemoryType tier : {MemoryType::DEVICE, MemoryType::HOST}) {
    auto parts = gpu::split_and_pack(on_device(h).view(), {}, br, stream);
    parts[0].payload = br.move(std::move(parts[0].payload), tier, stream);
    stream.view().synchronize();
    const std::size_t used = br.used(MemoryType::DEVICE);
    const Table out = gpu::unpack_and_concat(std::move(parts), br, stream);
    for (std::size_t c = 0; c < out.num_columns(); ++c) {
      EXPECT_TRUE(out.column(c).data().is_view()) << "column " << c;
      EXPECT_EQ(out.column(c).data().mem_type(), MemoryType::DEVICE);
    }
    if (tier == MemoryType::DEVICE) {
      EXPECT_EQ(br.used(MemoryType::DEVICE), used);
    }
    expect_same_bytes(on_host(out).view(), h.view());
  }
}

/// Packing a device table whose packed copy does not fit under the device limit, even after
/// spilling: the payloads that find no room on the GPU are written into pinned host memory
/// (or, without a pinned tier, into HOST memory mapped for the GPU), the bytes equal the
/// CPU's, and the device limit holds. The limit leaves room for the input, the scratch and
/// half of the packed copy.
TEST_F(GpuTable, PackingThatDoesNotFitOnTheGpuGoesToTheNextTier) {
  const Table h = host_table(20000, 0.2);
  const std::vector<std::size_t> keys{0, 2};
  constexpr std::size_t parts = 12;
  const std::vector<std::size_t> splits{3000, 3000, 11000};
  // The device bytes of the input and the scratch of packing it, measured unlimited.
  std::size_t input = 0;
  std::size_t scratch = 0;
  std::size_t outputs = 0;
  {
    const std::size_t before = br.used(MemoryType::DEVICE);
    const Table d = on_device(h);
    input = br.used(MemoryType::DEVICE) - before;
    br.reset_peak(MemoryType::DEVICE);
    auto packed = gpu::partition_and_pack(d.view(), keys, parts, br, stream);
    stream.view().synchronize();
    for (const auto& p : packed) outputs += p.payload->size();
    scratch = br.peak(MemoryType::DEVICE) - before - input - outputs;
  }
  for (const bool pinned : {true, false}) {
    SCOPED_TRACE(pinned ? "with a PINNED_HOST tier" : "without a PINNED_HOST tier");
    auto cfg = test::small_config(dir.path());
    const std::size_t limit = input + scratch + outputs / 2;
    cfg.limits[index(MemoryType::DEVICE)] = Limit::bytes(limit);
    cfg.pinned_pool = pinned;
    BufferResource lbr(cfg);
    const MemoryType lower = pinned ? MemoryType::PINNED_HOST : MemoryType::HOST;
    Table d = copy_table(h, MemoryType::DEVICE, lbr, stream);
    stream.view().synchronize();
    lbr.reset_peak(MemoryType::DEVICE);
    auto got = gpu::partition_and_pack(d.view(), keys, parts, lbr, stream);
    auto got_split = gpu::split_and_pack(d.view(), splits, lbr, stream);
    stream.view().synchronize();
    EXPECT_LE(lbr.peak(MemoryType::DEVICE), limit);
    std::size_t below = 0;
    for (auto* set : {&got, &got_split}) {
      for (auto& p : *set) {
        ASSERT_TRUE(p.payload->mem_type() == MemoryType::DEVICE || p.payload->mem_type() == lower)
            << to_string(p.payload->mem_type());
        if (p.payload->mem_type() == lower) below += p.payload->size();
      }
    }
    EXPECT_GT(below, 0u);
    const auto stat = lbr.statistics().get("pack-into-host-memory");
    ASSERT_TRUE(stat.has_value());
    EXPECT_EQ(stat->bytes, static_cast<double>(below));
    // Byte for byte the CPU's packing, wherever each payload went.
    for (auto* set : {&got, &got_split}) {
      for (auto& p : *set) {
        p.payload = lbr.move(std::move(p.payload), MemoryType::HOST, stream);
        p.payload->wait();
      }
    }
    auto want = partition_and_pack(h.view(), keys, parts, br);
    auto want_split = split_and_pack(h.view(), splits, br);
    expect_same_packs(want, got);
    expect_same_packs(want_split, got_split);
  }
}

/// A limit that holds the concatenated partition but not its chunks beside it: the chunks
/// that find no room on the GPU are read from pinned host memory, and the limit holds.
TEST_F(GpuTable, UnpackAndConcatReadsChunksFromPinnedMemoryWhenTheGpuIsFull) {
  const Table h = host_table(20000, 0.2);
  const std::vector<std::size_t> splits{5000, 9000, 15000};
  auto parts = split_and_pack(h.view(), splits, br);  // HOST payloads
  std::size_t chunks = 0;
  for (const auto& p : parts) chunks += p.payload->size();
  const std::size_t output = [&] {
    const std::size_t before = br.used(MemoryType::DEVICE);
    const Table d = on_device(h);
    return br.used(MemoryType::DEVICE) - before;
  }();
  auto cfg = test::small_config(dir.path());
  const std::size_t limit = std::max(chunks, output) + chunks / 3;
  cfg.limits[index(MemoryType::DEVICE)] = Limit::bytes(limit);
  BufferResource lbr(cfg);
  std::vector<PackedData> in;
  for (auto& p : parts) {
    auto res = lbr.reserve(MemoryType::HOST, p.payload->size());
    in.push_back(PackedData{p.metadata, lbr.copy(*p.payload, res)});
  }
  const Table out = gpu::unpack_and_concat(std::move(in), lbr, stream);
  stream.view().synchronize();
  EXPECT_LE(lbr.peak(MemoryType::DEVICE), limit);
  EXPECT_EQ(out.column(0).data().mem_type(), MemoryType::DEVICE);
  const auto stat = lbr.statistics().get("unpack-from-host-memory");
  ASSERT_TRUE(stat.has_value());
  EXPECT_GT(stat->bytes, 0.0);
  expect_same_bytes(on_host(out).view(), h.view());
}

/// Chunks that sit on the GPU (extracted, so no longer spillable) with a limit that holds the
/// output but not the output beside them: they go down to pinned host memory, from where the
/// concatenation reads them, and the limit holds. A limit below the output alone: nothing is
/// consumed by try_unpack_and_concat, and unpack_and_concat_or_host unpacks on the host.
TEST_F(GpuTable, UnpackAndConcatMovesItsChunksDownToMakeRoomForTheOutput) {
  const Table h = host_table(20000, 0.2);
  const std::vector<std::size_t> splits{5000, 9000, 15000};
  const std::size_t output = [&] {
    const std::size_t before = br.used(MemoryType::DEVICE);
    const Table d = on_device(h);
    return br.used(MemoryType::DEVICE) - before;
  }();
  std::size_t chunks = 0;
  for (const auto& p : split_and_pack(h.view(), splits, br)) chunks += p.payload->size();
  {
    auto cfg = test::small_config(dir.path());
    const std::size_t limit = std::max(chunks, output) + chunks / 4;  // not both at once
    cfg.limits[index(MemoryType::DEVICE)] = Limit::bytes(limit);
    BufferResource lbr(cfg);
    auto parts = split_and_pack(h.view(), splits, lbr);
    for (auto& p : parts) p.payload = lbr.move(std::move(p.payload), MemoryType::DEVICE, stream);
    stream.view().synchronize();
    lbr.reset_peak(MemoryType::DEVICE);
    const Table out = gpu::unpack_and_concat(std::move(parts), lbr, stream);
    stream.view().synchronize();
    EXPECT_LE(lbr.peak(MemoryType::DEVICE), limit);
    EXPECT_EQ(out.column(0).data().mem_type(), MemoryType::DEVICE);
    const auto moved = lbr.statistics().get("unpack-chunks-moved-down");
    ASSERT_TRUE(moved.has_value());
    EXPECT_GT(moved->bytes, 0.0);
    expect_same_bytes(on_host(out).view(), h.view());
  }
  {
    // Chunks on the host and no room on the GPU at all.
    BufferResource lbr(test::small_config(dir.path()));
    const auto host_chunks = [&] { return split_and_pack(h.view(), splits, lbr); };
    const auto hold = lbr.reserve(MemoryType::DEVICE, lbr.available(MemoryType::DEVICE));
    std::vector<PackedData> kept = host_chunks();
    EXPECT_FALSE(gpu::try_unpack_and_concat(kept, lbr, stream).has_value());
    ASSERT_EQ(kept.size(), splits.size() + 1);  // nothing consumed
    for (const auto& p : kept) ASSERT_NE(p.payload, nullptr);
    EXPECT_THROW((void)gpu::unpack_and_concat(std::move(kept), lbr, stream), out_of_memory);
    const Table out = gpu::unpack_and_concat_or_host(host_chunks(), lbr, stream);
    EXPECT_EQ(out.column(0).data().mem_type(), MemoryType::HOST);
    EXPECT_EQ(lbr.statistics().get("unpacked-on-the-host").value_or(Statistics::Stat{}).count, 1u);
    expect_same_bytes(out.view(), h.view());
  }
}

/// When no tier can take a packed payload, the error names the step and every tier tried.
TEST_F(GpuTable, PackingThatFitsNowhereNamesTheStepAndTheTiers) {
  const Table h = host_table(20000, 0.2);
  auto cfg = test::small_config(dir.path());
  cfg.limits[index(MemoryType::DEVICE)] = Limit::bytes(4 * h.view().total_bytes());
  cfg.limits[index(MemoryType::PINNED_HOST)] = Limit::bytes(0);
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(0);
  BufferResource lbr(cfg);
  const Table d = copy_table(h, MemoryType::DEVICE, lbr, stream);
  stream.view().synchronize();
  // Room for the scratch (about 300 KiB here), not for a payload (about 600 KiB).
  auto hold = lbr.reserve(MemoryType::DEVICE, lbr.available(MemoryType::DEVICE) - 448 * KiB);
  try {
    (void)gpu::partition_and_pack(d.view(), std::vector<std::size_t>{0}, 2, lbr, stream);
    FAIL() << "packed with no room anywhere";
  } catch (const out_of_memory& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("packing (gpu::partition_and_pack): cannot reserve"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("of DEVICE, PINNED_HOST or HOST even after spilling"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("HOST: larger than its limit of 0 B"), std::string::npos) << msg;
  }
  stream.view().synchronize();
}
