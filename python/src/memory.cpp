// spillway.BufferResource: the tiers with their limits, from keyword arguments that take what
// the SPILLWAY_* variables take ("8GiB", "50%", "unlimited", or a number of bytes).
#include "bindings.hpp"

#include <spillway/core/limit.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/memory/spill_injection_adaptor.hpp>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>

#include <string>
#include <variant>
#include <vector>

namespace spillway::python {

namespace {

using LimitArg = std::optional<std::variant<std::string, std::size_t>>;

/// A limit from Python: None (the setting's value), bytes, or text as the variables take it.
void set_limit(BufferResourceConfig& c, MemoryType t, const LimitArg& arg, const char* name) {
  if (!arg) return;
  if (const auto* n = std::get_if<std::size_t>(&*arg)) {
    c.limits[index(t)] = Limit::bytes(*n);
  } else {
    c.limits[index(t)] = Limit::parse(std::get<std::string>(*arg), name);
  }
}

/// A method of a tier named as Python passes it ("HOST"), from one of a MemoryType.
template <typename F>
auto per_tier(F fn) {
  return [fn](const BufferResource& br, const std::string& tier) {
    return fn(br, parse_memory_type(tier));
  };
}

}  // namespace

void bind_memory(nb::module_& m) {
  nb::class_<BufferResource>(m, "BufferResource",
                             "The tiers of one rank (DEVICE, PINNED_HOST, HOST, DISK), each with "
                             "a hard limit; every byte spillway holds is paid for here.")
      .def(
          "__init__",
          [](BufferResource* self, const LimitArg& device_limit, const LimitArg& pinned_limit,
             const LimitArg& host_limit, const LimitArg& disk_limit,
             const std::optional<std::string>& spill_dir, bool use_gpu,
             std::optional<double> spill_injection) {
            auto c = BufferResourceConfig::from_options();
            set_limit(c, MemoryType::DEVICE, device_limit, "device_limit");
            set_limit(c, MemoryType::PINNED_HOST, pinned_limit, "pinned_limit");
            set_limit(c, MemoryType::HOST, host_limit, "host_limit");
            set_limit(c, MemoryType::DISK, disk_limit, "disk_limit");
            if (spill_dir) c.spill_dir = *spill_dir;
            c.use_gpu = use_gpu;
            if (spill_injection) {  // instead of SPILLWAY_SPILL_INJECT's
              std::erase_if(c.adaptors, [](const AdaptorSpec& a) {
                return a.name.starts_with("spill_injection");
              });
              if (*spill_injection > 0)
                c.adaptors.push_back(spill_injection_adaptor(*spill_injection));
            }
            new (self) BufferResource(c);
          },
          nb::kw_only(), nb::arg("device_limit") = nb::none(), nb::arg("pinned_limit") = nb::none(),
          nb::arg("host_limit") = nb::none(), nb::arg("disk_limit") = nb::none(),
          nb::arg("spill_dir") = nb::none(), nb::arg("use_gpu") = true,
          nb::arg("spill_injection") = nb::none(),
          "Limits take bytes, '4GiB', '80%' or 'unlimited'; None keeps the SPILLWAY_* setting. "
          "use_gpu=False leaves out the GPU tiers. spill_injection: the probability that an "
          "allocation spills its tier first (tests); None keeps SPILLWAY_SPILL_INJECT.")
      .def("limit", per_tier([](const BufferResource& br, MemoryType t) { return br.limit(t); }),
           nb::arg("tier"), "A tier's limit in bytes ('DEVICE', 'PINNED_HOST', 'HOST', 'DISK').")
      .def("used", per_tier([](const BufferResource& br, MemoryType t) { return br.used(t); }),
           nb::arg("tier"), "Bytes reserved or allocated in a tier now.")
      .def("peak", per_tier([](const BufferResource& br, MemoryType t) { return br.peak(t); }),
           nb::arg("tier"), "The most bytes the tier held at once.")
      .def("is_live",
           per_tier([](const BufferResource& br, MemoryType t) { return br.is_live(t); }),
           nb::arg("tier"), "Whether the tier exists here (no GPU tiers without a GPU).")
      .def("usage", &BufferResource::usage, "'DEVICE 1.00 GiB/2.00 GiB, ...'")
      .def(
          "statistics",
          [](BufferResource& br) {
            nb::dict d;
            for (const auto& [name, s] : br.statistics().snapshot()) {
              nb::dict e;
              e["count"] = s.count;
              e["bytes"] = s.bytes;
              e["seconds"] = s.seconds;
              d[name.c_str()] = e;
            }
            return d;
          },
          "Every statistic: {name: {'count', 'bytes', 'seconds'}}.")
      .def(
          "report", [](BufferResource& br) { return br.statistics().report(); },
          "The statistics as text, in RapidsMPF's format.");
}

}  // namespace spillway::python
