"""The USI loop: commands from a GUI on stdin, answers on stdout, one line each, flushed.

Threads: the main thread only reads and dispatches commands, and never waits on a search that
`stop` would not end at once: every command is read while a search runs. `go` starts one worker
thread that runs `Player.think` and then writes the single `bestmove` (or `checkmate`) line of that
`go`; `stop`, `ponderhit` and `isready` are answered while it thinks. `position`, `go`,
`usinewgame` and `Clear Hash` arriving mid-search first end it (its worker writes its `bestmove`,
as GUIs expect, the way YaneuraOu and dlshogi do) and then act, so there is never more than one
search and never two `bestmove` lines for one `go`. `quit` stops the search and gives it at most
QUIT_WAIT_S to answer. All output goes through one locked writer, so `info` lines from the worker
never interleave with replies from the main thread. Nothing but USI text goes to the output: logs
use stderr. Mate searches deeper than the engine can stop (`go mate`, RootMateDepth over 7, the
mate guard of MateGuardNodes) run in a helper process (`dlzero.search.mate`), so a stop ends them
at once too.

`go` as YaneuraOu answers it: a limit given with `infinite` (`go nodes 800 infinite`) ends the
search at the limit; `infinite` alone searches until `stop`. `go ponder` never answers before
`ponderhit` or `stop`; its clock starts at `ponderhit` (a node limit may end the search sooner,
the answer still waits). A `ponderhit` for a ponder search with neither a clock nor a node limit
would leave nothing to end it but `stop`, so it is ignored with an `info string`, as is one with no
ponder search running. `searchmoves` restricts the root to the listed moves.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn, TextIO

import cshogi

from dlzero.config import MATE_MOVE_MAX_PLIES, Config
from dlzero.engine.book import OwnBook
from dlzero.engine.layout import engine_inference, load_engine_model
from dlzero.engine.player import MAX_PLAYOUTS, Analysis, Player
from dlzero.engine.shipped import resolve_model
from dlzero.engine.strength import FULL as FULL_STRENGTH
from dlzero.engine.strength import level_playouts, weaken
from dlzero.engine.timeman import Limits
from dlzero.errors import DlzeroError
from dlzero.inference.base import Evaluator
from dlzero.position import parse_position
from dlzero.search import best_index, winrate_to_cp
from dlzero.search.guard import DFPN_MAX_PLIES
from dlzero.search.mate import DFPN_NODES_MAX, MateSolver
from dlzero.usi.options import (
    BY_NAME,
    MODEL_KEYS,
    get_key,
    option_lines,
    parse_value,
    tunables_manifest,
    with_option,
)

ENGINE_NAME = "dlzero"
ENGINE_AUTHOR = "dlzero developers"
_GO_INT_ARGS = {"btime", "wtime", "byoyomi", "binc", "winc", "movetime", "nodes"}
# Words that end a `searchmoves` list (UCI: the moves run to the next keyword or the line's end).
_GO_KEYWORDS = _GO_INT_ARGS | {"infinite", "ponder", "mate", "searchmoves", "depth"}
_USI_MOVE = re.compile(r"([1-9][a-i][1-9][a-i]\+?|[PLNSGBR]\*[1-9][a-i])")
_GO_INT = re.compile(r"-?[0-9]+")  # ASCII digits: str.isdigit() also takes '²', which int() refuses
MATE_NODES_PER_MS = 500
MATE_NODES_INFINITE = 5_000_000
# How long `quit` waits for a stopped search to write its `bestmove` before the engine exits
# regardless: match runners kill an engine still running a few seconds after `quit`.
QUIT_WAIT_S = 0.8


@dataclass(frozen=True)
class MateLimits:
    """What `go mate` asked for: df-pn nodes (cut to DFPN_NODES_MAX by `dlzero.search.mate`), seconds
    (None: no clock), and whether it is `go mate [infinite]`, which `position`, `go` and `usinewgame`
    stop rather than wait for."""

    nodes: int
    seconds: float | None = None
    infinite: bool = False


class UsiEngine:
    """State of one USI session: options, model, position and the current search."""

    def __init__(self, cfg: Config, model_path: str | None = None, out: TextIO | None = None,
                 loader: Callable[[str, Config], Evaluator] | None = None) -> None:
        self.cfg = cfg
        self.model_path = model_path
        self.ponder = False
        self._out = out or sys.stdout
        self._out_lock = threading.Lock()
        self._loader = loader or _load_evaluator
        self._evaluator: Evaluator | None = None
        self._loaded_as: tuple | None = None
        self._player: Player | None = None
        self._board: cshogi.Board | None = None
        self._worker: threading.Thread | None = None
        self._open_ended = False  # the current search waits for `stop` / `ponderhit`
        self._pondering = False  # the current search is a `go ponder` that a `ponderhit` may turn timed
        self._stop = threading.Event()
        self._ponderhit = threading.Event()
        self._mate = MateSolver()  # `go mate` and the Player's deep root mate searches, in a helper process
        self._book = OwnBook()  # USI_OwnBook: read at `isready`, consulted at the start of `go`
        self._strength_rng = random.Random()  # Strength below 20: the draw among the root's moves

    # -- I/O ------------------------------------------------------------------------------------
    def send(self, line: str) -> None:
        line = utf8_text(line)
        with self._out_lock:
            self._out.write(line + "\n")
            self._out.flush()

    def run(self, stream: TextIO) -> None:
        """Read commands until `quit` or end of input."""
        try:
            while True:
                line = stream.readline()
                if not line:
                    break
                if not self.handle(line.strip()):
                    return
            self._finish_search()
        finally:
            self._mate.close()  # the mate helper process ends with the engine, not at interpreter teardown

    def handle(self, line: str) -> bool:
        """Dispatch one command line; False after `quit`."""
        if not line:
            return True
        cmd, _, rest = line.partition(" ")
        rest = rest.strip()
        if cmd == "quit":
            self._finish_search(timeout=QUIT_WAIT_S)
            return False
        handler = {
            "usi": self._usi, "isready": self._isready, "setoption": self._setoption,
            "usinewgame": self._usinewgame, "position": self._position, "go": self._go,
            "stop": self._stop_cmd, "ponderhit": self._ponderhit_cmd, "gameover": self._gameover,
            "usi_tunables": self._usi_tunables,
        }.get(cmd)
        if handler is None:
            self.send(f"info string unknown command: {line}")
            return True
        try:
            handler(rest)
        except Exception as exc:  # a GUI session must survive any single bad command
            self.send(f"info string error: {cmd}: {exc}")
        return True

    # -- commands -------------------------------------------------------------------------------
    def _usi(self, _: str) -> None:
        self.send(f"id name {ENGINE_NAME}")
        self.send(f"id author {ENGINE_AUTHOR}")
        for line in option_lines(self.cfg, self.model_path, self.ponder):
            self.send(line)
        self.send("usiok")

    def _usi_tunables(self, _: str) -> None:
        """shogiarena's SPSA handshake: the search constants it may tune, one JSON line, then `usi_tunablesok`
        (an engine that stays silent costs every SPSA run shogiarena's handshake timeout, 120 s)."""
        self.send("info string shogiarena_tunables_json " + json.dumps(tunables_manifest(self.cfg)))
        self.send("usi_tunablesok")

    def _isready(self, _: str) -> None:
        try:
            if not self._thinking():
                self._ensure_model()
                self._book.load(self.cfg.book, self.send)
                if self.cfg.search.root_mate_depth > MATE_MOVE_MAX_PLIES or self.cfg.search.mate_guard_nodes:
                    self._mate.start()  # deep root mates and the mate guard need the helper: started before a clock
        except OSError as exc:  # no process could be started: said, and the GUI still gets its readyok
            self.send(f"info string error: {exc}")
        finally:
            self.send("readyok")

    def _setoption(self, rest: str) -> None:
        tokens = rest.split()
        if len(tokens) < 2 or tokens[0] != "name":
            self.send(f"info string error: setoption needs 'name X [value Y]', got '{rest}'")
            return
        if "value" in tokens:
            at = tokens.index("value")
            name, value = " ".join(tokens[1:at]), " ".join(tokens[at + 1:])
        else:
            name, value = " ".join(tokens[1:]), ""
        opt = BY_NAME.get(name.lower())
        if opt is None:
            self.send(f"info string error: unknown option '{name}'")
            return
        try:
            parsed = parse_value(opt, value)
            if opt.name == "ModelPath":
                self.model_path = None if parsed in ("", "<empty>") else parsed
            elif opt.name == "USI_Ponder":
                self.ponder = parsed
            elif opt.name == "Clear Hash":
                self._clear_hash()
            else:
                self.cfg = with_option(self.cfg, opt, parsed)
        except ValueError as exc:
            self.send(f"info string error: {exc}; {opt.name} keeps its value")

    def _clear_hash(self) -> None:
        """`Clear Hash` (YaneuraOu's button; shogiarena's SPSA presses it between games): drop the
        search tree and the evaluation cache, so the next search learns nothing from earlier ones."""
        self._finish_search()
        if self._player is not None:
            self._player.new_game()
            self._player.search.cache.clear()

    def _usinewgame(self, _: str) -> None:
        self._finish_search()
        if self._player is not None:
            self._player.new_game()

    def _position(self, rest: str) -> None:
        """A refused position (an illegal SFEN or move) is one `info string` error; the engine keeps
        the position it had, as YaneuraOu does, so a GUI's next `go` is still answered with a move."""
        self._finish_search()
        try:
            self._board = parse_position(rest)
        except DlzeroError as exc:
            self.send(f"info string error: {exc}; the position stays as it was")

    def _go(self, rest: str) -> None:
        self._finish_search()
        limits, mate = self._parse_go(rest.split(), self._board)
        self._stop.clear()
        self._ponderhit.clear()
        self._open_ended = limits.open_ended or limits.ponder or (mate is not None and mate.infinite)
        # a ponderhit turns the search timed only when something but `stop` bounds it after the hit
        self._pondering = mate is None and limits.ponder and bool(limits.timed or limits.playouts
                                                                     or self.cfg.usi.playouts)
        if self._board is None:
            self.send("info string error: no position")
            self._bestmove_or_checkmate(mate, None)
            return
        board = self._board.copy()
        if mate is None and self._book.play(board, limits, self.cfg.book, self.ponder, self.send):
            return  # answered from the opening book, without a search
        if mate is not None:
            target = lambda: self._send_checkmate(board, mate)  # noqa: E731
        else:
            player = self._ensure_player()
            if player is None:
                self._bestmove_or_checkmate(None, None)
                return
            player.set_position(board)
            if (cap := level_playouts(self.cfg.usi.strength)) is not None:  # a level for people: fewer playouts
                limits = dataclasses.replace(limits, playouts=min(limits.playouts or cap, cap))
            target = lambda: self._think(player, limits)  # noqa: E731
        self._worker = threading.Thread(target=target, name="usi-search", daemon=True)
        self._worker.start()

    def _stop_cmd(self, _: str) -> None:
        self._stop.set()
        if self._worker is not None:
            self._worker.join()
            self._worker = None

    def _ponderhit_cmd(self, _: str) -> None:
        """The pondered move was played: the clock of `go ponder` starts now. Without one (nor a node
        limit) the search goes on until `stop`, said in an `info string`; with no ponder search it is ignored."""
        if not self._thinking() or self._ponderhit.is_set() or not self._open_ended:
            self.send("info string ponderhit: no ponder search is running; ignored")
            return
        if not self._pondering:
            self.send("info string ponderhit: this search has neither a clock nor a node limit; "
                      "it searches until stop")
            return
        if self._player is not None:
            self._player.ponderhit()
        self._open_ended = False
        self._ponderhit.set()

    def _gameover(self, _: str) -> None:
        self._finish_search()

    # -- search ---------------------------------------------------------------------------------
    def _parse_go(self, tokens: list[str], board: cshogi.Board | None) -> tuple[Limits, MateLimits | None]:
        """Limits from `go` arguments, and the `go mate` limits (None: not a mate search).

        A bad argument is reported in an `info string` and left out; the rest of the command
        stands, so every `go` is answered. `go mate T` is a time in ms (USI) and a node budget
        scaled to it, `go mate nodes N` a node budget (shogiarena's `run mate --node-limit`),
        `go mate` / `go mate infinite` the largest budget; each ends early at `stop`. A number
        beyond what the engine can do is cut to it (said so): `go nodes` to MAX_PLAYOUTS, mate
        nodes to cshogi's C int (`dlzero.search.mate`).
        """
        limits = Limits()
        mate: MateLimits | None = None
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if tok in ("infinite", "ponder"):
                setattr(limits, tok, True)
            elif tok == "mate":
                if nxt == "nodes" and i + 2 < len(tokens) and _GO_INT.fullmatch(tokens[i + 2]):
                    mate = MateLimits(int(tokens[i + 2]))
                    if mate.nodes > DFPN_NODES_MAX:
                        self.send(f"info string go mate nodes {tokens[i + 2]} is more than df-pn takes; "
                                  f"searching {DFPN_NODES_MAX}")
                    i += 2
                elif nxt is not None and _GO_INT.fullmatch(nxt) and int(nxt) > 0:
                    mate = MateLimits(MATE_NODES_PER_MS * int(nxt), int(nxt) / 1000.0)
                    i += 1
                else:
                    mate = MateLimits(MATE_NODES_INFINITE, infinite=True)
                    if nxt == "infinite" or (nxt is not None and _GO_INT.fullmatch(nxt)):
                        i += 1
            elif tok == "searchmoves":
                end = i + 1
                while end < len(tokens) and tokens[end] not in _GO_KEYWORDS:
                    end += 1
                limits.searchmoves = self._searchmoves(tokens[i + 1:end], board)
                i = end - 1
            elif tok == "depth":
                self.send("info string go depth is not supported (a tree search has no fixed depth): ignored")
                if nxt is not None and _GO_INT.fullmatch(nxt):
                    i += 1
            elif tok in _GO_INT_ARGS and i + 1 < len(tokens):
                value = tokens[i + 1]
                if _GO_INT.fullmatch(value):
                    number = max(int(value), 0)
                    if tok == "nodes" and number > MAX_PLAYOUTS:
                        self.send(f"info string go nodes {value} is more than a search takes; "
                                  f"searching {MAX_PLAYOUTS}")
                        number = MAX_PLAYOUTS
                    setattr(limits, "playouts" if tok == "nodes" else tok, number)
                else:
                    self.send(f"info string error: go {tok} needs an integer, got '{value}'")
                i += 1
            else:
                self.send(f"info string error: unknown go argument '{tok}'")
            i += 1
        return limits, mate

    def _searchmoves(self, texts: list[str], board: cshogi.Board | None) -> tuple[int, ...]:
        """The legal root moves among `texts`; each bad one named in an `info string` and left out.
        None legal: every move is searched (said so), as an empty list would leave nothing to play."""
        moves: list[int] = []
        for text in texts:
            if not _USI_MOVE.fullmatch(text):
                self.send(f"info string error: searchmoves: '{text}' is not a USI move; left out")
                continue
            if board is None:
                continue
            move = board.move_from_usi(text)
            if not move or not board.is_legal(move):
                self.send(f"info string error: searchmoves: '{text}' is not a legal move here; left out")
            elif move not in moves:
                moves.append(move)
        if board is not None and not moves:
            self.send("info string error: searchmoves lists no legal move; searching every move")
        return tuple(moves)

    def _think(self, player: Player, limits: Limits) -> None:
        interval = self.cfg.usi.pv_interval_ms
        multipv = self.cfg.usi.multipv
        on_info = (lambda a: self._send_info(a, player, multipv)) if interval > 0 else None
        result: Analysis | None = None
        try:
            result = player.think(limits, self._stop, on_info, interval or 500,
                                  on_note=lambda text: self.send(f"info string {text}"))
            if on_info is None or result.nodes == 0:
                self._send_info(result, player, multipv)
            if self.cfg.usi.strength < FULL_STRENGTH:
                chosen = weaken(result, self.cfg.usi.strength, self._strength_rng)
                if chosen.bestmove != result.bestmove:
                    self.send(f"info string Strength {self.cfg.usi.strength}: plays {chosen.bestmove}, not the "
                              f"search's {result.bestmove}")
                result = chosen
        except Exception as exc:  # the GUI still needs its bestmove
            self.send(f"info string error: search failed: {exc}")
        # `go ponder` and `go infinite` (with no limit beside it) may not answer before
        # `ponderhit`/`stop`, even when the rules settled the position at once.
        def waiting() -> bool:
            return limits.open_ended or (limits.ponder and not self._ponderhit.is_set())

        while waiting() and not self._stop.is_set():
            self._stop.wait(0.005)
        self._bestmove_or_checkmate(None, result)

    def _send_info(self, a: Analysis, player: Player, multipv: int) -> None:
        head = f"info nodes {a.nodes} nps {int(a.nps)} time {a.time_ms}"
        if a.bestmove == "win":
            self.send(f"{head} score mate + string declaration win")
            return
        visited = [m for m in a.moves[:multipv] if m.visits > 0 or m.proven is not None]
        lines = visited if multipv > 1 and visited else [None]
        for k, stat in enumerate(lines, start=1):
            if stat is None or k == 1:
                pv, score = a.pv, (f"mate {a.mate}" if a.mate is not None else f"cp {a.score_cp}")
            else:
                pv = [stat.usi] + _continuation(player, stat.move)
                score = f"cp {winrate_to_cp(stat.proven if stat.proven is not None else stat.winrate)}"
            if self.cfg.usi.show_wdl:
                score += _wdl(a.winrate if k == 1 else stat.proven if stat.proven is not None else stat.winrate)
            depth = max(len(pv), 1)
            mpv = f" multipv {k}" if multipv > 1 else ""
            tail = f" pv {' '.join(pv)}" if pv else ""
            self.send(f"info depth {depth} seldepth {depth}{mpv} {head[5:]} score {score}{tail}")

    def _bestmove_or_checkmate(self, mate: MateLimits | None, result: Analysis | None) -> None:
        if mate is not None:
            self.send("checkmate nomate")
        elif result is None:
            self.send("bestmove resign")
        elif result.ponder and self.ponder and result.bestmove not in ("resign", "win"):
            self.send(f"bestmove {result.bestmove} ponder {result.ponder}")
        else:
            self.send(f"bestmove {result.bestmove}")

    def _send_checkmate(self, board: cshogi.Board, mate: MateLimits) -> None:
        """`go mate`: cshogi's df-pn within a node budget and the time, in the helper process of
        `dlzero.search.mate` (cshogi's df-pn holds the GIL and cannot be interrupted in this one):
        `checkmate MOVES`, `checkmate nomate` (none within the budget) or `checkmate timeout` (the
        time ran out, or `stop` came, first). Always one answer, whatever fails."""
        try:
            pv = self._mate.search(board, DFPN_MAX_PLIES, max(mate.nodes, 1000), mate.seconds, self._stop.is_set)
        except Exception as exc:  # the GUI still needs its answer
            self.send(f"info string error: mate search failed: {exc}")
            pv = []
        self.send("checkmate timeout" if pv is None else "checkmate " + (" ".join(pv) or "nomate"))

    def _thinking(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    def _finish_search(self, wait: bool = False, timeout: float | None = None) -> None:
        """End the current search; its worker writes its own `bestmove`.

        The commands a GUI sends mid-search stop it: a stopped search answers within a step
        (`Player.think` bounds a step's length), whatever its limits. With `wait` (for callers that
        want a bounded search's whole answer, such as tests) a search bounded by nodes or the clock
        runs to its end; `go infinite` and `go ponder` are stopped, as they would never end on their
        own. `timeout`: give up waiting after that many seconds (`quit`), the worker left to finish.
        """
        if self._worker is not None:
            if not wait or self._open_ended:
                self._stop.set()
            self._worker.join(timeout)
            self._worker = None

    # -- model and player -----------------------------------------------------------------------
    def _ensure_model(self) -> Evaluator | None:
        """Load the model if none is loaded or a model option changed; errors become info strings.

        ModelPath is a file or a network's name; empty, the default network plays (`dlzero.engine.shipped`),
        and an `info string` (and a line on stderr) says which, before `readyok`, where the engine already
        reports what it loaded: GUIs and match runners read on to `readyok` and skip `info` lines."""
        # the settings the network is loaded with: the laid-out engine's, whose threads follow EvalStreams 0
        loaded = engine_inference(self.cfg)
        wanted = (self.model_path,) + tuple(get_key(loaded, k) for k in MODEL_KEYS)
        if self._evaluator is not None and self._loaded_as == wanted:
            return self._evaluator
        if self._evaluator is not None:
            self._evaluator.close()
        self._evaluator, self._loaded_as, self._player = None, None, None
        try:
            choice = resolve_model(self.model_path, self.cfg)
        except Exception as exc:  # a bad manifest, an unreadable file: said in the GUI, and readyok still comes
            self.send(f"info string error: {exc}")
            return None
        if choice is None:
            self.send("info string error: no model (and no network ships): "
                      "setoption name ModelPath value <file.pt|file.onnx>")
            return None
        if choice.network is not None:
            note = choice.note("setoption name ModelPath")
            print(f"dlzero usi: {note}", file=sys.stderr)
            self.send(f"info string {note}")
        try:
            self._evaluator = self._loader(str(choice.path), self.cfg)
        except Exception as exc:  # report it in the GUI and stay alive for a new ModelPath
            self.send(f"info string error: cannot load model '{choice.path}': {exc}")
            return None
        self._loaded_as = wanted
        self.send(f"info string loaded {self._evaluator.describe()}")
        return self._evaluator

    def _ensure_player(self) -> Player | None:
        """The Player for the current options (a new one, and a new tree, when they changed)."""
        evaluator = self._ensure_model()
        if evaluator is None:
            return None
        if self._player is None or self._player.cfg != self.cfg:
            self._player = Player(evaluator, self.cfg, self._mate)
        return self._player


def _wdl(winrate: float) -> str:
    """` wdl W D L` in permille for the side to move (USI_ShowWDL, as UCI's UCI_ShowWDL).

    The value head gives one win rate p, in which a draw counts as its draw value: it cannot say
    how much of p is draws. So D is always 0 and W/L split p: W = 1000 p, L = 1000 - W.
    """
    win = int(round(1000 * winrate))
    return f" wdl {win} 0 {1000 - win}"


def _continuation(player: Player, move: int) -> list[str]:
    """PV below root move `move` (for MultiPV lines other than the best)."""
    tree = player.tree
    if tree is None or not tree.root.expanded:
        return []
    i = tree.root.child_index(move)
    node = tree.root.child(i) if i >= 0 else None
    out: list[str] = []
    while node is not None and node.expanded and len(node.moves) and len(out) < 30:
        j = best_index(node)
        if node.n[j] <= 0:
            break
        out.append(cshogi.move_to_usi(int(node.moves[j])))
        node = node.child(j)
    return out


def utf8_text(text: str) -> str:
    """`text` with nothing a UTF-8 encoder refuses: input bytes that were not UTF-8 (read as
    surrogate escapes, and echoed in `unknown command` and error lines) shown as `\\xff`, any
    other lone surrogate as `\\ud800`. A GUI decoding our output as UTF-8 must never fail on it."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that no input byte stands for
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _load_evaluator(path: str, cfg: Config) -> Evaluator:
    """Load and warm up the network, so the first `go` does not pay for graph tracing."""
    import numpy as np

    from dlzero.encoding import new_batch_buffer

    evaluator = load_engine_model(path, cfg)
    evaluator.evaluate(np.asarray(new_batch_buffer(1)))
    return evaluator


def main(cfg: Config, model_path: str | None = None) -> NoReturn:
    """Run a USI session on stdin/stdout; stray prints from libraries are sent to stderr.

    After `quit` (or the end of input) the process ends at once, without the interpreter's
    teardown: unloading torch takes 2 s on an idle machine and more on a busy one, and match
    runners kill an engine still running a few seconds after `quit` (shogiarena: 5 s) and log it.
    Every USI line is already flushed; the logs are flushed here.
    """
    out = sys.stdout
    # USI is UTF-8 text whatever the locale: bytes that are not UTF-8 are read as surrogate escapes
    # (a strict reader would end the session on them) and `send` writes them escaped
    out.reconfigure(encoding="utf-8")
    sys.stdin.reconfigure(encoding="utf-8", errors="surrogateescape")
    sys.stdout = sys.stderr
    try:
        UsiEngine(cfg, model_path, out).run(sys.stdin)
    finally:
        sys.stdout = out
    out.flush()
    logging.shutdown()
    sys.stderr.flush()
    os._exit(0)
