// Compiled with the memory module's include path only (tests/CMakeLists.txt): a header of the
// shuffle module, which sits above memory, must not be found.
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/shuffle/shuffler.hpp>
