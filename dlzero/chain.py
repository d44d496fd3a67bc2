"""A loop longer than one machine's life: a run's best weights and its newest self-play in a folder git can carry.

A machine here lasts one session and its run folders do not survive it, so a chain of loop runs grows over
several machines: each session ends with `dlzero chain save --run R --to candidates/NAME`, which writes

    NAME/chain.json       the ledger: one link per session (machine, CPU-hours, games, positions, generations
                          trained and promoted, the sha256 of the weights it started from and ended with)
    NAME/best.pt          the run's best weights (what the next link starts from)
    NAME/replay/*.hcpe3.xz  the newest self-play shards up to `--games` games, xz-compressed, with their sidecars

and the next session starts a new run from it with `dlzero loop --config tiny --run R --init-from
candidates/NAME`: generation 0 is `best.pt`, and the replay shards are unpacked into the run's data/gen-0000/,
checked against their sidecars' sha256, and marked seen, so they fill the first generations' replay window
without counting as new games (a generation still waits for `selfplay.games_per_generation` games of its own).
The ledger's CPU-hours are the run's wall time in its timeline (the union of its phases) times the cores.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import lzma
import os
from pathlib import Path
from typing import Any

from dlzero.cpu import cpu_flags
from dlzero.data.atomic import atomic_write_bytes, atomic_write_text
from dlzero.data.hcpe3 import read_sidecar, shard_digest, sidecar_path
from dlzero.errors import RunDirError
from dlzero.rundir import RunDir
from dlzero.runfiles import SEEN_SHARDS

CHAIN_JSON = "chain.json"
WEIGHTS = "best.pt"
REPLAY_DIR = "replay"
FORMAT = "dlzero-chain"
IMPORTED_PREFIX = "chain-"  # shards unpacked from a chain: not this run's own self-play


def is_chain(path: str | Path) -> bool:
    """Whether `path` is a chain folder (it holds chain.json)."""
    return (Path(path) / CHAIN_JSON).is_file()


def read_ledger(chain: Path) -> dict[str, Any]:
    """The chain's ledger ({"format", "links": [...]}); an empty one for a new folder."""
    path = chain / CHAIN_JSON
    if not path.is_file():
        return {"format": FORMAT, "links": []}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{path}: not a chain ledger ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("links"), list):
        raise RunDirError(f"{path}: not a chain ledger (format {FORMAT!r} with a list of links)")
    return data


def _cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo ('' where there is none)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return ""


def weights_digest(path: Path) -> str:
    """sha256 over a model file's tensors (names and bytes, in name order), not its bytes: `--init-from` saves
    generation 0 again with its own metadata, so the file differs while the weights are the chain's."""
    import torch

    state = torch.load(path, map_location="cpu", weights_only=True)["state_dict"]
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode())
        digest.update(state[name].contiguous().numpy().tobytes())
    return digest.hexdigest()


def _own_shards(rd: RunDir) -> list[Path]:
    """The run's committed shards that its own self-play wrote (not those unpacked from a chain), newest first."""
    return [p for p in rd.shards() if not p.name.startswith(IMPORTED_PREFIX)]


def _busy_hours(rd: RunDir) -> float:
    """Hours during which some phase of the run was running: the union of its timeline's intervals."""
    import csv

    if not rd.timeline_csv.is_file():
        return 0.0
    spans = []
    with rd.timeline_csv.open(newline="") as fh:
        for row in csv.DictReader(fh):
            with contextlib.suppress(KeyError, ValueError):
                start = _dt.datetime.fromisoformat(row["start"]).timestamp()
                spans.append((start, start + float(row["seconds"])))
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total / 3600.0


def _promoted(rd: RunDir) -> list[int]:
    """Generations the run's gate promoted (metrics/ratings.csv rows with promoted = 1)."""
    import csv

    path = rd.metrics_dir / "ratings.csv"
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        return [int(r["generation"]) for r in csv.DictReader(fh) if r.get("promoted") == "1"]


