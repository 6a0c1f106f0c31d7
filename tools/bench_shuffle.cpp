// spillway-bench-shuffle: the all-to-all shuffle of random int32 tables between the ranks of a
// communicator, with RapidsMPF's bench_shuffle flags and output.
//
// Each rank makes -p input tables of -n/-p rows and -c int32 columns, partitions each into
// -o x nranks partitions (hashing column 0, or splitting at even row bounds with -g), inserts
// them into a Shuffler and extracts its own partitions, unpacking and concatenating each one.
// With one input table per rank (-p 1) the rank's input goes in as direct chunks
// (Shuffler::insert_finished with the data: with -g straight from the table's row ranges,
// without packing; hashed, the table itself, which the Shuffler partitions a column at a time
// while the first columns are sent, or with --pack-first the packed partitions), which land in
// each partition's final buffer, so extracting a partition copies nothing; --no-direct inserts
// packed chunks instead.
// Every run is validated: per partition, the order-independent checksums of what the ranks
// inserted and of what the owners extracted, summed over ranks, must agree.
//
// Timing: each run is timed from the barrier before the first insert to the last extracted
// partition (the Shuffler destroyed). The input is made inside the run, one table at a time
// (so a device limit below the input size still holds); the time to make it is measured and
// taken out (the transfers of earlier tables go on meanwhile, which -p 1 avoids). The inserted
// chunks' checksums are computed before the timed part (the input is deterministic); the
// extracted partitions' are added up on the GPU inside it (so they cost the figures a
// little). On the CPU path without a host limit, where the ranks share the cores, the input is
// made before the timed part and the extracted partitions are checksummed after it, so that
// no rank's untimed work slows another's timed work; with a host limit both happen inside,
// their time taken out. Local throughput: this rank's input bytes over its time; global: all
// ranks' bytes over the slowest rank's time.
//
// Peer: under -C mpi on host memory without a host limit, each run is followed by an
// MPI_Alltoallv of the same bytes (each rank's rows for each owner, its own included, in one
// host buffer), printed with its medians and the ratio of global throughputs (--no-baseline
// skips it).
#include <spillway/comm/bootstrap.hpp>
#include <spillway/comm/launch.hpp>
#include <spillway/comm/local.hpp>
#include <spillway/comm/mpi.hpp>
#include <spillway/comm/single.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/memory/memory_step.hpp>
#include <spillway/memory/spillable_store.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/partition.hpp>
#include <spillway/table/spillable_tables.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <iostream>
#include <vector>

#if SPILLWAY_HAS_MPI
#include "alltoallv.hpp"
#endif
#include "bench_shuffle_checksums.hpp"
#include "bench_shuffle_options.hpp"
#include "bench_shuffle_report.hpp"
#include "bench_shuffle_result.hpp"
#include "cli.hpp"
#include "collective.hpp"
#include "pcie.hpp"
#include "timeline.hpp"

using namespace spillway;
using spillway::bench::Options;
using spillway::bench::parse;
using spillway::bench::rank_config;
using spillway::bench::RunResult;
using Clock = std::chrono::steady_clock;

namespace {

/// One rank of the benchmark.
class Bench {
 public:
  Bench(const Options& o, Communicator& comm, BufferResource& br)
      : o_{o}, comm_{comm}, br_{br}, gpu_{br.is_live(MemoryType::DEVICE)}, coll_{comm} {}

