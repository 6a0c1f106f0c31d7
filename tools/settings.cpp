// spillway-settings: every SPILLWAY_* setting with its current value (after the environment),
// or with --markdown docs/SETTINGS.md's settings table, generated from the registry.
#include <spillway/core/error.hpp>
#include <spillway/core/options.hpp>

#include <cstring>
#include <iomanip>
#include <iostream>

int main(int argc, char** argv) {
  const bool markdown = argc == 2 && std::strcmp(argv[1], "--markdown") == 0;
  if (argc > 2 || (argc == 2 && !markdown)) {
    std::cerr << "usage: spillway-settings [--markdown]\n"
                 "  Prints every SPILLWAY_* setting and its current value; --markdown prints\n"
                 "  the settings table (variable, default, meaning) instead.\n";
    return 2;
  }
  try {
    if (markdown) {
      std::cout << spillway::options::markdown_table();
      return 0;
    }
    for (const auto& s : spillway::options::describe()) {
      std::cout << std::left << std::setw(28) << s.variable << " " << s.current << "\n";
    }
  } catch (const std::exception& e) {  // a SPILLWAY_* variable that does not parse
    std::cerr << "spillway-settings: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
