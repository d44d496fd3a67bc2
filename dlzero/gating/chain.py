"""The gate results of `metrics/ratings.csv`, typed, and the chain that puts them on one Elo scale.

A gate measures a candidate against the best of the moment, so its Elo is relative to that
opponent. Chained from generation 0 (rated 0), a candidate's Elo is its opponent's plus the gate's
estimate, and its interval is the gate's interval moved by the same amount. Only promoted
generations become the best, so only they extend the chain. A gate whose opponent has no place on
the chain (the opponent was promoted without a match under `gate.mode: every-N` or `off`, or its
row is missing) cannot be placed; it is left out, and the caller says so where it has a place to.
The chain sums noisy, self-referential estimates and inflates: the progress plot and the dashboard
show it only until anchored ratings (`metrics/elo.csv`, `dlzero rate`) exist.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dlzero.runfiles import csv_number


@dataclass(frozen=True)
class Gate:
    """One gate match as the chain needs it (the other columns stay with whoever reads the file)."""

    generation: int
    opponent: int
    elo: float
    elo_low: float
    elo_high: float
    promoted: bool


@dataclass(frozen=True)
class Chained:
    """A gated generation's place on the chain: Elo against generation 0, with the gate's interval."""

    elo: float
    low: float
    high: float


def is_promoted(row: Mapping[str, str | None]) -> bool:
    """A ratings.csv row's `promoted` column; files written before that column existed only say
    whether SPRT accepted (decision "accept")."""
    flag = row.get("promoted")
    return row.get("decision") == "accept" if flag in (None, "") else flag not in ("0", "False", "false")


def optional_number(text: str | None) -> float | None:
    """A CSV cell as a finite number (`runfiles.csv_number`); None when it is empty, nan or not a finite number
    (files written by hand or by older code)."""
    try:
        return csv_number(text)
    except ValueError:
        return None


def gate_of(row: Mapping[str, str | None]) -> Gate | None:
    """A ratings.csv row read leniently: None without a generation, an opponent or an Elo; a missing
    interval bound is the Elo itself."""
    gen, opp, elo = (optional_number(row.get(k)) for k in ("generation", "opponent", "elo"))
    if gen is None or opp is None or elo is None:
        return None
    low, high = optional_number(row.get("elo_low")), optional_number(row.get("elo_high"))
    return Gate(int(gen), int(opp), elo, elo if low is None else low, elo if high is None else high, is_promoted(row))


def read_gates(path: Path) -> list[Gate]:
    """The readable gates of a ratings.csv, in file order (none when the file does not exist)."""
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as fh:
        return [g for row in csv.DictReader(fh) if (g := gate_of(row)) is not None]


def gate_chain(gates: Sequence[Gate]) -> list[Chained | None]:
    """Each gate's place on the chain, in order; None for a gate whose opponent has no place on it."""
    rated: dict[int, float] = {0: 0.0}
    out: list[Chained | None] = []
    for gate in gates:
        base = rated.get(gate.opponent)
        if base is None:
            out.append(None)
            continue
        out.append(Chained(base + gate.elo, base + gate.elo_low, base + gate.elo_high))
        if gate.promoted:
            rated[gate.generation] = base + gate.elo
    return out
