#!/usr/bin/env python3
"""Fails when the README's C++ example differs from examples/readme_example.cpp, the file that
the test command compiles and runs, so that the README never shows code that does not build."""
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parent.parent
readme = (root / "README.md").read_text()
example = (root / "examples" / "readme_example.cpp").read_text()
marker = "`examples/readme_example.cpp`"
at = readme.find(marker)
start = readme.find("```cpp\n", at) if at >= 0 else -1
end = readme.find("```\n", start + 7) if start >= 0 else -1
if at < 0 or start < 0 or end < 0:
    sys.exit("check-readme-example: README.md has no ```cpp block after " + marker)
if readme[start + len("```cpp\n"):end] != example:
    sys.exit("check-readme-example: README.md's C++ example differs from "
             "examples/readme_example.cpp; paste the file into the README")
print("README's C++ example is examples/readme_example.cpp")
