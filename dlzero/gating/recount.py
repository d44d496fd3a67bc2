"""Published match figures recounted from their games: the CSA records a match kept (`dlzero match --records`).

A figure in docs/benchmarks is only as good as the games behind it, so each match keeps its games and a row of
its CSV names them (`records`: a folder of CSA files, or the same packed as `.tar.xz` to commit). Recounting reads
each record with cshogi's CSA reader (an independent parser: it knows nothing of how dlzero wrote them), takes the
result from the record's end code, and scores it for the player named in the N+/N- lines.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from pathlib import Path

import cshogi.CSA

from dlzero.errors import DataError

BLACK_WON, WHITE_WON = 1, 2  # cshogi's `win` of a parsed game (0: a draw)


def _texts(source: Path) -> Iterator[tuple[str, str]]:
    """(name, CSA text) of every record in the folder or `.tar.xz` `source`, in name order."""
    if source.is_dir():
        for path in sorted(source.glob("*.csa")):
            yield path.name, path.read_text(encoding="utf-8")
        return
    if not source.name.endswith(".tar.xz") or not source.is_file():
        raise DataError(str(source), None, "not a folder of CSA records nor a .tar.xz of them")
    with tarfile.open(source, "r:xz") as tar:
        for member in sorted((m for m in tar.getmembers() if m.isfile() and m.name.endswith(".csa")),
                             key=lambda m: m.name):
            handle = tar.extractfile(member)
            if handle is not None:
                yield member.name, handle.read().decode("utf-8")


def recount(source: str | Path, player: str = "A", colour: str | None = None) -> tuple[int, int, int]:
    """`player`'s wins, draws and losses over the records in `source`, or over those it played as `colour`
    ("black" or "white": from a handicap start the giver is White, so a handicap table's "giving" figure is
    White's); a DataError names a record that is not one of `player`'s games or cannot be read."""
    if colour not in (None, "black", "white"):
        raise ValueError(f"colour {colour!r}: black or white")
    source = Path(source)
    wins = draws = losses = 0
    for name, text in _texts(source):
        try:
            [game] = cshogi.CSA.Parser.parse_str(text)
        except (ValueError, IndexError) as exc:
            raise DataError(f"{source}/{name}", None, f"not one CSA game ({exc})") from None
        if player not in game.names:
            raise DataError(f"{source}/{name}", None, f"{player!r} did not play it ({' vs '.join(game.names)})")
        black = game.names[0] == player
        if colour is not None and black != (colour == "black"):
            continue
        if game.win not in (BLACK_WON, WHITE_WON):
            draws += 1
        elif (game.win == BLACK_WON) == black:
            wins += 1
        else:
            losses += 1
    return wins, draws, losses
