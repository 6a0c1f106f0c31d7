#pragma once
/// @file page_cache.hpp
/// Page-cache helpers for cold and warm read measurements, without root.

#include <string>

namespace spillway::io {

/// The fraction (0..1) of `path`'s pages in the page cache (mincore); 1 for an empty file.
/// @throws spillway::io_error naming the file
double resident_fraction(const std::string& path);

/// Writes back and drops `path`'s pages from the page cache (fdatasync +
/// posix_fadvise(DONTNEED)); the kernel may keep pages that are mapped or dirty elsewhere.
/// @throws spillway::io_error naming the file
void drop_from_page_cache(const std::string& path);

}  // namespace spillway::io
