"""Gating: a candidate generation plays the current best; if it proves stronger, best.json points at it.

The match is played in colour-swapped pairs, each from its own suite opening; successive gates take
different openings (the suite shuffled by `seed`, a slot range per candidate generation). It stops as
soon as the pentanomial SPRT (`cfg.gate`: elo0, elo1, alpha, beta) decides. If it is still
undecided at `max_games`, the candidate passes when its score reaches `cap_pass_score`, so a run
keeps moving even when gates are too short for the test to decide. Promotion is `RunDir.set_best`,
an atomic rename: self-play workers reading best.json see the old best or the new one, and a crash
in between leaves the old best. The ratings.csv row is written after the promotion, so a row that
says "promoted" is never a lie.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import sys
from dataclasses import dataclass

from tqdm import tqdm

from dlzero.config import Config, InferenceConfig
from dlzero.errors import RunDirError
from dlzero.gating.chain import read_gates
from dlzero.gating.match import MatchRecord, MatchResult, append_rating, play_match
from dlzero.play.registry import PlayContext, build_player
from dlzero.rundir import RunDir, generation_name

log = logging.getLogger(__name__)


@dataclass
class GateResult:
    """Outcome of one gate, from the candidate's point of view.

    `decision`: "accept"/"reject" (SPRT decided), "cap_pass"/"cap_fail" (undecided at the game cap,
    judged by `cap_pass_score`), or "no_best" (nothing to play against: promoted without a match).
    """

    candidate: int
    best: int | None
    wins: int
    draws: int
    losses: int
    score: float
    elo: float
    elo_low: float
    elo_high: float
    llr: float
    decision: str
    promoted: bool
    pairs: tuple[int, ...] = ()  # pentanomial counts: pairs in which the candidate scored 0, 1/2, 1, 3/2, 2

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    def summary(self) -> str:
        """One readable line: who played whom, W-D-L, score, Elo with its 95% interval, decision."""
        if self.best is None:
            return f"gen {self.candidate}: no best model yet -> promoted"
        verdict = "PROMOTED" if self.promoted else "not promoted"
        return (f"gen {self.candidate} vs gen {self.best}: {self.games} games, "
                f"W-D-L {self.wins}-{self.draws}-{self.losses}, score {self.score:.3f}, "
                f"Elo {self.elo:+.0f} [{self.elo_low:+.0f}, {self.elo_high:+.0f}] (95%), "
                f"{self._pairs_text()}LLR {self.llr:+.2f}, {self.decision} -> {verdict}")

    def _pairs_text(self) -> str:
        if not self.pairs:
            return ""
        return f"pairs 0/0.5/1/1.5/2: {'-'.join(str(n) for n in self.pairs)}, "


def final_decision(match: MatchResult, cap_pass_score: float) -> str:
    """The SPRT's verdict, or at the game cap the score test."""
    if match.decision != "continue":
        return match.decision
    return "cap_pass" if match.score >= cap_pass_score else "cap_fail"


