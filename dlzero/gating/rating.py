"""Anchored ratings of a run: its models play a fixed anchor pool, every game is kept, all are fitted.

Pairings: each rated model plays every anchor of `cfg.rate.anchors` (and every outside engine), and
neighbouring tree-less anchors (random, alphabeta:N, the engine anchors gpsshogi:..., fairy-stockfish:...,
usi:..., then the `rate.engines`, in the configured order) play each other so the anchors are tied
together even where no model reaches them. Every game counts (see the fit below): the anchors' Elos are
fitted again from the run's own games, never taken as fixed values (the ladder
measured once, docs/benchmarks/ladder.md, says where the rungs sit; a run's fit should agree within noise).
Engine processes start once per session and stay up across its pairings; they are closed when it ends,
also on Ctrl-C or an error. A pairing is topped up to
`cfg.rate.games` games: rating again plays only what is missing (raise `games` to add more), and a run
interrupted half-way loses at most the games in progress. Games come in colour-swapped pairs from the
rating suite (`rate.openings`, by default the shipped configs/openings/rating.txt, from which no teacher or
self-play game starts, so no model is rated on positions it trained on), continuing through the openings
where the pairing's earlier games stopped.

Storage, `runs/NAME/rating/`: one JSON file per batch of games of one pairing (written atomically after
every finished game), holding the players, the settings that define them (the models' playouts and the
search settings that choose their moves, the engines' `go`, the opening suite's `suite_tag`), and per
game colours, result, reason, start position and moves. The fit reads every file; a file that cannot be
read is reported by name and left out, the others still count. Games whose settings differ from the
current ones (another playout count or mate depth is another player, another suite other positions) are
left out and counted in the report. Batches from before the search settings were stored match on the
rest; those from before the suite was stored count as played from configs/openings/gate.txt, as they
were by default (so `rate.openings` naming gate.txt refits them, and rating.txt leaves them out).

The fit (`dlzero.gating.elo_fit.fit_connected`) gives an Elo only where informative pairings (not sweeps)
connect the players: `random` at 0 where it is connected, else the first anchor of `rate.anchors` (or
engine) in the component at 0; a player of no informative pairing gets no Elo, only its W-D-L.
`metrics/elo.csv` gets one row per player (`dlzero.runfiles.ELO_COLUMNS`: `relative_to` names the zero,
`prior_draws` the prior, and wins, draws, losses its record over all games), written atomically: the
dashboard and `progress.png` read it. `generation` is empty for
players that are not models of the run; `anchor` is 1 for members of the anchor pool (so `gen-0000`, when
it is an anchor, has generation 0 and anchor 1); `wall_seconds` is the time from the run's first model's
creation to this model's (checkpoint metadata, else file time), empty for non-models.
"""

from __future__ import annotations

import csv
import datetime as _dt
import hashlib
import io
import json
import logging
import re
import sys
import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import cshogi
from tqdm import tqdm

from dlzero.config import Config
from dlzero.data.atomic import atomic_write_text
from dlzero.errors import ConfigError
from dlzero.gate_modes import gate_interval
from dlzero.gating.chain import is_promoted
from dlzero.gating.elo_fit import GameResult, RatingList, fit_connected
from dlzero.gating.match import MatchRecord, MatchResult, play_match
from dlzero.play import RANDOM
from dlzero.play.openings import GATE_SUITE, RATING_SUITE, load_openings, suite_tag
from dlzero.play.registry import PlayContext, Player, build_player
from dlzero.player_names import PlayerName, model_generation, parse_engine_entry, parse_player
from dlzero.rundir import RunDir, generation_name
from dlzero.runfiles import ELO_COLUMNS

log = logging.getLogger("dlzero.rating")

FILE_FORMAT = "dlzero-rating-games"
FILE_VERSION = 1
_WINNERS = {"black": cshogi.BLACK, "white": cshogi.WHITE, None: None}


@dataclass
class RatingBatch:
    """The games of one pairing played in one sitting (one file under rating/)."""

    players: tuple[str, str]
    settings: dict[str, Any]
    games: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps({"format": FILE_FORMAT, "version": FILE_VERSION, "players": list(self.players),
                           "settings": self.settings, "games": self.games}, indent=1) + "\n"


