"""The README's Python example runs as written."""

import re
from pathlib import Path


def test_the_readme_python_example_runs(capsys):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks, "no Python example in the README"
    exec(compile(blocks[0], "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.startswith("[{") and out.count("{") == 3, out  # a dict per rank
