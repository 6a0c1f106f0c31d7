// Fixed-width columns in and out through DLPack (NumPy, PyTorch, CuPy, JAX). In: each array is
// copied into a spillway buffer of its side (a GPU array on the GPU, device to device; a host
// array into HOST memory), never through the other side. Out: a column is an ndarray viewing
// the table's own buffer, which it keeps alive, so `torch.from_dlpack` and `cupy.from_dlpack`
// take it without a copy.
#include "bindings.hpp"
#include "table.hpp"

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/table/data_type.hpp>

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace spillway::python {

namespace {

/// One-dimensional, contiguous, any dtype, any device (checked below).
using Array = nb::ndarray<nb::ndim<1>, nb::c_contig>;

TypeId type_of(const nb::dlpack::dtype& dt, const std::string& name) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(dt.code);
  if (dt.lanes == 1) {
    if (code == Code::Int || code == Code::UInt) {
      const bool s = code == Code::Int;
      switch (dt.bits) {
        case 8:
          return s ? TypeId::INT8 : TypeId::UINT8;
        case 16:
          return s ? TypeId::INT16 : TypeId::UINT16;
        case 32:
          return s ? TypeId::INT32 : TypeId::UINT32;
        case 64:
          return s ? TypeId::INT64 : TypeId::UINT64;
        default:
          break;
      }
    } else if (code == Code::Float && (dt.bits == 32 || dt.bits == 64)) {
      return dt.bits == 32 ? TypeId::FLOAT32 : TypeId::FLOAT64;
    } else if (code == Code::Bool && dt.bits == 8) {
      return TypeId::BOOL8;
    }
  }
  SPILLWAY_FAIL("column '" + name + "': DLPack dtype code " + std::to_string(dt.code) + ", " +
                    std::to_string(dt.bits) + " bits, " + std::to_string(dt.lanes) +
                    " lanes (want int8..int64, uint8..uint64, float32, float64 or bool)",
                logic_error);
}

nb::dlpack::dtype dtype_of(TypeId t) {
  using Code = nb::dlpack::dtype_code;
  nb::dlpack::dtype dt{};
  dt.lanes = 1;
  dt.bits = static_cast<std::uint8_t>(size_of(t) * 8);
  switch (t) {
    case TypeId::INT8:
    case TypeId::INT16:
    case TypeId::INT32:
    case TypeId::INT64:
    case TypeId::DATE32:  // DLPack has no temporal types: the stored integers
    case TypeId::TIMESTAMP_SECONDS:
    case TypeId::TIMESTAMP_MILLISECONDS:
    case TypeId::TIMESTAMP_MICROSECONDS:
    case TypeId::TIMESTAMP_NANOSECONDS:
      dt.code = static_cast<std::uint8_t>(Code::Int);
      break;
    case TypeId::UINT8:
    case TypeId::UINT16:
    case TypeId::UINT32:
    case TypeId::UINT64:
      dt.code = static_cast<std::uint8_t>(Code::UInt);
      break;
    case TypeId::FLOAT32:
    case TypeId::FLOAT64:
      dt.code = static_cast<std::uint8_t>(Code::Float);
      break;
    case TypeId::BOOL8:
      dt.code = static_cast<std::uint8_t>(Code::Bool);
      break;
    case TypeId::STRING:
    case TypeId::DECIMAL128:
      break;
  }
  return dt;
}

/// A copy of the arrays as a table with these names: GPU arrays on DEVICE, host ones on HOST.
Table table_from_arrays(const std::vector<Array>& arrays, const std::vector<std::string>& names,
                        BufferResource& br) {
  SPILLWAY_EXPECTS(arrays.size() == names.size(), std::to_string(arrays.size()) + " arrays for " +
                                                      std::to_string(names.size()) + " names");
  struct Source {
    const void* data;
    std::size_t bytes;
    TypeId type;
    bool gpu;
  };
  std::vector<Source> sources;
  for (std::size_t c = 0; c < arrays.size(); ++c) {
    const Array& a = arrays[c];
    const int dev = a.device_type();
    const bool gpu = dev == nb::device::cuda::value || dev == nb::device::cuda_managed::value;
    SPILLWAY_EXPECTS(gpu || dev == nb::device::cpu::value || dev == nb::device::cuda_host::value,
                     "column '" + names[c] + "': DLPack device type " + std::to_string(dev) +
                         " (want a CPU or CUDA array)");
    SPILLWAY_EXPECTS(
        !gpu || br.is_live(MemoryType::DEVICE),
        "column '" + names[c] + "' is a GPU array, and this BufferResource has no DEVICE tier");
    SPILLWAY_EXPECTS(a.shape(0) == arrays[0].shape(0),
                     "column '" + names[c] + "' has " + std::to_string(a.shape(0)) +
                         " rows, column '" + names[0] + "' " + std::to_string(arrays[0].shape(0)));
    const TypeId t = type_of(a.dtype(), names[c]);
    sources.push_back({a.data(), a.shape(0) * size_of(t), t, gpu});
  }
  const std::size_t rows = arrays.empty() ? 0 : arrays[0].shape(0);
  nb::gil_scoped_release nogil;
  std::vector<Column> columns;
  bool any_gpu = false;
  for (const Source& s : sources) {
    auto buf = br.allocate(s.gpu ? MemoryType::DEVICE : MemoryType::HOST, s.bytes, br.stream());
    if (s.gpu) {
      any_gpu = true;
      // DLPack's producer has made its work visible to the legacy default stream (a consumer
      // that passes no stream): copy there, once the allocation is ready.
      br.stream().synchronize();
      cuda::memcpy_async(buf->data(), s.data, s.bytes, Stream{});
    } else if (s.bytes > 0) {
      std::memcpy(buf->data(), s.data, s.bytes);
    }
    columns.emplace_back(s.type, rows, std::move(buf));
  }
  if (any_gpu) Stream{}.synchronize();
  return Table(std::move(columns), names);
}

/// Column `i` of `table` (the Python object `owner`) as an ndarray viewing its buffer.
nb::ndarray<nb::array_api, nb::ndim<1>> column_array(const Table& table, std::size_t i,
                                                     nb::handle owner) {
  SPILLWAY_EXPECTS(i < table.num_columns(), "column " + std::to_string(i) + " of a table with " +
                                                std::to_string(table.num_columns()) + " columns");
  const Column& col = table.column(i);
  const std::string& name = table.names()[i];
  SPILLWAY_EXPECTS(col.type() != TypeId::STRING,
                   "column '" + name +
                       "' holds strings: DLPack carries fixed-width columns "
                       "(use the Arrow interface)");
  SPILLWAY_EXPECTS(col.type() != TypeId::DECIMAL128,
                   "column '" + name +
                       "' holds decimal128 values: DLPack has no 128-bit decimals "
                       "(use the Arrow interface)");
  SPILLWAY_EXPECTS(col.null_mask() == nullptr,
                   "column '" + name +
                       "' has a validity mask: DLPack has no nulls (use the "
                       "Arrow interface)");
  const Buffer& data = col.data();
  SPILLWAY_EXPECTS(data.mem_type() != MemoryType::DISK,
                   "column '" + name + "' is on DISK: move the table to a memory tier first");
  data.wait();                                                           // (pending copies into it)
  if (data.mem_type() != MemoryType::HOST) data.stream().synchronize();  // and writes on its stream
  int device_type = nb::device::cpu::value;
  int device_id = 0;
  if (data.mem_type() == MemoryType::DEVICE) {
    device_type = nb::device::cuda::value;
    device_id = data.resource().device();
  } else if (data.mem_type() == MemoryType::PINNED_HOST) {
    device_type = nb::device::cuda_host::value;
  }
  const std::size_t shape[1] = {col.size()};
  return nb::ndarray<nb::array_api, nb::ndim<1>>(const_cast<std::byte*>(data.data()), 1, shape,
                                                 owner, nullptr, dtype_of(col.type()), device_type,
                                                 device_id);
}

/// NumPy's type string of a fixed-width type ("<i8", "|b1", ...), for __cuda_array_interface__.
std::string typestr(TypeId t) {
  const char* kind = "i";
  switch (t) {
    case TypeId::UINT8:
    case TypeId::UINT16:
    case TypeId::UINT32:
    case TypeId::UINT64:
      kind = "u";
      break;
    case TypeId::FLOAT32:
    case TypeId::FLOAT64:
      kind = "f";
      break;
    case TypeId::BOOL8:
      kind = "b";
      break;
    default:
      break;
  }
  return std::string(size_of(t) == 1 ? "|" : "<") + kind + std::to_string(size_of(t));
}

}  // namespace

