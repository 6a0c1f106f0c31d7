// The translation unit that builds the tests' precompiled header (tests/CMakeLists.txt); it
// links GoogleTest's main and has no tests.
