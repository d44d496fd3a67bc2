"""`dlzero doctor`: check a whole run directory and say what is wrong and how to repair it.

Every role writes atomically, so a healthy run only ever holds complete files; what doctor looks
for is what atomic writes cannot prevent: a bit that flips on disk after the fact, a file cut short
by a copy, a writer killed between two files that belong together, a file edited by hand, two
writers on one run. It reads everything and changes nothing: each problem comes with the command
that repairs it, since only a person knows whether, say, a shard is worth restoring from a backup
before it is deleted.

Checked: run.json and config.yaml; every shard against its sidecar (presence both ways, sha256,
game and move counts) and replayed for legality; leftover temp files of interrupted writes; every
model file loads (`.pt` checkpoints, `.onnx` exports and int8 files); best.json names an existing,
loadable model of its generation; the trainer's resume checkpoint loads; every CSV under metrics/
parses (a header, rows of its width, no repeated rows, no infinite number, metrics.csv's steps
increasing); loop.json and selfplay_state.json are sound (bounded JSON of the right shape).
"""

from __future__ import annotations

import csv
import math
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from dlzero.config import Config
from dlzero.data.atomic import TEMP_SUFFIX
from dlzero.data.hcpe3 import SHARD_SUFFIX, read_hcpe3, read_sidecar, sidecar_path
from dlzero.data.jsonfile import read_json
from dlzero.data.regular import read_regular_text, special_kind
from dlzero.errors import DataError, DlzeroError
from dlzero.rundir import GENERATION_GLOB, RunDir, generation_name
from dlzero.runfiles import CHECKPOINT_NAME, TRAIN_CSV

# A temp file younger than this may belong to a write in progress (a model file takes seconds).
TEMP_GRACE_S = 300.0


@dataclass
class Problem:
    """One thing wrong with the run: where (relative to the run), what, and how to repair it."""

    where: str
    what: str
    repair: str


@dataclass
class Report:
    """What a check of a run found; `checked` counts what was looked at, for the summary line."""

    root: Path
    problems: list[Problem] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.problems

    def add(self, path: Path, what: str, repair: str) -> None:
        self.problems.append(Problem(_rel(path, self.root), what, repair))

    def count(self, what: str, n: int = 1) -> None:
        self.checked[what] = self.checked.get(what, 0) + n

    def lines(self) -> list[str]:
        """The report as a person reads it: a summary, then each problem and its repair."""
        seen = ", ".join(f"{what} {n}" for what, n in self.checked.items()) or "nothing"
        out = [f"dlzero doctor: {self.root}", f"  checked: {seen}"]
        out += [f"  note: {note}" for note in self.notes]
        for p in self.problems:
            out += [f"  PROBLEM {p.where}: {p.what}", f"    repair: {p.repair}"]
        out.append("  healthy: nothing to repair" if self.healthy else f"  {len(self.problems)} problem(s) found")
        return out


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _q(*paths: Path) -> str:
    return " ".join(shlex.quote(str(p)) for p in paths)


def check_run(root: str | Path) -> Report:
    """Check the run at `root`; a folder that is not a run at all is a DlzeroError (RunDirError)."""
    rd = RunDir(root)
    report = Report(rd.root)
    if not rd.info_path.is_file():
        RunDir.open(root)  # raises the RunDirError that says what a run directory is
    _check_info(rd, report)
    cfg = _check_config(rd, report)
    _check_shards(rd, report)
    _check_temp_files(rd, report)
    _check_models(rd, report)
    _check_best(rd, report)
    if cfg is not None:
        _check_trainer(rd, report, cfg)
    _check_csvs(rd, report)
    _check_state_files(rd, report)
    return report


def _check_info(rd: RunDir, report: Report) -> None:
    try:
        RunDir.open(rd.root)
        report.count(rd.info_path.name)
    except DlzeroError as exc:
        report.add(rd.info_path, str(exc), f"if this dlzero is older than the run's, upgrade it; else restore "
                   f"{rd.info_path.name} from a backup, or copy run.json of another run made by this dlzero")


def _check_config(rd: RunDir, report: Report) -> Config | None:
    try:
        cfg = rd.config()
        report.count(rd.config_path.name)
        return cfg
    except (DlzeroError, OSError) as exc:
        report.add(rd.config_path, str(exc), "restore it from a backup, or fix the key it names (every role reads "
                   "the run's settings from it)")
        return None


# ---------------------------------------------------------------- shards