  /// Runs the warm-ups and the runs; returns 0, or 1 when a run failed validation.
  int run_all() {
    const std::size_t total = o_.out_parts * static_cast<std::size_t>(comm_.nranks());
    const bool print = comm_.rank() == 0;
    if (print) report().setup();
    if (gpu_) {  // the copy rates of the statistics and the JSON have these beside them
      pcie_ = tools::pcie_ceilings_of_ranks(print, [&] { comm_.barrier(); });
      if (print) report().pcie_ceilings();
    }
    std::vector<std::vector<RunResult>> runs;  // [run][rank]
    std::string run_stats = "[";               // this rank's statistics of each timed run
    int failed = 0;
    for (int i = 0; i < o_.warmups + o_.runs; ++i) {
      const bool last = i + 1 == o_.warmups + o_.runs;
      const bool steps = o_.timeline && last;
      tools::Timeline timeline(steps, gpu_, br_.stream());
      const RunResult mine = run(static_cast<OpID>(i % 0xFF00), total, timeline, last);
      if (i >= o_.warmups) {
        run_stats +=
            (run_stats.size() > 1 ? "," : "") +
            Statistics::to_json(Statistics::since(timed_from_, br_.statistics().snapshot()));
      }
      if (steps) print_timeline(timeline);
      std::vector<RunResult> all;  // every rank's figures (not its checksums)
      for (const auto& b : coll_.allgather(mine.encode_figures())) {
        all.push_back(RunResult::decode_figures(b));
      }
      const std::string problem = validate(mine, total);
      if (!problem.empty()) ++failed;
      if (print) report().run(all, i < o_.warmups, problem);
      if (i >= o_.warmups) runs.push_back(std::move(all));
      if (const double s = run_baseline(mine, total); s > 0 && i >= o_.warmups) {
        baseline_.push_back(s);
      }
    }
    // Every rank's statistics, of the last run and of each timed run, for the JSON file.
    auto bytes = [](const std::string& s) { return std::vector<std::uint8_t>(s.begin(), s.end()); };
    const auto n = static_cast<std::size_t>(comm_.nranks());
    std::vector<std::vector<std::uint8_t>> stats(print ? n : 0);  // at rank 0 alone
    std::vector<std::vector<std::uint8_t>> per_run(print ? n : 0);
    coll_.gather(bytes(br_.statistics().to_json()), [&](std::vector<std::uint8_t>& b, Rank r) {
      stats[static_cast<std::size_t>(r)] = std::move(b);
    });
    coll_.gather(bytes(run_stats + "]"), [&](std::vector<std::uint8_t>& b, Rank r) {
      per_run[static_cast<std::size_t>(r)] = std::move(b);
    });
    if (print) {
      report().summary(runs);
      std::cout << br_.statistics().report("Statistics of rank 0 (of the last run):", o_.profile);
      if (!o_.json.empty()) report().json(runs, stats, per_run, failed);
    }
    if (failed > 0 && print) {
      std::cerr << "spillway-bench-shuffle: " << failed << " run(s) FAILED validation\n";
    }
    return failed > 0 ? 1 : 0;
  }

 private:
  /// Bytes per row: -c int32 columns.
  [[nodiscard]] std::size_t row_bytes() const { return o_.columns * sizeof(std::int32_t); }
  [[nodiscard]] double input_bytes() const { return double(o_.rows) * double(row_bytes()); }

  /// The peer of a -C mpi run on the CPU without a host limit (its buffers hold a copy of
  /// the data outside spillway's accounting): one MPI_Alltoallv of the bytes this run's input
  /// sent to each owner (its rows times the row width), own block included. Its seconds (the
  /// slowest rank's), or 0 where there is none. Collective.
  double run_baseline([[maybe_unused]] const RunResult& mine, [[maybe_unused]] std::size_t total) {
#if SPILLWAY_HAS_MPI
    if (o_.comm != "mpi" || gpu_ || o_.no_baseline) return 0;
    if (br_.limit(MemoryType::HOST) != unlimited_bytes) return 0;
    if (!a2a_) {
      std::vector<std::size_t> counts(static_cast<std::size_t>(comm_.nranks()), 0);
      for (std::size_t p = 0; p < total; ++p) {
        const Rank owner = partition_owner::round_robin(static_cast<PartID>(p), comm_.nranks());
        counts[static_cast<std::size_t>(owner)] += mine.in[p].rows * row_bytes();
      }
      a2a_ = std::make_unique<tools::Alltoallv>(counts);
      if (!a2a_->fits() && comm_.rank() == 0) {
        std::cout << "MPI_Alltoallv: skipped (these counts do not fit MPI's int counts)\n";
      }
    }
    return a2a_->fits() ? a2a_->run() : 0;
#else
    return 0;
#endif
  }