def gate_and_promote(rd: RunDir, cfg: Config, candidate_generation: int, progress: bool = True, *,
                     games: int | None = None, playouts: int | None = None, parallel: int | None = None,
                     inference: InferenceConfig | None = None, seed: int = 0,
                     report: bool = True) -> GateResult:
    """Play `candidate_generation` against the current best and promote it if it wins the gate.

    `games`, `playouts` and `parallel` override `cfg.gate.max_games`, `cfg.gate.playouts` and
    `cfg.gate.games_in_parallel`. Games are kept as CSA files under games/gen-XXXX-vs-gen-YYYY/ and
    the result is appended to metrics/ratings.csv.
    With `report`, the result line (score, Elo with 95% interval, decision) goes to stderr.
    """
    cand_path = rd.model_path(candidate_generation)
    if not cand_path.is_file():
        raise RunDirError(f"candidate generation {candidate_generation}: {cand_path} does not exist")
    best = rd.best()
    if best is None:
        rd.set_best(candidate_generation, "first model (no best to play against)")
        result = GateResult(candidate_generation, None, 0, 0, 0, 0.5, 0.0, 0.0, 0.0, 0.0, "no_best", True)
        if report:
            print(result.summary(), file=sys.stderr)
        return result
    if best.generation == candidate_generation:
        raise RunDirError(f"generation {candidate_generation} is already the best")

    gate = cfg.gate
    n_games = games or gate.max_games
    inference = inference or cfg.inference
    names = (generation_name(candidate_generation), generation_name(best.generation))
    context = PlayContext(dataclasses.replace(cfg, inference=inference), run=rd)
    cand_eval = build_player(names[0], context)
    best_eval = build_player(names[1], context)
    bar = tqdm(total=n_games, desc=f"gate {names[0]} vs {names[1]}", unit="game", file=sys.stderr,
               disable=not progress, leave=False)

    # Without the bar (the async loop, whose log is a file) a line every tenth of the games: a 100-game gate at
    # 1,024 playouts beside self-play runs ~75 minutes on two cores, and the log should not go quiet for them.
    log_step = max(1, n_games // 10)

    def on_game(_: MatchRecord, m: MatchResult) -> None:
        bar.update(1)
        standing = f"W-D-L {m.wins}-{m.draws}-{m.losses} pairs {m.n_pairs} LLR {m.llr:+.2f}"
        bar.set_postfix_str(standing)
        if not progress and m.n_games % log_step == 0:
            log.info("gate %s vs %s: %d/%d games, %s", names[0], names[1], m.n_games, n_games, standing)

    try:
        match = play_match(cand_eval, best_eval, n_games, cfg, playouts=playouts, parallel=parallel,
                           sprt=True, seed=seed, record_dir=rd.games_dir / f"{names[0]}-vs-{names[1]}",
                           names=names, on_game=on_game, opening_offset=candidate_generation * ((n_games + 1) // 2))
    finally:
        bar.close()
        cand_eval.close()
        best_eval.close()

    decision = final_decision(match, gate.cap_pass_score)
    elo, low, high = match.elo()
    promoted = decision in ("accept", "cap_pass")
    result = GateResult(candidate_generation, best.generation, match.wins, match.draws, match.losses,
                        match.score, elo, low, high, match.llr, decision, promoted, tuple(match.pairs))
    # the row first, then the promotion: a loop restarted between the two finds the row and promotes by it
    # (finish_interrupted_gate) instead of playing the gate again
    append_rating(rd.ratings_csv, {
        "generation": candidate_generation, "opponent": best.generation, "games": result.games,
        "wins": result.wins, "draws": result.draws, "losses": result.losses, "score": f"{result.score:.4f}",
        "elo": f"{elo:.1f}", "elo_low": f"{low:.1f}", "elo_high": f"{high:.1f}", "llr": f"{match.llr:.3f}",
        "decision": decision, "promoted": int(promoted),
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    })
    if promoted:
        rd.set_best(candidate_generation, f"gate: {decision}, {result.summary()}")
    if report:
        print(result.summary(), file=sys.stderr)
    return result


def finish_interrupted_gate(rd: RunDir, candidate: int) -> str | None:
    """What a gate the loop was stopped in left done, finished; None when there is nothing to finish.

    The gate writes its metrics/ratings.csv row before it promotes. A loop stopped after the row finds
    it here and promotes by it (playing the gate again would add a second row); one stopped after the
    promotion finds the candidate already best (gate_and_promote would refuse it)."""
    best = rd.best()
    if best is not None and best.generation == candidate:
        return f"candidate gen {candidate} was promoted before the loop stopped"
    if best is None:
        return None
    row = next((g for g in reversed(read_gates(rd.ratings_csv))
                if (g.generation, g.opponent) == (candidate, best.generation)), None)
    if row is None:
        return None
    if row.promoted:
        rd.set_best(candidate, "gate: its ratings.csv row, found after a restart")
    return (f"candidate gen {candidate} vs best gen {best.generation}: the gate finished before the loop stopped "
            f"(Elo {row.elo:+.0f}) -> {'promoted' if row.promoted else 'kept best'}")