def _check_shards(rd: RunDir, report: Report) -> None:
    unchecked = games = 0
    for folder in sorted(p for p in rd.data_dir.glob(GENERATION_GLOB) if p.is_dir()):
        for path in sorted(folder.glob(f"*{SHARD_SUFFIX}")):
            if path.name.startswith("."):
                continue
            report.count("shards")
            if not sidecar_path(path).is_file():
                report.add(path, "shard without a sidecar: its writer stopped between the shard and its sidecar "
                           "(or the sidecar was deleted); it is not listed, counted or trained on, and its "
                           "games were played again", f"rm {_q(path)}")
                continue
            try:
                side = read_sidecar(path)
                found = read_hcpe3(path, validate=True)  # checks the sha256 first when the sidecar has one
            except DlzeroError as exc:
                what = exc.reason if isinstance(exc, DataError) and exc.path == str(path) else str(exc)
                report.add(path, f"{what} (training skips this shard)",
                           f"restore the shard from a backup, or delete it and its sidecar: "
                           f"rm {_q(path, sidecar_path(path))}")
                continue
            games += len(found)
            unchecked += "sha256" not in side
            moves = sum(len(g.moves) for g in found)
            if (side.get("games"), side.get("moves")) != (len(found), moves):
                report.add(sidecar_path(path), f"says {side.get('games')} games and {side.get('moves')} moves, "
                           f"the shard holds {len(found)} and {moves}",
                           f"delete the shard and its sidecar (the counts of self-play and training rely on "
                           f"it): rm {_q(path, sidecar_path(path))}")
        for claim in sorted(folder.glob(f"*{SHARD_SUFFIX}.json")):
            shard = claim.with_suffix("")
            if not claim.name.startswith(".") and not shard.is_file() and special_kind(shard) is None:
                report.add(claim, "sidecar without its shard: it claims games that are not on disk (an older "
                           "dlzero wrote sidecars first, and a full disk or a kill between the two writes left "
                           "this one)", f"rm {_q(claim)}")
    report.count("games", games)
    if unchecked:
        report.notes.append(f"{unchecked} shard(s) were written before shards had checksums: checked for "
                            "structure and legality only")


def _check_temp_files(rd: RunDir, report: Report) -> None:
    now = time.time()
    for tmp in sorted(rd.root.rglob(f".*{TEMP_SUFFIX}")):
        try:
            age = now - tmp.stat().st_mtime
        except FileNotFoundError:  # a write in progress just finished
            continue
        if age >= TEMP_GRACE_S:
            report.add(tmp, f"temp file of a write interrupted {age / 60:.0f} min ago (a kill, a full disk); "
                       "no reader ever sees it", f"rm {_q(tmp)}")


# ---------------------------------------------------------------- models


def _check_models(rd: RunDir, report: Report) -> None:
    from dlzero.model.checkpoint import load_model_file

    for path in sorted(rd.models_dir.glob(f"{GENERATION_GLOB}.pt")):
        report.count("models")
        if _not_regular(report, path):
            continue
        try:
            _, meta = load_model_file(path)
        except DlzeroError as exc:
            report.add(path, str(exc), _model_repair(rd, path))
            continue
        if generation_name(meta.generation) != path.stem:
            report.add(path, f"holds generation {meta.generation}, its name says {path.stem}",
                       f"rename it to {generation_name(meta.generation)}.pt if that name is free, else move it "
                       f"out of the run: mv {_q(path)} <elsewhere>")
    for path in sorted(rd.models_dir.glob("*.onnx")):
        report.count("onnx files")
        if _not_regular(report, path):
            continue
        reason = _onnx_problem(path)
        if reason:
            report.add(path, f"cannot be read as ONNX: {reason}",
                       f"rm {_q(path)} (an int8 file is made again on demand; an export again by dlzero export)")


def _model_repair(rd: RunDir, path: Path) -> str:
    best = _best_generation(rd)
    if best is not None and path == rd.model_path(best):
        return (f"this is the best model: restore it from a backup, or point best.json at another generation "
                f"({_set_best_hint(rd)}) and move it out of the run")
    return f"restore it from a backup, or move it out of the run: mv {_q(path)} <elsewhere>"


def _best_generation(rd: RunDir) -> int | None:
    try:
        best = rd.best()
    except DlzeroError:
        return None
    return None if best is None else best.generation


def _set_best_hint(rd: RunDir) -> str:
    code = f"from dlzero.rundir import RunDir; RunDir({str(rd.root)!r}).set_best(N, 'repaired')"
    return f'python -c "{code}" with N a generation whose model loads'



def _onnx_problem(path: Path) -> str:
    import onnx

    try:
        onnx.checker.check_model(onnx.load(str(path), load_external_data=False))
    except Exception as exc:  # onnx raises DecodeError, ValidationError, OSError... for bad files
        return " ".join(str(exc).split())[:300] or type(exc).__name__
    return ""


def _check_best(rd: RunDir, report: Report) -> None:
    if not rd.best_path.is_file():
        if rd.generations():
            report.add(rd.best_path, "missing, but the run has models: self-play would start a new random "
                       "generation 0", _set_best_hint(rd))
        return
    report.count(rd.best_path.name)
    try:
        best = rd.best()
    except DlzeroError as exc:
        report.add(rd.best_path, str(exc), _set_best_hint(rd))
        return
    assert best is not None
    model = rd.root / best.model
    if not model.is_file():
        report.add(rd.best_path, f"names {best.model}, which does not exist", _set_best_hint(rd))
    elif model.resolve() != rd.model_path(best.generation).resolve():
        report.add(rd.best_path, f"says generation {best.generation} but names {best.model}", _set_best_hint(rd))


