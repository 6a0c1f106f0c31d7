#pragma once
/// @file setting_by_name.hpp
/// One setting read or set by its SPILLWAY_* variable's name, its value as text parsed and
/// checked as the environment's would be: for callers that hold names, not types (Python,
/// configuration files). Every setting has this besides its typed setter in options.hpp.

#include <string>

namespace spillway::options {

/// Sets the setting of variable `var` (e.g. "SPILLWAY_MEMORY_WAIT_MS") from `text`.
/// @throws spillway::logic_error naming the variable when it is unknown or `text` is invalid
void set_by_name(const std::string& var, const std::string& text);

/// The current value of the setting of variable `var`, as spillway-settings prints it.
/// @throws spillway::logic_error when no setting has that variable
std::string get_by_name(const std::string& var);

}  // namespace spillway::options