  /// On a limited GPU, the room kept free for this rank's own coming data before it packs
  /// input table `next` (of -p; -p when all are in), so that incoming chunks land on the host
  /// rather than being spilled later to make that room: its share of the tables still to
  /// pack (the partitions it keeps), plus the working set of one table and its packed copy,
  /// or of an output partition and its chunks while they are concatenated.
  void keep_room(std::size_t next) {
    if (!gpu_ || br_.limit(MemoryType::DEVICE) == unlimited_bytes) return;
    const double local = input_bytes();
    const double work = 2 * std::max(local / double(o_.in_parts), local / double(o_.out_parts));
    const double own_to_come =
        local / comm_.nranks() * double(o_.in_parts - next) / double(o_.in_parts);
    br_.set_headroom(MemoryType::DEVICE, static_cast<std::size_t>(own_to_come + work));
  }
  [[nodiscard]] MemoryType top() const {
    return gpu_ ? MemoryType::DEVICE : MemoryType::HOST;
  }

  Table make_input(std::size_t part) {
    const MemoryStep step("making the benchmark's input table");
    const std::size_t base = o_.rows / o_.in_parts;
    const std::size_t rows = base + (part + 1 == o_.in_parts ? o_.rows % o_.in_parts : 0);
    // RapidsMPF's values: uniform in [0, rows per rank].
    const auto max = static_cast<std::int32_t>(std::min<std::size_t>(o_.rows, INT32_MAX));
    const std::uint64_t seed = std::uint64_t(comm_.rank()) * 1000003 + part;
    if (gpu_) return gpu::random_int32_table(rows, o_.columns, 0, max, seed, br_, br_.stream());
    return random_int32_table(rows, o_.columns, 0, max, seed, br_);
  }

  /// Rows [a, b) of a table of fixed-width columns without nulls (the benchmark's input).
  static TableView slice(const TableView& t, std::size_t a, std::size_t b) {
    TableView out = t;
    for (ColumnView& c : out.columns) {
      SPILLWAY_EXPECTS(is_fixed_width(c.type) && !c.nullable(), "slice: int32 columns only");
      c.data = static_cast<const std::byte*>(c.data) + a * size_of(c.type);
      c.size = b - a;
    }
    return out;
  }

  /// Partitions `input` into its chunks and hands each to fn(pid, chunk). With -g, partition
  /// p is the p-th of `total` even row ranges, all packed in one pass; with --overlap each is
  /// packed on its own, the other ranks' first, so that their transfers overlap the packing of
  /// this rank's own (faster, but the input, its packed copy and the incoming chunks are then
  /// on the GPU together). Otherwise the rows are hashed on column 0, all in one pass.
  template <typename Fn>
  void for_each_chunk(const Table& input, std::size_t total, Fn&& fn) {
    const TableView v = input.view();
    if (o_.pre_partitioned && !o_.overlap) {
      std::vector<std::size_t> splits;
      for (std::size_t p = 1; p < total; ++p) splits.push_back(v.num_rows() * p / total);
      auto chunks =
          gpu_ ? gpu::split_and_pack(v, splits, br_, br_.stream()) : split_and_pack(v, splits, br_);
      for (std::size_t p = 0; p < total; ++p) fn(static_cast<PartID>(p), std::move(chunks[p]));
      return;
    }
    if (o_.pre_partitioned) {
      const int n = comm_.nranks();
      for (const bool own : {false, true}) {
        for (std::size_t p = 0; p < total; ++p) {
          if ((partition_owner::round_robin(static_cast<PartID>(p), n) == comm_.rank()) != own) {
            continue;
          }
          const TableView part = slice(v, v.num_rows() * p / total, v.num_rows() * (p + 1) / total);
          auto packed = gpu_ ? gpu::split_and_pack(part, {}, br_, br_.stream())
                             : split_and_pack(part, {}, br_);
          fn(static_cast<PartID>(p), std::move(packed[0]));
        }
      }
      return;
    }
    const std::size_t keys[] = {0};
    auto chunks = gpu_ ? gpu::partition_and_pack(v, keys, total, br_, br_.stream())
                       : partition_and_pack(v, keys, total, br_);
    for (std::size_t p = 0; p < total; ++p) fn(static_cast<PartID>(p), std::move(chunks[p]));
  }

