"""bench/tpch.py at scale 0.01 on 2 local ranks under a HOST limit of a quarter of the data:
Q1, Q4, Q9, Q18 and the partsupp x lineitem join, each a streaming network, equal DuckDB's
answers on the same files, every rank within its limit, and the joins spilling on the way."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("duckdb")

TPCH = str(Path(__file__).resolve().parents[2] / "bench" / "tpch.py")


@pytest.mark.skipif(shutil.which("tpchgen-cli") is None, reason="no tpchgen-cli (pip)")
def test_every_query_equals_duckdb_under_a_quarter_limit(tmp_path):
    out = subprocess.run([sys.executable, TPCH, "--query", "all", "--scale", "0.01", "--ranks",
                          "2", "--host-limit", "25%", "--data", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    for q in ("1", "4", "9", "18", "join"):
        assert re.search(rf"^query {q}: \d+ rows == DuckDB", out.stdout, re.M), out.stdout
    assert "actors of rank 0" in out.stdout and "x partsupp" in out.stdout
    peaks = re.findall(r"HOST ([0-9.]+) MiB of ([0-9.]+) MiB, DISK ([0-9.]+) MiB", out.stdout)
    assert len(peaks) == 10  # two ranks, five queries
    assert all(float(peak) <= float(limit) for peak, limit, _ in peaks)
    assert any(float(disk) > 0 for _, _, disk in peaks)  # Q9 and the join spill


def test_bad_arguments_exit_2():
    for args in (["--ranks", "0"], ["--query", "7"], ["--device-limit", "1GiB"]):
        out = subprocess.run([sys.executable, TPCH, *args], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 2, args
        assert args[0] in out.stderr, out.stderr
