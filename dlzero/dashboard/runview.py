"""Everything the page shows about a run, read from its directory (see `dlzero.rundir` for the layout).

`RunView.state()` is one JSON-able dict: run info, strength (anchored Elo from `metrics/elo.csv`, or
until that exists the chained gate results of `metrics/ratings.csv`), training rows
(`metrics/metrics.csv`), self-play statistics per generation (from the hcpe3 shards and their
sidecars), the models table, the latest finished self-play game and the list of gating games,
plus `warnings` for every file that could not be read. It never writes, and never creates a
folder: `RunDir.open` would, so only `RunDir`'s path attributes are used.
"""

from __future__ import annotations

import datetime as _dt
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlzero.config import read_yaml
from dlzero.dashboard.files import FileCache, Warnings, number, parse_csv, parse_json
from dlzero.dashboard.replay import Replay, csa_replay, selfplay_replay
from dlzero.data.hcpe3 import BLACK_WIN, FLAG_MAX_MOVES, RESULT_DRAW, SHARD_SUFFIX, read_hcpe3, read_sidecar
from dlzero.data.regular import special_kind
from dlzero.errors import DataError, DlzeroError, RunDirError
from dlzero.gating.chain import Gate, gate_chain, is_promoted
from dlzero.gating.elo_fit import main_reference, scale_label
from dlzero.progress.timeline import read_rows as read_timeline
from dlzero.progress.timeline import shares
from dlzero.rundir import RunDir, generation_name
from dlzero.runfiles import ELO_REQUIRED, RATINGS_COLUMNS, TIMELINE_COLUMNS, VALIDATION_COLUMNS, VALIDATION_FIGURES

# the columns of metrics.csv (runfiles.TRAIN_COLUMNS) the training charts draw: a file begun by an older
# dlzero keeps its header, so only these are required
TRAIN_CHART = ("step", "generation", "policy_loss", "value_loss", "lr", "samples_per_s")
_GEN_NAME = re.compile(r"gen-(\d{4,})")
MAX_GATING_GAMES = 500  # newest first; older ones stay on disk, the list just gets long
_GEN_DIR = re.compile(r"gen-(\d{4,})$")
_SESSION_START = re.compile(r"-(\d{8}T\d{6})-[0-9a-f]+-\d{5}$")


@dataclass
class ShardStats:
    """What one hcpe3 shard contributes to its generation's statistics."""

    games: int
    plies: int
    targets: int  # plies searched fully (they carry visit counts)
    black_wins: int
    draws: int
    max_moves: int
    mtime: float
    session: str  # the writer's name stem: shards of one writer share it
    session_start: float | None  # from the shard's name: when its writer started


def _parse_time(text: str) -> float | None:
    try:
        stamp = _dt.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=_dt.timezone.utc)
    return stamp.timestamp()


