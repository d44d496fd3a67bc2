"""scripts/ladder.py refuses, before any game, a ladder it could not fit (no `random` rung)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_ladder_without_random_is_refused_before_any_game(tmp_path):
    work = tmp_path / "ladder"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "ladder.py"), "--rungs", "alphabeta:1,alphabeta:10",
                           "--extra", "alphabeta:1,alphabeta:10", "--work", str(work), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "'random' pinned at 0" in proc.stderr and "Traceback" not in proc.stderr
    assert not work.exists() and not (tmp_path / "out.csv").exists()  # nothing played, nothing written
