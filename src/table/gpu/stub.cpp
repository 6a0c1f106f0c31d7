// The GPU table functions in a build without CUDA: each says so.
#include <spillway/core/error.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/gpu_groupby.hpp>
#include <spillway/table/gpu_join.hpp>

namespace spillway::gpu {

namespace {

[[noreturn]] void no_cuda(const char* what) {
  SPILLWAY_FAIL(std::string("spillway::gpu::") + what +
                    ": spillway was built without CUDA (configure with -DSPILLWAY_CUDA=ON)",
                logic_error);
}

}  // namespace

void copy_batch(std::span<void* const>, std::span<const void* const>, std::span<const std::size_t>,
                BufferResource&, Stream) {
  no_cuda("copy_batch");
}
std::unique_ptr<Buffer> hash_rows(const TableView&, std::uint32_t, BufferResource&, Stream) {
  no_cuda("hash_rows");
}
PartitionedTable hash_partition(const TableView&, std::span<const std::size_t>, std::size_t,
                                BufferResource&, Stream, std::uint32_t) {
  no_cuda("hash_partition");
}
std::vector<PackedData> partition_and_pack(const TableView&, std::span<const std::size_t>,
                                           std::size_t, BufferResource&, Stream, std::uint32_t) {
  no_cuda("partition_and_pack");
}
PlacedPartitions place_partitions(Table&&, std::span<const std::size_t>, std::size_t,
                                  BufferResource&, Stream, std::uint32_t, std::uint32_t) {
  no_cuda("place_partitions");
}
struct PartitionPlan::Impl {};
PartitionPlan::PartitionPlan(const TableView&, std::span<const std::size_t>, std::size_t,
                             BufferResource&, Stream, std::uint32_t) {
  no_cuda("PartitionPlan");
}
PartitionPlan::~PartitionPlan() = default;
PartitionPlan::PartitionPlan(PartitionPlan&&) noexcept = default;
PartitionPlan& PartitionPlan::operator=(PartitionPlan&&) noexcept = default;
const std::vector<std::size_t>& PartitionPlan::offsets() const noexcept {
  static const std::vector<std::size_t> none;
  return none;
}
void PartitionPlan::place(std::size_t, std::size_t, std::span<std::byte* const>, Stream) {
  no_cuda("PartitionPlan::place");
}
std::vector<PackedData> split_and_pack(const TableView&, std::span<const std::size_t>,
                                       BufferResource&, Stream) {
  no_cuda("split_and_pack");
}
UnpackedTable unpack(PackedData, Stream) {
  no_cuda("unpack");
}

Table concat(std::span<const TableView>, BufferResource&, Stream) {
  no_cuda("concat");
}
Table unpack_and_concat(std::vector<PackedData>, BufferResource&, Stream) {
  no_cuda("unpack_and_concat");
}
std::optional<Table> try_unpack_and_concat(std::vector<PackedData>&, BufferResource&, Stream) {
  no_cuda("try_unpack_and_concat");
}
Table unpack_and_concat_or_host(std::vector<PackedData>, BufferResource&, Stream) {
  no_cuda("unpack_and_concat_or_host");
}
TableChecksum checksum(const TableView&, BufferResource&, Stream) {
  no_cuda("checksum");
}
void add_checksum(const TableView&, Buffer&, std::size_t, BufferResource&, Stream) {
  no_cuda("add_checksum");
}
Table random_int32_table(std::size_t, std::size_t, std::int32_t, std::int32_t, std::uint64_t,
                         BufferResource&, Stream) {
  no_cuda("random_int32_table");
}

JoinMaps join_maps(const TableView&, std::span<const std::size_t>, const TableView&,
                   std::span<const std::size_t>, JoinType, BufferResource&, Stream) {
  no_cuda("join_maps");
}
Table gather(const TableView&, const std::int32_t*, std::size_t, bool, BufferResource&, Stream) {
  no_cuda("gather");
}
Table hash_join(const TableView&, std::span<const std::size_t>, const TableView&,
                std::span<const std::size_t>, JoinType, BufferResource&, Stream) {
  no_cuda("hash_join");
}
void hash_join(const TableView&, std::span<const std::size_t>, const TableView&,
               std::span<const std::size_t>, JoinType, BufferResource&, Stream, std::size_t,
               const std::function<void(Table&&)>&) {
  no_cuda("hash_join");
}

Table groupby(const TableView&, std::span<const std::size_t>, std::span<const Aggregation>,
              BufferResource&, Stream) {
  no_cuda("groupby");
}
Column mean_of(const ColumnView&, const ColumnView&, BufferResource&, Stream) {
  no_cuda("mean_of");
}

}  // namespace spillway::gpu
