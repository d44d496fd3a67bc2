"""The standard handicap starts (駒落ち), by their Japanese names and English ones, as suite lines.

In a handicap game the stronger player (上手, the giver) plays White without the named pieces and moves first;
the weaker (下手) plays Black with the full army. Each start is a position in SFEN, so it goes wherever a start
position goes: `position sfen ...` for the engine, an openings file for self-play (the shipped suite
configs/openings/handicap.txt holds them all), `dlzero match --start NAME` for a match. KIF files name their
start in the 手合割 header with the same Japanese names (dlzero.data.records reads them).
"""

from __future__ import annotations

from dlzero.errors import ConfigError

_BLACK_ARMY = "PPPPPPPPP/1B5R1/LNSGKGSNL"
_PAWNS = "ppppppppp/9/9/9"

# Japanese name -> (English name, White's back two ranks as SFEN): the pieces the giver keeps.
_STARTS: dict[str, tuple[str, str]] = {
    "香落ち": ("lance", "lnsgkgsn1/1r5b1"),
    "右香落ち": ("right-lance", "1nsgkgsnl/1r5b1"),
    "角落ち": ("bishop", "lnsgkgsnl/1r7"),
    "飛車落ち": ("rook", "lnsgkgsnl/7b1"),
    "飛香落ち": ("rook-lance", "lnsgkgsn1/7b1"),
    "二枚落ち": ("two-piece", "lnsgkgsnl/9"),
    "三枚落ち": ("three-piece", "lnsgkgsn1/9"),
    "四枚落ち": ("four-piece", "1nsgkgsn1/9"),
    "五枚落ち": ("five-piece", "2sgkgsn1/9"),
    "左五枚落ち": ("left-five-piece", "1nsgkgs2/9"),
    "六枚落ち": ("six-piece", "2sgkgs2/9"),
    "八枚落ち": ("eight-piece", "3gkg3/9"),
    "十枚落ち": ("ten-piece", "4k4/9"),
}

HANDICAPS: dict[str, str] = {name: f"{back}/{_PAWNS}/{_BLACK_ARMY} w - 1" for name, (_, back) in _STARTS.items()}
ENGLISH: dict[str, str] = {english: name for name, (english, _) in _STARTS.items()}


def handicap_sfen(name: str) -> str:
    """The SFEN of the handicap start `name` (Japanese, e.g. 飛車落ち, or English, e.g. rook); a ConfigError
    that lists the names otherwise."""
    japanese = ENGLISH.get(name.lower(), name)
    if japanese not in HANDICAPS:
        names = ", ".join(f"{j} ({e})" for j, (e, _) in _STARTS.items())
        raise ConfigError(f"'{name}' is not a handicap start; the starts are {names}")
    return HANDICAPS[japanese]


def handicap_line(name: str) -> str:
    """`name`'s start as an openings-file line (`sfen ...`)."""
    return f"sfen {handicap_sfen(name)}"