  /// Whether the whole input goes in as direct chunks (Shuffler::insert_finished with the
  /// data): straight from the input table with -g, else the packed partitions. Only with one
  /// input table per rank, which is then this rank's whole input.
  [[nodiscard]] bool direct() const {
    return o_.in_parts == 1 && !o_.overlap && !o_.no_direct;
  }

  /// Every rank's --timeline of the run, printed by rank 0.
  void print_timeline(const tools::Timeline& timeline) {
    const std::string mine = timeline.report(comm_.rank());
    const auto all = coll_.allgather(std::vector<std::uint8_t>(mine.begin(), mine.end()));
    if (comm_.rank() != 0) return;
    std::cout << "Timeline of the last run (ms from its start):\n";
    for (const auto& r : all) std::cout << std::string(r.begin(), r.end());
  }

  /// One run. `last`: its statistics are the ones printed, so they are cleared where its
  /// timed part begins (after the untimed checksums of the input: on the GPU, a device
  /// allocation per inserted chunk that the run's own figures do not hold).
  RunResult run(OpID op, std::size_t total, tools::Timeline& timeline, bool last) {
    RunResult r;
    r.in.resize(total);
    r.out.resize(total);
    auto since = [](Clock::time_point t) {
      return std::chrono::duration<double>(Clock::now() - t).count();
    };
    // Untimed: what this rank will insert, per partition (the input is deterministic).
    for (std::size_t i = 0; i < o_.in_parts; ++i) {
      const Table input = make_input(i);
      for_each_chunk(input, total, [&](PartID pid, PackedData&& chunk) {
        br_.stream().synchronize();
        r.in[pid] += bench::checksum_of(chunk, gpu_, br_);
      });
    }
    // The extracted partitions' checksums: on the GPU they add up on the stream, inside the
    // timed region, and are read after it; on the CPU their time is taken out.
    std::unique_ptr<Buffer> sums;
    if (gpu_) {
      sums = br_.allocate(MemoryType::DEVICE, total * sizeof(TableChecksum), br_.stream());
      br_.stream().synchronize();
      cuda::memset_device(sums->data(), 0, sums->size());
    }
    // The output partitions, without -s: on the GPU kept as they are, spillable at once (they
    // go down before the shuffle's queues, which are read sooner), so that a rank's output may
    // be larger than its device limit; on the CPU under a limit, packed and spillable.
    SpillableTables kept(br_, 1);
    SpillableStore kept_packed(br_);
    std::vector<TableChecksum> on_host(total);  // GPU: partitions that were unpacked on the host
    // On the CPU the input tables are made before the timed part: ranks share the cores
    // there, so time taken out of one rank's run while it makes its input would still hold
    // the other ranks' and the progress threads' shuffle work (a run under a limit then
    // seemed faster than one without). Under a host limit they wait packed in a
    // SpillableStore, spilled to disk as the limit requires, and each comes back when the run
    // needs it (time counted: an out-of-core shuffle's input is somewhere too). Without a
    // limit the extracted partitions are also checksummed after the timed part. On the GPU
    // the input is made one table at a time inside the run (its time taken out), so that a
    // limit holds and the GPU's memory peak is that of streaming input.
    const bool unlimited = !gpu_ && br_.limit(MemoryType::HOST) == unlimited_bytes;
    std::vector<Table> inputs;
    SpillableStore waiting(br_);  // the CPU's input under a limit, packed
    std::vector<std::pair<std::vector<std::uint8_t>, SpillableStore::Key>> waiting_keys;
    if (unlimited) {
      for (std::size_t i = 0; i < o_.in_parts; ++i) inputs.push_back(make_input(i));
    } else if (!gpu_) {
      for (std::size_t i = 0; i < o_.in_parts; ++i) {
        PackedData p = std::move(split_and_pack(make_input(i).view(), {}, br_).front());
        waiting_keys.emplace_back(std::move(p.metadata), waiting.insert(std::move(p.payload)));
      }
    }
    br_.stream().synchronize();
    std::vector<std::pair<PartID, Table>> to_check;  // CPU, unlimited: summed after the run
    comm_.barrier();
    br_.reset_peak(MemoryType::HOST);
    if (gpu_) br_.reset_peak(MemoryType::DEVICE);
    if (last) br_.statistics().clear();
    timed_from_ = br_.statistics().snapshot();
    const auto t0 = Clock::now();
    timeline.start();
    {
      Shuffler shuffler(comm_, op, static_cast<PartID>(total), br_, partition_owner::round_robin);
      for (std::size_t i = 0; i < o_.in_parts; ++i) {
        keep_room(i + 1);
        Table input;
        if (unlimited) {
          input = std::move(inputs[i]);
        } else if (!gpu_) {
          auto& [metadata, key] = waiting_keys[i];
          input = to_table(unpack(PackedData{std::move(metadata), waiting.extract(key, top())}));
        } else {
          const auto t = Clock::now();
          input = make_input(i);
          br_.stream().synchronize();
          r.excluded += since(t);
          timeline.host("input " + std::to_string(i) + " made (time excluded)");
        }
        if (direct() && o_.pre_partitioned) {  // straight from the input, held until sent
          std::vector<std::size_t> offsets;
          for (std::size_t p = 0; p <= total; ++p) offsets.push_back(input.num_rows() * p / total);
          shuffler.insert_finished(std::make_shared<const Table>(std::move(input)), offsets);
          timeline.host("input " + std::to_string(i) + " inserted");
          continue;
        }
        if (direct() && !o_.pack_first) {  // partitioned by the Shuffler, column by column
          const std::size_t keys[] = {0};
          shuffler.insert_finished(std::move(input), keys);
          timeline.host("input " + std::to_string(i) + " inserted");
          continue;
        }
        // With --overlap each chunk goes in as soon as it is packed; otherwise all of them
        // after the input is freed (so its memory is back before incoming chunks take some).
        std::unordered_map<PartID, PackedData> batch;
        for_each_chunk(input, total, [&](PartID pid, PackedData&& chunk) {
          if (o_.overlap) {
            std::unordered_map<PartID, PackedData> one;
            one.emplace(pid, std::move(chunk));
            shuffler.insert(std::move(one));
          } else {
            batch.emplace(pid, std::move(chunk));
          }
        });
        timeline.gpu("input " + std::to_string(i) + " packed");
        input = Table{};  // consumed: RapidsMPF's bench releases each input after packing
        if (direct()) {
          shuffler.insert_finished(std::move(batch));
        } else if (!batch.empty()) {
          shuffler.insert(std::move(batch));
        }
        timeline.host("input " + std::to_string(i) + " inserted");
      }
      if (!direct()) shuffler.insert_finished();
      while (!shuffler.finished()) {
        const PartID pid = shuffler.wait_any(comm_.timeout());
        timeline.host("partition " + std::to_string(pid) + " complete");
        auto parts = shuffler.extract(pid);
        if (!gpu_ && !unlimited) {
          // Under a limit on the CPU: each chunk is checksummed as it is and, without -s, kept
          // packed in a spillable store instead of concatenated, so a rank's output may be
          // many times its limit (down to disk) with one chunk at a time in host memory.
          for (PackedData& chunk : parts) {
            if (!is_host_accessible(chunk.payload->mem_type())) {
              chunk.payload = br_.move(std::move(chunk.payload), MemoryType::HOST);
            }
            const auto t = Clock::now();
            r.out[pid] += bench::checksum_of(chunk, gpu_, br_);
            r.excluded += since(t);
            if (o_.discard) {
              chunk.payload.reset();  // (not held until the whole partition is summed)
            } else {
              kept_packed.insert(std::move(chunk.payload));
            }
          }
          timeline.host("partition " + std::to_string(pid) + " summed");
          continue;
        }
        // On the GPU where it fits (beside the output kept so far, which spills to make
        // room), else on the host.
        Table out = gpu_ ? gpu::unpack_and_concat_or_host(std::move(parts), br_, br_.stream())
                         : unpack_and_concat(std::move(parts), br_);
        timeline.gpu("partition " + std::to_string(pid) + " concatenated");
        if (!gpu_) {  // unlimited: summed after the timed part
          to_check.emplace_back(pid, std::move(out));
          continue;
        }
        if (out.column(0).data().mem_type() == MemoryType::DEVICE) {
          gpu::add_checksum(out.view(), *sums, pid, br_, br_.stream());
        } else {
          const auto t = Clock::now();
          on_host[pid] += spillway::checksum(out.view());
          r.excluded += since(t);
        }
        timeline.gpu("partition " + std::to_string(pid) + " summed");
        if (!o_.discard) kept.push(std::move(out));
      }
      timeline.host("all partitions extracted");
    }
    timeline.host("shuffler closed");
    br_.stream().synchronize();
    r.seconds = since(t0) - r.excluded;
    timeline.host("done");
    for (auto& [pid, out] : to_check) r.out[pid] += bench::checksum_of(out.view(), gpu_, br_);
    r.peak_device = gpu_ ? br_.peak(MemoryType::DEVICE) : 0;
    r.peak_host = br_.peak(MemoryType::HOST);
    if (gpu_) {
      r.count_bus_bytes(Statistics::since(timed_from_, br_.statistics().snapshot()));
      r.link = link_;
      cuda::memcpy_async(r.out.data(), sums->data(), sums->size(), br_.stream());
      br_.stream().synchronize();
      for (std::size_t p = 0; p < total; ++p) r.out[p] += on_host[p];
    }
    return r;
  }