@dataclass
class RateReport:
    """What a rating session did and found."""

    ratings: RatingList | None
    played: int = 0
    problems: list[str] = field(default_factory=list)  # unreadable files, missing anchors (players without an
    # Elo are in `ratings.unrated`, and every report lists them with their W-D-L)
    left_out: int = 0  # stored games at other settings


def _check_batch(data: Any) -> RatingBatch:
    """A stored batch, validated; ValueError says what is wrong."""
    if not isinstance(data, dict) or data.get("format") != FILE_FORMAT:
        raise ValueError(f"not a {FILE_FORMAT} file")
    if data.get("version") != FILE_VERSION:
        raise ValueError(f"version {data.get('version')!r}, this dlzero reads version {FILE_VERSION}")
    players = data.get("players")
    if (not isinstance(players, list) or len(players) != 2 or not all(isinstance(p, str) for p in players)
            or players[0] == players[1]):
        raise ValueError(f"players must be two different names, got {players!r}")
    settings, games = data.get("settings"), data.get("games")
    if not isinstance(settings, dict) or not isinstance(games, list):
        raise ValueError("settings must be a mapping and games a list")
    for i, g in enumerate(games):
        if (not isinstance(g, dict) or {g.get("black"), g.get("white")} != set(players)
                or g.get("winner", "?") not in _WINNERS):
            raise ValueError(f"game {i} is malformed (black/white must be the two players, winner black, "
                             f"white or null)")
    return RatingBatch((players[0], players[1]), settings, games)


def pair_tally(batches: Iterable[tuple[Path, RatingBatch]], me: str, opponent: str) -> tuple[int, int, int, int, int]:
    """`me`'s wins, draws and losses against `opponent` over `batches` (`load_batches`' pairs; other pairings are
    skipped), and the games lost on time by `me` and by `opponent`: the one count every report of a pairing uses."""
    wins = draws = losses = my_flags = their_flags = 0
    for _, batch in batches:
        if set(batch.players) != {me, opponent}:
            continue
        for game in batch.games:
            side = "black" if game["black"] == me else "white"
            winner = game.get("winner")
            if winner is None:
                draws += 1
            elif winner == side:
                wins += 1
            else:
                losses += 1
            if game.get("reason") == "time" and winner is not None:
                my_flags += winner != side
                their_flags += winner == side
    return wins, draws, losses, my_flags, their_flags


def load_batches(rd: RunDir) -> tuple[list[tuple[Path, RatingBatch]], list[str]]:
    """Every readable batch file of the run (sorted by name) and one problem line per unreadable one."""
    return load_batch_folder(rd.rating_dir)


def load_batch_folder(folder: Path) -> tuple[list[tuple[Path, RatingBatch]], list[str]]:
    """Every readable batch file in `folder` (sorted by name; a run's rating/ or games kept elsewhere,
    such as an A/B's games between runs) and one problem line per unreadable one."""
    out, problems = [], []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            out.append((path, _check_batch(json.loads(path.read_text(encoding="utf-8")))))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
            problems.append(f"{path}: unreadable ({exc}); its games are left out")
    return out, problems


# search keys that change how fast a model plays, or only self-play, never the move a rating game gets
_NOT_PLAY = frozenset({"pipeline", "eval_streams", "nn_cache_size", "hash_mb", "node_limit",
                       "dirichlet_alpha", "dirichlet_epsilon"})


def rating_suite(cfg: Config) -> tuple[list[str], str]:
    """The lines rating games and `dlzero match` start from (`rate.openings`, empty: the shipped rating
    suite) and the suite's `suite_tag`."""
    path = cfg.rate.openings or RATING_SUITE
    lines = load_openings(path)
    return lines, suite_tag(lines, path)


@cache
def _unrecorded_suite() -> str:
    """The suite of batches stored before the suite was: the shipped gate suite, the default then."""
    return suite_tag(load_openings(GATE_SUITE), GATE_SUITE)


def settings_for(players: Iterable[str], cfg: Config, engines: dict[str, PlayerName], suite: str) -> dict[str, Any]:
    """What defines the games of a pairing beyond the players' names (games at other settings do not mix):
    the opening suite's tag `suite`, a model's playouts and the search settings that choose its moves
    (mate depths, PUCT constants, temperature, mate guard, ...), an engine's `go`."""
    settings: dict[str, Any] = {"openings": suite}
    for p in players:
        if model_generation(p) is not None:
            settings["playouts"] = cfg.rate.playouts
            settings["search"] = {k: v for k, v in asdict(cfg.search).items() if k not in _NOT_PLAY}
        if p in engines:
            settings["engine_go"] = cfg.rate.engine_go
    return settings