class RunView:
    """Read-only view of one run directory; keep one per server so its caches last."""

    def __init__(self, root: str | Path) -> None:
        self.rd = RunDir(root)
        self.root = self.rd.root
        self.cache = FileCache()

    def check(self) -> None:
        """RunDirError unless `root` looks like a run (has run.json); the page handles everything else."""
        if not self.rd.info_path.is_file():
            raise RunDirError(f"'{self.root}' is not a dlzero run directory (no run.json); "
                              "start one with `dlzero loop --run` and point the dashboard at it")

    def rel(self, path: Path) -> str:
        return str(path.relative_to(self.root))

    # -- small files ----------------------------------------------------------------------------
    def _special(self, path: Path, warn: Warnings) -> bool:
        """Warn about `path` when it exists but is no regular file (a FIFO hung `/api/state`)."""
        kind = special_kind(path)
        if kind is not None:
            warn.add(self.rel(path), f"{kind}, not a regular file: skipped")
        return kind is not None

    def _json(self, path: Path, warn: Warnings) -> Any:
        if self._special(path, warn) or not path.is_file():
            return None
        try:
            return self.cache.get(path, "json", parse_json)
        except (OSError, DlzeroError) as exc:
            warn.add(self.rel(path), f"unreadable ({exc})")
            return None

    def _csv(self, path: Path, columns: tuple[str, ...], warn: Warnings) -> list[dict[str, str]]:
        if self._special(path, warn) or not path.is_file():
            return []
        try:
            return self.cache.get(path, f"csv:{columns}", lambda p: parse_csv(p, columns))
        except (OSError, ValueError) as exc:
            warn.add(self.rel(path), f"unreadable ({exc}); its chart is left out")
            return []

    # -- sections -------------------------------------------------------------------------------
    def ratings(self, warn: Warnings) -> list[dict[str, Any]]:
        """Gate results, one per gated candidate, in file order."""
        path = self.rd.ratings_csv
        out = []
        try:
            for n, row in enumerate(self._csv(path, RATINGS_COLUMNS, warn), start=2):
                out.append({
                    "generation": int(number(row["generation"], line=n, column="generation")),
                    "opponent": int(number(row["opponent"], line=n, column="opponent")),
                    **{k: int(number(row[k], line=n, column=k)) for k in ("games", "wins", "draws", "losses")},
                    **{k: number(row[k], line=n, column=k) for k in ("elo", "elo_low", "elo_high")},
                    "decision": row["decision"], "promoted": is_promoted(row),
                    "time": _parse_time(row["timestamp"]),
                })
        except (TypeError, ValueError) as exc:
            warn.add(self.rel(path), f"bad value ({exc}); gate results are left out")
            return []
        return out

    def elo(self, warn: Warnings) -> list[dict[str, Any]] | None:
        """Anchored ratings (players and anchors), or None while metrics/elo.csv does not exist. `elo` is
        None for a player of no informative pairing; `relative_to` is the zero of its scale and
        `prior_draws` the fit's prior (a file from before they were written: random, None)."""
        path = self.rd.elo_csv
        if not path.is_file():
            return None
        rows = []
        try:
            for n, row in enumerate(self._csv(path, ELO_REQUIRED, warn), start=2):
                gen = number(row["generation"], line=n, column="generation", allow_empty=True)
                rows.append({
                    "player": row["player"], "generation": None if gen is None else int(gen),
                    "elo": number(row["elo"], line=n, column="elo", allow_empty=True),
                    "relative_to": row["relative_to"].strip() if "relative_to" in row else "random",
                    "prior_draws": number(row.get("prior_draws"), line=n, column="prior_draws", allow_empty=True),
                    "low": number(row["elo_low"], line=n, column="elo_low", allow_empty=True),
                    "high": number(row["elo_high"], line=n, column="elo_high", allow_empty=True),
                    "games": int(number(row["games"], line=n, column="games", allow_empty=True) or 0),
                    "anchor": row["anchor"].strip() == "1",
                    "wall_seconds": number(row["wall_seconds"], line=n, column="wall_seconds", allow_empty=True),
                })
        except (TypeError, ValueError) as exc:
            warn.add(self.rel(path), f"bad value ({exc}); showing gate results instead")
            return None
        return rows

    def strength(self, ratings: list[dict], origin: float | None, warn: Warnings) -> dict[str, Any]:
        """Points for the strength charts: anchored Elo when anyone has one, else gate results chained from
        gen 0."""
        gate_of = {r["generation"]: r for r in ratings}

        def status(gen: int | None) -> str:
            if gen is None:
                return "anchor"
            if gen in gate_of:
                return "promoted" if gate_of[gen]["promoted"] else "rejected"
            return "initial" if gen == 0 else "ungated"

        anchored = self.elo(warn) or []
        rated = [r for r in anchored if r["elo"] is not None]
        if rated:  # one chart, one scale: the one most rated models are on; the others are named, not drawn
            zero = (main_reference(r["relative_to"] for r in rated if r["generation"] is not None)
                    or main_reference(r["relative_to"] for r in rated))
            on = [r for r in rated if r["relative_to"] == zero]
            points = [{**r, "status": status(r["generation"])} for r in on if r["generation"] is not None]
            points.sort(key=lambda p: p["generation"])
            anchors = [{"player": r["player"], "elo": r["elo"]} for r in on if r["generation"] is None]
            off = [r["player"] for r in anchored if r not in on]
            prior = next((r["prior_draws"] for r in rated if r["prior_draws"] is not None), None)
            return {"source": self.rd.elo_csv.name,
                    "label": f"{scale_label(zero or 'random', prior)} ({self.rel(self.rd.elo_csv)}), 95% intervals"
                             + (f"; not on this scale (no informative pairing with it): {', '.join(off)}"
                                if off else ""),
                    "points": points, "anchors": anchors}
        points = []
        if ratings:  # the chain starts at generation 0, the first best, rated 0
            points.append({"player": generation_name(0), "generation": 0, "elo": 0.0, "low": None, "high": None,
                           "games": 0, "anchor": False, "wall_seconds": 0.0 if origin is not None else None,
                           "status": "initial"})
        gates = [Gate(r["generation"], r["opponent"], r["elo"], r["elo_low"], r["elo_high"], r["promoted"])
                 for r in ratings]
        for r, place in zip(ratings, gate_chain(gates), strict=True):
            if place is None:
                warn.add(self.rel(self.rd.ratings_csv), f"generation {r['generation']} was gated against "
                         f"generation {r['opponent']}, which has no rating; left out of the chart")
                continue
            wall = r["time"] - origin if r["time"] is not None and origin is not None else None
            points.append({"player": generation_name(r["generation"]), "generation": r["generation"],
                           "elo": place.elo, "low": place.low, "high": place.high,
                           "games": r["games"], "anchor": False, "wall_seconds": wall,
                           "status": status(r["generation"])})
        return {"source": self.rd.ratings_csv.name,
                "label": f"gate results ({self.rel(self.rd.ratings_csv)}): each candidate's Elo is its opponent's "
                         "plus the gate match's difference; bars are that match's 95% interval",
                "points": points, "anchors": []}

    def training(self, warn: Warnings) -> list[dict[str, Any]]:
        path = self.rd.train_csv
        out = []
        try:
            for n, row in enumerate(self._csv(path, TRAIN_CHART, warn), start=2):
                out.append({k: number(row[k], line=n, column=k, allow_empty=True) for k in TRAIN_CHART})
        except ValueError as exc:
            warn.add(self.rel(path), f"bad value ({exc}); training charts are left out")
            return []
        return out

    def heldout(self, warn: Warnings) -> list[dict[str, Any]]:
        """Rows of metrics/validation.csv (train.validation), with the scored model's generation."""
        path = self.rd.validation_csv
        out = []
        try:
            for n, row in enumerate(self._csv(path, VALIDATION_COLUMNS, warn), start=2):
                gen = _GEN_NAME.fullmatch(row["model"] or "")
                out.append({"set": row["set"], "data": row["data"], "model": row["model"],
                            "generation": int(gen.group(1)) if gen else None,
                            **{k: number(row[k], line=n, column=k, allow_empty=True) for k in VALIDATION_FIGURES}})
        except ValueError as exc:
            warn.add(self.rel(path), f"bad value ({exc}); held-out charts are left out")
            return []
        return out

    def time_shares(self, warn: Warnings) -> dict[str, float]:
        """Share of the loop's wall time each phase ran (metrics/timeline.csv; empty before the loop ran).
        A row whose seconds are not a finite number is left out (read_timeline), with a warning."""
        path = self.rd.timeline_csv
        for n, row in enumerate(self._csv(path, TIMELINE_COLUMNS, warn), start=2):
            try:
                number(row["seconds"], line=n, column="seconds")
            except ValueError as exc:
                warn.add(self.rel(path), f"bad value ({exc}); that row is left out of the time shares")
        return shares(read_timeline(path))

    def _shard_stats(self, path: Path) -> ShardStats:
        games = read_hcpe3(path, validate=False)
        read_sidecar(path)  # a shard without a readable sidecar is not complete
        stem = path.name[: -len(SHARD_SUFFIX)]
        match = _SESSION_START.search(stem)
        start = None
        if match:
            try:
                start = time.mktime(time.strptime(match.group(1), "%Y%m%dT%H%M%S"))
            except ValueError:
                start = None
        return ShardStats(games=len(games), plies=sum(len(g.moves) for g in games),
                          targets=sum(sum(1 for m in g.moves if m.is_target) for g in games),
                          black_wins=sum(1 for g in games if g.winner == BLACK_WIN),
                          draws=sum(1 for g in games if g.winner == RESULT_DRAW),
                          max_moves=sum(1 for g in games if g.result & FLAG_MAX_MOVES),
                          mtime=path.stat().st_mtime, session=stem.rsplit("-", 1)[0], session_start=start)

    def shards(self, warn: Warnings) -> list[tuple[int, Path]]:
        """(generation, shard) for every shard, oldest first (temp files start with '.'); what is named like
        a shard but is no regular file (a FIFO hung the page) is a warning instead."""
        out = []
        if not self.rd.data_dir.is_dir():
            return out
        for d in self.rd.data_dir.iterdir():
            m = _GEN_DIR.match(d.name)
            if m and d.is_dir():
                out.extend((int(m.group(1)), p) for p in d.glob(f"*{SHARD_SUFFIX}")
                           if not p.name.startswith(".") and not self._special(p, warn))
        return sorted(out, key=lambda gp: (_mtime(gp[1]), gp[1].name))

    def selfplay(self, shards: list[tuple[int, Path]], cfg: dict, warn: Warnings) -> dict[str, Any]:
        """Per generation: games, length, sente win and draw rates, throughput; resignation checks."""
        per_gen: dict[int, list[ShardStats]] = {}
        for gen, path in shards:
            try:
                stats = self.cache.get(path, "shard", self._shard_stats)
            except (OSError, DlzeroError) as exc:
                warn.add(self.rel(path), f"corrupt shard left out of the statistics ({exc})")
                continue
            per_gen.setdefault(gen, []).append(stats)
        sp = cfg.get("selfplay", {}) if isinstance(cfg, dict) else {}
        playouts, cheap = sp.get("playouts"), sp.get("cheap_playouts")
        rows = []
        for gen in sorted(per_gen):
            items = per_gen[gen]
            games = sum(s.games for s in items)
            plies = sum(s.plies for s in items)
            targets = sum(s.targets for s in items)
            span = _busy_seconds(items)
            row = {"generation": gen, "shards": len(items), "games": games, "positions": plies,
                   "mean_length": plies / games if games else None,
                   "sente_win_rate": sum(s.black_wins for s in items) / games if games else None,
                   "draw_rate": sum(s.draws for s in items) / games if games else None,
                   "max_moves_rate": sum(s.max_moves for s in items) / games if games else None,
                   "games_per_hour": games * 3600 / span if span else None,
                   "positions_per_s": plies / span if span else None,
                   "playouts_per_s": None}
            if span and isinstance(playouts, int) and isinstance(cheap, int):
                row["playouts_per_s"] = (targets * playouts + (plies - targets) * cheap) / span
            rows.append(row)
        state = self._json(self.rd.selfplay_state_path, warn)
        resign = None
        if isinstance(state, dict) and "checked" in state:
            resign = {"threshold": state.get("resign_threshold"), "checked": state.get("checked"),
                      "false_positives": state.get("false_positives")}
        return {"generations": rows, "resign": resign}

    def models(self, ratings: list[dict], best: dict | None, warn: Warnings) -> list[dict[str, Any]]:
        gate_of = {r["generation"]: r for r in ratings}
        out = []
        for gen in self.rd.generations():
            path = self.rd.model_path(gen)
            row: dict[str, Any] = {"generation": gen, "file": self.rel(path), "name": path.stem}
            if not self._special(path, warn):
                try:
                    row.update(self.cache.get(path, "model", _model_meta))
                except (OSError, DlzeroError, RuntimeError) as exc:
                    warn.add(self.rel(path), f"model file unreadable ({exc})")
            gate = gate_of.get(gen)
            if gate:
                opponent = generation_name(gate["opponent"])
                row["gate"] = (f"{gate['wins']}-{gate['draws']}-{gate['losses']} vs {opponent}, "
                               f"{gate['elo']:+.0f} Elo, {gate['decision']}")
                row["status"] = "promoted" if gate["promoted"] else "rejected"
            else:
                row["gate"] = ""
                row["status"] = "initial" if gen == 0 else "not gated yet"
            row["best"] = bool(best and best.get("generation") == gen)
            out.append(row)
        return out

    def gating_games(self) -> list[dict[str, Any]]:
        """CSA records under games/, newest first (at most MAX_GATING_GAMES)."""
        if not self.rd.games_dir.is_dir():
            return []
        found = [p for p in self.rd.games_dir.rglob("*.csa") if not p.name.startswith(".")]
        found.sort(key=lambda p: (_mtime(p), str(p)), reverse=True)
        return [{"path": self.rel(p), "match": p.parent.name, "game": p.stem} for p in found[:MAX_GATING_GAMES]]

    # -- the page -------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        warn = Warnings()
        if not self.rd.info_path.is_file():
            warn.add(self.rel(self.rd.info_path), "missing: this folder is not (or no longer) a dlzero run")
        info = self._json(self.rd.info_path, warn) or {}
        best = self._json(self.rd.best_path, warn)
        loop = self._json(self.rd.loop_state_path, warn)
        cfg = {}
        if self.rd.config_path.is_file():
            try:
                cfg = self.cache.get(self.rd.config_path, "yaml", read_yaml)
            except (OSError, DlzeroError) as exc:
                warn.add(self.rel(self.rd.config_path), f"unreadable ({exc})")
        ratings = self.ratings(warn)
        models = self.models(ratings, best if isinstance(best, dict) else None, warn)
        origin = next((_parse_time(m.get("created", "")) for m in models if m["generation"] == 0), None)
        if origin is None:
            origin = _parse_time(info.get("created", "")) if isinstance(info, dict) else None
        shards = self.shards(warn)
        latest = None
        if shards:
            gen, path = shards[-1]
            latest = {"path": self.rel(path), "generation": gen, "key": f"{self.rel(path)}@{path.stat().st_mtime_ns}"}
        model_cfg = cfg.get("model", {}) if isinstance(cfg, dict) else {}
        return {
            "run": {"name": self.root.resolve().name, "path": str(self.root), "created": info.get("created"),
                    "dlzero_version": info.get("dlzero_version"), "best": best, "loop": loop,
                    "model": f"b{model_cfg.get('blocks', '?')}c{model_cfg.get('channels', '?')}"},
            "strength": self.strength(ratings, origin, warn),
            "training": self.training(warn),
            "heldout": self.heldout(warn),
            "time_shares": self.time_shares(warn),
            "selfplay": self.selfplay(shards, cfg, warn),
            "models": models,
            "latest_game": latest,
            "gating_games": self.gating_games(),
            "warnings": warn.items,
            "generated_at": time.time(),
        }

    # -- games ----------------------------------------------------------------------------------
    def resolve(self, rel: str, under: Path, suffix: str) -> Path:
        """A path the page asked for, refused unless it is a `suffix` file inside `under`."""
        try:
            path = (self.root / rel).resolve()
        except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
            raise DataError(rel, None, "a symlink loop, not a regular file") from None
        base = under.resolve()
        if path.suffix != suffix or not path.is_relative_to(base) or not path.is_file():
            raise DataError(rel, None, f"not a {suffix} file of this run")
        return path

    def selfplay_game(self, rel: str, index: int | None = None) -> Replay:
        """Game `index` of a shard (default: its last game, the newest one)."""
        path = self.resolve(rel, self.rd.data_dir, SHARD_SUFFIX)
        games = self.cache.get(path, "games", lambda p: read_hcpe3(p, validate=False))
        if not games:
            raise DataError(rel, None, "the shard holds no game")
        i = len(games) - 1 if index is None else index
        if not 0 <= i < len(games):
            raise DataError(rel, None, f"no game {i} (the shard holds {len(games)})")
        return selfplay_replay(games[i], f"{rel} game {i + 1} of {len(games)}")

    def gating_game(self, rel: str) -> Replay:
        path = self.resolve(rel, self.rd.games_dir, ".csa")
        return self.cache.get(path, "csa", lambda p: csa_replay(p, rel))


