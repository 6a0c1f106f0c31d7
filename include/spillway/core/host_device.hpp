#pragma once
/// @file host_device.hpp
/// SPILLWAY_HOST_DEVICE marks functions that compile for the host and, under nvcc, the GPU.

#if defined(__CUDACC__)
#define SPILLWAY_HOST_DEVICE __host__ __device__
#else
#define SPILLWAY_HOST_DEVICE
#endif
