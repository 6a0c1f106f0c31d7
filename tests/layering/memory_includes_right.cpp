// Compiled with the memory module's include path only (tests/CMakeLists.txt): the memory
// module's own headers, and those of the modules it uses, are found.
#include <spillway/memory/buffer_resource.hpp>
