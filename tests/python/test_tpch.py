"""bench/tpch.py at scale 0.01 on 2 local ranks under a HOST limit of a quarter of
the data: the join and Q1 equal DuckDB's on the same files, spilling to disk on the way."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("duckdb")

TPCH = str(Path(__file__).resolve().parents[2] / "bench" / "tpch.py")


@pytest.mark.skipif(shutil.which("tpchgen-cli") is None, reason="no tpchgen-cli (pip)")
def test_the_join_and_q1_equal_duckdb_under_a_quarter_limit(tmp_path):
    out = subprocess.run([sys.executable, TPCH, "--scale", "0.01", "--ranks",
                          "2", "--host-limit", "25%", "--no-gpu", "--data", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"join: 60175 rows, checksum .* == DuckDB", out.stdout), out.stdout
    assert "Q1: 4 groups == DuckDB" in out.stdout, out.stdout
    # Each rank within its limit, and it had to spill to get there.
    for peak, limit, disk in re.findall(
            r"HOST ([0-9.]+) MiB of ([0-9.]+) MiB, DISK ([0-9.]+) MiB", out.stdout):
        assert float(peak) <= float(limit)
        assert float(disk) > 0


def test_bad_arguments_exit_2():
    out = subprocess.run([sys.executable, TPCH, "--ranks", "0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "--ranks" in out.stderr