void bind_dlpack(nb::module_& m) {
  m.def("table_from_arrays", &table_from_arrays, nb::arg("arrays"), nb::arg("names"), nb::arg("br"),
        nb::keep_alive<0, 3>(),
        "A spillway Table copied from 1-D contiguous DLPack arrays (GPU arrays into DEVICE "
        "memory, on the GPU; host arrays into HOST memory).");
  m.def(
      "column_array",
      [](nb::handle table, std::size_t i) {
        return column_array(nb::cast<const Table&>(table), i, table);
      },
      nb::arg("table"), nb::arg("i"),
      "Column i as an ndarray (DLPack) viewing the table's buffer; it keeps the table alive.");
  m.def(
      "column_interface",
      [](nb::handle table, std::size_t i) -> nb::object {
        const Table& t = nb::cast<const Table&>(table);
        (void)column_array(t, i, table);  // the same checks, and the same synchronization
        const Buffer& data = t.column(i).data();
        if (data.mem_type() != MemoryType::DEVICE) return nb::none();
        nb::dict d;
        d["shape"] = nb::make_tuple(t.column(i).size());
        d["typestr"] = typestr(t.column(i).type());
        d["data"] = nb::make_tuple(reinterpret_cast<std::uintptr_t>(data.data()), false);
        d["strides"] = nb::none();
        d["version"] = 3;
        d["stream"] = nb::none();  // (synchronized: nothing to wait for)
        return d;
      },
      nb::arg("table"), nb::arg("i"),
      "Column i's __cuda_array_interface__ (version 3) when it is on the GPU, else None.");
}

}  // namespace spillway::python
