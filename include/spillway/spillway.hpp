#pragma once
/// @file spillway.hpp
/// Everything public in one include.

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/event.hpp>
#include <spillway/core/limit.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/options.hpp>
#include <spillway/core/stream.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/device_reader.hpp>
#include <spillway/io/device_writer.hpp>
#include <spillway/io/file_handle.hpp>
#include <spillway/io/thread_pool.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/memory/device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/memory_reservation.hpp>
#include <spillway/memory/memory_resource.hpp>
#include <spillway/memory/memory_step.hpp>
#include <spillway/memory/memory_type.hpp>
#include <spillway/memory/pinned_memory_resource.hpp>
#include <spillway/memory/resource_adaptor.hpp>
#include <spillway/memory/spill_files.hpp>
#include <spillway/memory/spill_injection_adaptor.hpp>
#include <spillway/memory/spill_manager.hpp>
#include <spillway/memory/spillable_store.hpp>
#include <spillway/memory/statistics_adaptor.hpp>
#include <spillway/stats/memory_profiler.hpp>
#include <spillway/stats/statistics.hpp>