def save_chain(rd: RunDir, chain: Path, games: int, cores: int | None = None) -> dict[str, Any]:
    """Write the run's link of `chain` (see the module docstring) and return it; every file is written atomically
    and the ledger last, so a chain interrupted mid-save still names weights and replay that match."""
    ledger = read_ledger(chain)
    best = rd.best_model_path()
    start_sha, best_sha = weights_digest(rd.model_path(0)), weights_digest(best)
    links = ledger["links"]
    if links and links[-1]["best_weights_sha256"] != start_sha and links[-1]["run"] != rd.root.name:
        raise RunDirError(f"{rd.root} did not start from {chain / WEIGHTS} (generation 0's weights {start_sha[:12]} "
                          f"is not the chain's {links[-1]['best_weights_sha256'][:12]}): it is another chain")
    chain.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(chain / WEIGHTS, best.read_bytes())

    replay = chain / REPLAY_DIR
    replay.mkdir(exist_ok=True)
    kept: set[str] = set()
    shards = _own_shards(rd)
    selfplay_games = positions = 0
    for shard in shards:
        side = read_sidecar(shard)
        selfplay_games += int(side.get("games", 0))
        positions += int(side.get("moves", 0))
    taken = 0
    for shard in shards:  # newest first
        n = int(read_sidecar(shard).get("games", 0))
        if taken + n > games:
            break
        taken += n
        name = f"{shard.parent.name}-{shard.name}"
        kept.update({f"{name}.xz", f"{name}.json"})
        if not (replay / f"{name}.xz").is_file():
            atomic_write_bytes(replay / f"{name}.xz", lzma.compress(shard.read_bytes(), preset=9))
        atomic_write_bytes(replay / f"{name}.json", sidecar_path(shard).read_bytes())
    for old in replay.iterdir():
        if old.name not in kept:
            old.unlink()

    cores = cores or len(os.sched_getaffinity(0))
    wall = _busy_hours(rd)
    previous = [link for link in links if link["run"] != rd.root.name]  # a second save of one run replaces its link
    link = {"saved": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "run": rd.root.name,
            "machine": {"cores": cores, "cpu": _cpu_model(), "flags": cpu_flags()},
            "start_weights_sha256": start_sha, "best_weights_sha256": best_sha, "best_generation": rd.best().generation,
            "generations_trained": max(0, (rd.latest_generation() or 0)), "promoted": _promoted(rd),
            "selfplay_games": selfplay_games, "positions": positions,
            "wall_hours": round(wall, 3), "cpu_hours": round(wall * cores, 3),
            "replay_games": taken,
            "cpu_hours_total": round(sum(x["cpu_hours"] for x in previous) + wall * cores, 3)}
    ledger["links"] = [*previous, link]
    atomic_write_text(chain / CHAIN_JSON, json.dumps(ledger, indent=1) + "\n")
    return link


def adopt_chain(rd: RunDir, chain: Path) -> int:
    """Unpack the chain's replay shards into the new run's data/gen-0000/ (sha256 checked) and mark them seen;
    returns the games unpacked. The weights are generation 0's business (`--init-from`)."""
    read_ledger(chain)  # a damaged ledger stops here, before anything is written
    target = rd.data_dir_for(0)
    names: list[str] = []
    games = 0
    for packed in sorted((chain / REPLAY_DIR).glob("*.xz")):
        stem = packed.name.removesuffix(".xz")
        side_file = packed.with_name(f"{stem}.json")
        try:
            data = lzma.decompress(packed.read_bytes())
            side = json.loads(side_file.read_text(encoding="utf-8"))
        except (OSError, lzma.LZMAError, ValueError) as exc:
            raise RunDirError(f"{packed}: cannot be unpacked ({exc}); delete it and its .json, or the chain") from None
        if side.get("sha256") != shard_digest(data):
            raise RunDirError(f"{packed}: its bytes do not match the sha256 of {side_file.name}")
        shard = target / f"{IMPORTED_PREFIX}{stem}"
        atomic_write_bytes(shard, data)
        atomic_write_bytes(sidecar_path(shard), side_file.read_bytes())  # the sidecar commits the shard
        names.append(shard.relative_to(rd.data_dir).as_posix())
        games += int(side.get("games", 0))
    seen_path = rd.train_dir / SEEN_SHARDS
    seen = json.loads(seen_path.read_text()) if seen_path.is_file() else []
    atomic_write_text(seen_path, json.dumps(sorted(set(seen) | set(names)), indent=0) + "\n")
    return games