def _check_trainer(rd: RunDir, report: Report, cfg: Config) -> None:
    from dlzero.train.train_state import load_checkpoint

    path = rd.train_dir / CHECKPOINT_NAME
    if not path.is_file():
        return
    report.count("trainer checkpoint")
    try:
        load_checkpoint(path, cfg.model)
    except DlzeroError as exc:
        report.add(path, str(exc), f"move it away (the next generation then trains on from the best model): "
                   f"mv {_q(path)} <elsewhere>")


# ---------------------------------------------------------------- csv and json


def _check_csvs(rd: RunDir, report: Report) -> None:
    for path in sorted(rd.metrics_dir.glob("*.csv")):
        report.count("CSV files")
        if _not_regular(report, path):
            continue
        problem = _csv_problem(path)
        if problem:
            report.add(path, problem, f"edit the line it names out of the file, or delete the file (plots and "
                       f"the dashboard lose that history; {rd.train_csv.name} and {rd.ratings_csv.name} grow "
                       f"again): rm {_q(path)}")


def _csv_problem(path: Path) -> str:
    """The first thing wrong with a CSV log, or ""."""
    try:
        text = read_regular_text(path)
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text (byte {exc.start})"
    except OSError as exc:
        return f"cannot be read: {exc.strerror}"
    if not text.strip():
        return "empty (not even a header)"
    if not text.endswith("\n"):
        return "the last line is cut short (a write was interrupted)"
    try:
        rows = list(csv.reader(text.splitlines()))
    except csv.Error as exc:
        return f"not CSV: {exc}"
    header = rows[0]
    if len(set(header)) != len(header) or not all(header):
        return f"line 1 is not a header: {header}"
    seen: dict[tuple[str, ...], int] = {}
    last_step = None
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            return f"line {line} has {len(row)} fields, the header {len(header)}"
        if tuple(row) in seen:
            return f"line {line} repeats line {seen[tuple(row)]} (two writers on one run?)"
        infinite = next((i for i, cell in enumerate(row) if _infinite(cell)), None)
        if infinite is not None:  # the dashboard and the plots leave out what such a row is in
            return f"line {line}: column {header[infinite]} is {row[infinite]!r}, not a finite number"
        seen[tuple(row)] = line
        if path.name == TRAIN_CSV and "step" in header:
            step = _int(row[header.index("step")])
            if step is None or (last_step is not None and step <= last_step):
                return f"line {line}: step {row[header.index('step')]!r} does not follow step {last_step}"
            last_step = step
    return ""


def _infinite(cell: str) -> bool:
    """A cell that reads as a number but not a finite one (inf, -inf, 1e400); `nan` is how writers say "none"."""
    try:
        return math.isinf(float(cell))
    except ValueError:
        return False


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _check_state_files(rd: RunDir, report: Report) -> None:
    loop = _json_object(report, rd.loop_state_path)
    if loop is not None:
        problem = _loop_problem(rd, loop)
        if problem:
            report.add(rd.loop_state_path, problem,
                       f"fix the field it names, or delete the file: the loop then begins its next iteration "
                       f"with self-play, keeping every file already written: rm {_q(rd.loop_state_path)}")
    resign = _json_object(report, rd.selfplay_state_path)
    if resign is not None:
        from dlzero.selfplay.worker import resign_state_problem

        problem = resign_state_problem(resign)
        if problem:
            report.add(rd.selfplay_state_path, problem, f"rm {_q(rd.selfplay_state_path)} (self-play starts again "
                       "from selfplay.resign_threshold)")


def _json_object(report: Report, path: Path) -> dict | None:
    if _not_regular(report, path) or not path.is_file():
        return None
    report.count(path.name)
    try:
        data = read_json(path)
    except DataError as exc:
        report.add(path, exc.reason, f"rm {_q(path)} (it is made again from the defaults)")
        return None
    except OSError as exc:
        report.add(path, f"cannot be read: {exc.strerror}", f"rm {_q(path)} (it is made again from the defaults)")
        return None
    if not isinstance(data, dict):
        report.add(path, "not a JSON object", f"rm {_q(path)} (it is made again from the defaults)")
        return None
    return data


def _not_regular(report: Report, path: Path) -> bool:
    """Report `path` when it is a FIFO, a device, a symlink loop (anything but a regular file): opening a
    FIFO blocked doctor for ever, a link to /dev/zero read without end. Its checks are skipped."""
    kind = special_kind(path)
    if kind is None:
        return False
    report.add(path, f"{kind}, not a regular file: skipped",
               f"rm {_q(path)} (a run's files are all regular files dlzero wrote)")
    return True


def _loop_problem(rd: RunDir, loop: dict) -> str:
    from dlzero.loop import state_problem

    problem = state_problem(loop)
    if problem:
        return problem
    candidate = loop.get("candidate")
    if loop.get("phase") in ("gate", "rate"):
        if candidate is None:
            return f"phase {loop['phase']} has no candidate"
        if not rd.model_path(candidate).is_file():
            return f"phase {loop['phase']}: candidate generation {candidate} has no model file"
    return ""