def same_settings(stored: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether a stored batch was played at the current settings. Batches stored before the search
    settings were recorded have no "search" entry: they match on the rest, as they always did; those
    stored before the suite was have no "openings" entry: they were played from the gate suite."""
    if "search" not in stored:
        current = {k: v for k, v in current.items() if k != "search"}
    if "openings" not in stored:
        stored = {**stored, "openings": _unrecorded_suite()}
    return stored == current


def _pair_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def _result(game: dict[str, Any]) -> GameResult:
    winner = game.get("winner")
    score_black = 0.5 if winner is None else (1.0 if winner == "black" else 0.0)
    return GameResult(game["black"], game["white"], score_black)


def fit_run(rd: RunDir, cfg: Config, engines: dict[str, PlayerName] | None = None) -> RateReport:
    """Fit one rating list to every stored game at the current settings; write metrics/elo.csv."""
    engines = engines if engines is not None else engines_from(cfg, [])
    _, suite = rating_suite(cfg)
    batches, problems = load_batches(rd)
    games, left_out = [], 0
    for _, batch in batches:
        if same_settings(batch.settings, settings_for(batch.players, cfg, engines, suite)):
            games.extend(_result(g) for g in batch.games)
        else:
            left_out += len(batch.games)
    if not games:
        return RateReport(None, problems=problems, left_out=left_out)
    ratings = fit_connected(games, pin=RANDOM, prior_draws=cfg.rate.prior_draws,
                            order=[*cfg.rate.anchors, *engines])
    write_elo_csv(rd, ratings, set(cfg.rate.anchors) | set(engines))
    return RateReport(ratings, problems=problems, left_out=left_out)


def _created(rd: RunDir, generation: int) -> _dt.datetime | None:
    """When a model was made: its checkpoint's `created`, else the file's modification time."""
    from dlzero.model.checkpoint import read_payload

    path = rd.model_path(generation)
    try:
        text = read_payload(path)["metadata"]["created"]
        stamp = _dt.datetime.fromisoformat(text)
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=_dt.timezone.utc)
    except Exception:  # noqa: BLE001 - any unreadable metadata falls back to the file time
        try:
            return _dt.datetime.fromtimestamp(path.stat().st_mtime, _dt.timezone.utc)
        except OSError:
            return None


def write_elo_csv(rd: RunDir, ratings: RatingList, anchors: set[str]) -> Path:
    """metrics/elo.csv (atomic): models by generation, then the other players, best first, those without
    an Elo (no informative pairing) last."""
    gens = rd.generations()
    start = _created(rd, gens[0]) if gens else None
    rows = []
    rated = ratings.by_player()
    for player in [*rated, *ratings.unrated]:
        r = rated.get(player)
        gen = model_generation(player)
        wall = ""
        if gen is not None and start is not None and (made := _created(rd, gen)) is not None:
            wall = f"{(made - start).total_seconds():.0f}"
        wins, draws, losses = ratings.record(player)
        rows.append({"player": player, "generation": "" if gen is None else gen,
                     "elo": "" if r is None else f"{r.elo:.1f}", "elo_low": "" if r is None else f"{r.elo_low:.1f}",
                     "elo_high": "" if r is None else f"{r.elo_high:.1f}",
                     "games": wins + draws + losses, "anchor": int(player in anchors),
                     "wall_seconds": wall, "relative_to": "" if r is None else r.reference,
                     "prior_draws": f"{ratings.prior_draws:g}", "wins": wins, "draws": draws, "losses": losses})
    rows.sort(key=lambda row: (row["generation"] == "", row["generation"] if row["generation"] != "" else 0,
                               row["elo"] == "", -float(row["elo"] or 0)))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=ELO_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    rd.metrics_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(rd.elo_csv, buf.getvalue())
    return rd.elo_csv


def promoted_generations(rd: RunDir, gate_mode: str = "sprt") -> list[int]:
    """Generations that were ever the best: generation 0, gates marked promoted in ratings.csv, best.json,
    and up to the current best those that `gate_mode` promotes without a match (all under `off`)."""
    have = set(rd.generations())
    gens = {0} & have
    if rd.ratings_csv.is_file():
        with rd.ratings_csv.open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                try:
                    if is_promoted(row):
                        gens.add(int(row.get("generation") or ""))
                except ValueError:
                    continue
    best = rd.best()
    if best is not None:
        gens.add(best.generation)
        interval = gate_interval(gate_mode)
        gens |= {g for g in have if g <= best.generation and (interval is None or g % interval)}
    return sorted(gens & have)


def select_generations(rd: RunDir, cfg: Config) -> list[int]:
    """The generations `dlzero rate` rates: promoted (or all), at most `rate.sample` evenly spread."""
    gens = promoted_generations(rd, cfg.gate.mode) if cfg.rate.models == "promoted" else rd.generations()
    k = cfg.rate.sample
    if k and len(gens) > k:
        idx = sorted({int(i * (len(gens) - 1) / max(k - 1, 1) + 0.5) for i in range(k)})  # half up
        gens = [gens[i] for i in idx]
    return gens


def engines_from(cfg: Config, extra: Iterable[str]) -> dict[str, PlayerName]:
    """The outside engines of `rate.engines` and `--engine` (`NAME=COMMAND`), by the NAME ratings know them by."""
    engines: dict[str, PlayerName] = {}
    for spec in [*cfg.rate.engines, *extra]:
        try:
            engine = parse_engine_entry(str(spec))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        engines[engine.label()] = engine
    return engines


def plan_pairings(anchors: list[str], engines: list[str], models: list[str]) -> list[tuple[str, str]]:
    """(player, opponent) pairs: the anchor ladder first, then each model against every anchor."""
    treeless = [a for a in anchors if model_generation(a) is None] + engines
    pool = list(anchors) + engines
    pairs: list[tuple[str, str]] = list(zip(treeless[1:], treeless[:-1], strict=True))
    rated = [a for a in anchors if model_generation(a) is not None] + [m for m in models if m not in pool]
    for m in rated:
        pairs += [(m, a) for a in pool if a != m]
    seen, out = set(), []
    for a, b in pairs:
        if _pair_key(a, b) not in seen:
            seen.add(_pair_key(a, b))
            out.append((a, b))
    return out


def _seed(a: str, b: str) -> int:
    return zlib.crc32(f"{a}|{b}".encode())


_NAME_MAX = 120  # the players' part of a batch file's name, in characters


def _batch_path(rd: RunDir, a: str, b: str, settings: dict[str, Any], start: int) -> Path:
    tag = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:6]
    safe = re.sub(r"[^A-Za-z0-9_.+=-]", "-", f"{a}--{b}")  # usi:PATH names hold slashes and spaces
    if len(safe) > _NAME_MAX:  # a file name has 255 bytes: two `usi:` engines with paths and options overran it
        safe = f"{safe[:_NAME_MAX - 9]}-{zlib.crc32(safe.encode()):08x}"  # (the players are in the file)
    path = rd.rating_dir / f"{safe}--{tag}--{start:05d}.json"
    n = 1
    while path.exists():
        n += 1
        path = rd.rating_dir / f"{safe}--{tag}--{start:05d}-{n}.json"
    return path


def stored_game(game: MatchRecord, a: str, b: str) -> dict[str, Any]:
    """A finished match game as a batch file keeps it (`a` and `b`: the players' names)."""
    winner = None if game.winner is None else ("black" if game.winner == cshogi.BLACK else "white")
    stored = {"game": game.index, "black": a if game.a_is_black else b, "white": b if game.a_is_black else a,
              "winner": winner, "reason": game.reason, "plies": len(game.moves), "start_sfen": game.start_sfen,
              "opening_plies": game.opening_plies, "moves": " ".join(cshogi.move_to_usi(m) for m in game.moves)}
    if game.move_ms:  # an outside engine's wall ms a move (null: the other side's), the late answer last on time
        stored["move_ms"] = game.move_ms
    return stored


class _Sides:
    """Opens players for matches: models once per session, engines (outside ones and engine anchors) once,
    kept alive across pairings, built-in anchors per batch. `players`: every name a pairing to play
    names, so an engine anchor whose program is missing is an error before the first game."""

    def __init__(self, rd: RunDir, cfg: Config, engines: dict[str, PlayerName], players: Iterable[str]) -> None:
        self.rd, self.cfg = rd, cfg
        self.engines: dict[str, Player] = {}
        try:
            for name, engine in engines.items():
                self.engines[name] = build_player(engine, PlayContext(cfg))
            for name in dict.fromkeys(players):
                if name not in self.engines and (parsed := parse_player(name)).is_engine:
                    self.engines[name] = build_player(parsed, PlayContext(cfg))
        except BaseException:
            self.close()
            raise
        self.models: dict[str, Any] = {}

    def get(self, name: str, seed: int) -> Any:
        if name in self.engines:
            return self.engines[name]
        if model_generation(name) is None:
            return build_player(name, PlayContext(self.cfg, seed, self.rd))
        if name not in self.models:
            self.models[name] = build_player(name, PlayContext(self.cfg, run=self.rd))
        return self.models[name]

    def release(self, keep: set[str]) -> None:
        """Close the models not in `keep` (a model is done once its pairings are played)."""
        for name in [n for n in self.models if n not in keep]:
            self.models.pop(name).close()

    def close(self) -> None:
        self.release(set())
        for engine in self.engines.values():
            engine.close()


def rate(rd: RunDir, cfg: Config, generations: Iterable[int], engine_specs: Iterable[str] = (),
         progress: bool = True) -> RateReport:
    """Top up every pairing of `generations` (and the anchor ladder), then refit all stored games."""
    engines = engines_from(cfg, engine_specs)
    anchors = list(cfg.rate.anchors)
    missing = [a for a in anchors if (g := model_generation(a)) is not None and not rd.model_path(g).is_file()]
    anchors = [a for a in anchors if a not in missing]
    problems = [f"anchor {a}: {rd.model_path(model_generation(a))} does not exist, left out" for a in missing]
    models = [generation_name(g) for g in generations if rd.model_path(g).is_file()]
    pairs = plan_pairings(anchors, list(engines), models)
    openings, suite = rating_suite(cfg)

    batches, _ = load_batches(rd)
    have: Counter[tuple[str, str]] = Counter()
    for _, batch in batches:
        if same_settings(batch.settings, settings_for(batch.players, cfg, engines, suite)):
            have[_pair_key(*batch.players)] += len(batch.games)
    todo = [(a, b, have[_pair_key(a, b)]) for a, b in pairs if have[_pair_key(a, b)] < cfg.rate.games]
    total = sum(cfg.rate.games - k for _, _, k in todo)
    bar = tqdm(total=total, desc="rating games", unit="game", file=sys.stderr, disable=not progress or not total)
    played = 0
    sides = _Sides(rd, cfg, engines, [x for a, b, _ in todo for x in (a, b)])
    try:
        for n, (a, b, start) in enumerate(todo):
            need = cfg.rate.games - start
            settings = settings_for((a, b), cfg, engines, suite)
            path = _batch_path(rd, a, b, settings, start)
            batch = RatingBatch((a, b), settings)
            seed = _seed(a, b)  # one shuffle of the opening suite per pairing; top-ups continue along it
            bar.set_postfix_str(f"{a} vs {b}")

            def on_game(game: MatchRecord, result: MatchResult, a=a, b=b, batch=batch, path=path) -> None:
                batch.games.append(stored_game(game, a, b))
                batch.games.sort(key=lambda g: g["game"])  # in match order, whatever order they ended in
                atomic_write_text(path, batch.to_json())
                bar.update(1)

            rd.rating_dir.mkdir(parents=True, exist_ok=True)
            result = play_match(sides.get(a, seed + start), sides.get(b, seed + start + 1), need, cfg,
                                playouts=cfg.rate.playouts, parallel=min(need, cfg.rate.parallel),
                                openings=openings, seed=seed, opening_offset=start // 2, names=(a, b),
                                on_game=on_game)
            played += result.n_games
            log.info("%s vs %s: +%d =%d -%d", a, b, result.wins, result.draws, result.losses)
            sides.release({x for pair in todo[n + 1:] for x in pair[:2]})
    finally:
        bar.close()
        sides.close()
    report = fit_run(rd, cfg, engines)
    report.played = played
    report.problems = problems + report.problems
    return report
