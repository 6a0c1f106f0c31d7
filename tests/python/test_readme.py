"""The README's Python example runs as written."""

import ast
import re
from pathlib import Path


def test_the_readme_python_example_runs(capsys):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks, "no Python example in the README"
    exec(compile(blocks[0], "README.md", "exec"), {})
    per_rank = ast.literal_eval(capsys.readouterr().out.strip())
    assert len(per_rank) == 2  # a dict of {partition: rows} per rank
    assert sum(n for d in per_rank for n in d.values()) == 6  # every row once