  /// "" or what is wrong: per partition, the inserted and extracted checksums summed over all
  /// ranks, at rank 0, which tells every rank (collective). Rank 0 holds one rank's checksums
  /// at a time, so that many ranks cost n^2 bytes, not n^3 (512 local ranks took 8.4 GB).
  std::string validate(const RunResult& mine, std::size_t total) {
    std::vector<TableChecksum> in(total), out(total);
    coll_.gather(mine.encode_sums(), [&](const std::vector<std::uint8_t>& b, Rank /*from*/) {
      RunResult::add_sums(b, in, out);
    });
    std::string problem;
    for (std::size_t p = 0; p < total && comm_.rank() == 0 && problem.empty(); ++p) {
      if (in[p] != out[p]) {
        problem = "partition " + std::to_string(p) + ": inserted " + std::to_string(in[p].rows) +
                  " rows (checksum " + std::to_string(in[p].sum) + "), extracted " +
                  std::to_string(out[p].rows) + " rows (checksum " + std::to_string(out[p].sum) +
                  ")";
      }
    }
    const auto verdict = coll_.broadcast(std::vector<std::uint8_t>(problem.begin(), problem.end()));
    return {verdict.begin(), verdict.end()};
  }

  /// What prints the figures: the options, the ranks, the resource and what was measured.
  [[nodiscard]] bench::Report report() const {
    return {o_, comm_, br_, gpu_, direct(), input_bytes(), baseline_, pcie_};
  }

