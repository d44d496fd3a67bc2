"""A real small disk for the full-disk tests: a tmpfs of a few kilobytes mounted in a private user and mount
namespace (`unshare --user --map-root-user --mount`), so no root is needed and no mount is left behind.
conftest's `tmpfs_ok` fixture skips a test where the kernel or the container refuses namespaces."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def namespaces_work(probe: Path) -> str:
    """"" when a tmpfs can be mounted in a private namespace here, else why not."""
    if shutil.which("unshare") is None:
        return "the unshare command (util-linux) is not installed"
    probe.mkdir(exist_ok=True)
    try:
        proc = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                               f"mount -t tmpfs -o size=64k tmpfs {probe}"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unshare failed: {exc}"
    return "" if proc.returncode == 0 else f"cannot mount a tmpfs in a user namespace: {proc.stderr.strip()}"


def run_on_tmpfs(disk: Path, size: str, script: str, *args: str, timeout: float = 240) -> dict:
    """Run `script` (Python) with argv [disk, *args] where `disk` is a fresh tmpfs of `size`, seen only by
    it and its children; the script prints one JSON line last, which is returned (the tmpfs is gone
    once it exits, so it must look at the disk itself)."""
    disk.mkdir(exist_ok=True)
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
         'mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"', "sh", size, str(disk),
         sys.executable, "-c", textwrap.dedent(script), str(disk), *args],
        capture_output=True, text=True, timeout=timeout, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# What is on a disk after the fact: every file under `root`, and each shard's and sidecar's view.
INVENTORY = """
def inventory(root):
    from dlzero.data.hcpe3 import read_hcpe3, read_sidecar
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    shards = [p for p in root.rglob("*.hcpe3")]
    return {"files": files,
            "shard_games": {str(p.relative_to(root)): len(read_hcpe3(p)) for p in shards},
            "claimed_games": {str(p.relative_to(root))[:-5]: read_sidecar(p.with_suffix(""))["games"]
                              for p in root.rglob("*.hcpe3.json")}}
"""


def fill_disk_script(body: str) -> str:
    """A script whose `fill(disk, keep)` leaves exactly `keep` free blocks of 4 KiB on the tmpfs."""
    return INVENTORY + textwrap.dedent("""
        import json, os, subprocess, sys
        from pathlib import Path

        def fill(disk, keep):
            st = os.statvfs(disk)
            with open(disk / "filler", "wb") as f:
                f.write(b"x" * (st.f_bavail - keep) * st.f_frsize)
            assert os.statvfs(disk).f_bavail == keep
    """) + textwrap.dedent(body)
