"""Ctrl-C in a long wait raises KeyboardInterrupt at once instead of hanging until the
communicator's timeout: a real SIGINT to a process waiting in a shuffle for a rank that never
comes."""

import signal
import subprocess
import sys
import time
from pathlib import Path


def test_sigint_ends_a_long_wait_with_keyboardinterrupt():
    script = Path(__file__).with_name("interrupt_wait.py")
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "waiting"
        time.sleep(1.0)  # well inside the wait
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, out + err
    assert "interrupted after" in out, out + err
    assert took < 5, f"{took:.1f} s from SIGINT to the end"