  const Options& o_;
  Communicator& comm_;
  BufferResource& br_;
  const bool gpu_;
  tools::Collective coll_;
  Statistics::Snapshot timed_from_;  // the statistics where the current run's timed part began
  std::vector<double> baseline_;     // MPI_Alltoallv's seconds per timed run (run_baseline)
  std::array<double, 6> pcie_{};     // GB/s: tools::pcie_ceilings_of_ranks
  const double link_ = static_cast<double>(tools::pcie_link_id(br_.device()));  // its link
#if SPILLWAY_HAS_MPI
  std::unique_ptr<tools::Alltoallv> a2a_;
#endif
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    if (o.comm == "mpi" && !mpi::is_compiled()) {
      std::cerr << "spillway-bench-shuffle: built without MPI\n";
      return 2;
    }
    LaunchOptions launch;
    launch.place_on_gpu = !o.cpu;
    launch.program = "spillway-bench-shuffle";
    return run_ranks(
        parse_rank_kind(o.comm), o.ranks, rank_config(o),
        [&](Communicator& comm, BufferResource& br) { return Bench(o, comm, br).run_all(); },
        launch);
  } catch (const std::exception& e) {
    std::cerr << "spillway-bench-shuffle: " << e.what() << "\n";
    return 1;
  }
}