def _busy_seconds(items: list[ShardStats]) -> float | None:
    """Seconds during which some writer of these shards was running: the union of [start, last shard]
    per writer. Parallel workers overlap (counted once); the loop's training and gating between two
    self-play phases fall in no interval. None when no shard name carries a start time."""
    spans: dict[str, list[float]] = {}
    for s in items:
        if s.session_start is None:
            continue
        start, end = spans.setdefault(s.session, [s.session_start, s.session_start])
        spans[s.session][1] = max(end, s.mtime)
    busy, reach = 0.0, float("-inf")
    for start, end in sorted(spans.values()):
        if end > reach:
            busy += end - max(start, reach)
            reach = end
    return busy if busy > 0 else None


def _model_meta(path: Path) -> dict[str, Any]:
    """A model file's metadata without reading its weights (torch maps the file instead)."""
    import torch

    from dlzero.model.checkpoint import check_header

    try:
        payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # torch raises many kinds for a truncated or foreign file
        raise DataError(str(path), None, f"cannot be read as a model file ({type(exc).__name__})") from None
    cfg, meta = check_header(payload, path)
    return {"arch": f"b{cfg.blocks}c{cfg.channels}", "parent": meta.parent, "created": meta.created,
            "games": meta.games, "positions": meta.positions}


def _mtime(path: Path) -> float:
    """`path`'s mtime for sorting; 0 when it cannot be had (a symlink loop, a file removed meanwhile),
    so that one such name costs its own warning where it is read, not the whole page."""
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
