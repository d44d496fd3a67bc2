"""A match played in parts: `dlzero match --resume` counts the games its `--records` folder kept and plays only
the pairs still missing, from the same openings, so a match cut short by a machine's end (a session, a crash, a
Ctrl-C) goes on where it stopped instead of starting again.

A pair counts only when both of its games were kept (a match writes a game once its partner has finished, so a
lone game is the last of an odd match or a pair that was still playing); the other pairs are played again under
their own numbers and openings (`play_match`'s `opening_offset` and `first_record`). The kept games must have been
played by the same players at the same time control from the same suite: their header lines say so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path

from dlzero.errors import ConfigError
from dlzero.gating.match import MatchRecord, read_record

# header lines that say what a game was (the rest, date, load and version, may differ between the parts)
_SAME = ("A: ", "B: ", "time control: ", "openings: ")


def _settings(header: Sequence[str]) -> dict[str, str]:
    """What the header lines `_SAME` say, by key; a player's "played as" path (where its engine was installed)
    does not change the player."""
    found = {}
    for line in header:
        for key in _SAME:
            if line.startswith(key):
                found[key] = line[len(key):].split(", played as ", 1)[0]
    return found


def record_header_lines(text: str) -> list[str]:
    """The comment lines at the top of a kept game, before its position."""
    lines = []
    for line in text.splitlines():
        if line.startswith("P") or line in ("+", "-"):
            break
        if line.startswith("'"):
            lines.append(line[1:])
    return lines


def kept_pairs(folder: str | Path, header: Sequence[str], max_games: int) -> dict[int, list[MatchRecord]]:
    """The complete pairs kept in `folder` by slot (games 2k and 2k+1 are slot k; a last odd game is a slot on
    its own), up to `max_games` games. A ConfigError names a kept game played otherwise than `header` says (other
    players, time control or suite); a DataError one that cannot be read."""
    want = _settings(header)
    by_index: dict[int, MatchRecord] = {}
    for path in sorted(Path(folder).glob("game-*.csa")):
        if not path.stem[5:].isdigit():
            continue  # not a name a match writes
        text = path.read_text(encoding="utf-8")
        # the file's number is the game's: parts of a match before this fix wrote their own count in $EVENT
        record = dataclasses.replace(read_record(text, str(path)), index=int(path.stem[5:]))
        had = _settings(record_header_lines(text))
        for key, value in want.items():
            if key in had and had[key] != value:
                raise ConfigError(f"{path} was played with {key}{had[key]!r}, this match with {key}{value!r}: "
                                  "resume it as it was, or keep this match's games in another --records folder")
        if record.index < max_games:
            by_index[record.index] = record
    pairs = {}
    for slot in range((max_games + 1) // 2):
        games = [by_index[i] for i in (2 * slot, 2 * slot + 1) if i < max_games and i in by_index]
        if len(games) == min(2, max_games - 2 * slot):
            pairs[slot] = games
    return pairs


def missing_chunks(done: set[int], max_games: int, pairs_a_chunk: int | None = None) -> Iterator[tuple[int, int]]:
    """(first slot, games) for each stretch of consecutive pair slots not in `done`, cut every `pairs_a_chunk`
    pairs (an SPRT looks between chunks); the last chunk of an odd match ends with its lone game."""
    slots = [s for s in range((max_games + 1) // 2) if s not in done]
    start = 0
    while start < len(slots):
        end = start + 1
        while end < len(slots) and slots[end] == slots[end - 1] + 1 and \
                (pairs_a_chunk is None or end - start < pairs_a_chunk):
            end += 1
        first = slots[start]
        yield first, min(2 * (end - start), max_games - 2 * first)
        start = end
