"""`gate.mode`: which candidates the loop gates. sprt gates every candidate, off none (each is promoted
without a match), every-N those whose generation N divides.

Its own module at the config layer: the config checks the value when it is loaded (`dlzero.config`),
and the loop and the ratings read the same grammar to know which generations were gated.
"""

from __future__ import annotations

GATE_MODES = "sprt, off or every-N (N a positive whole number, e.g. every-4)"


def gate_interval(mode: str) -> int | None:
    """`gate.mode` as the gap between gated generations: sprt 1, every-N N, off None (never).

    Raises ValueError for anything else (the config check turns it into a clear message).
    """
    if mode == "sprt":
        return 1
    if mode == "off":
        return None
    prefix, _, n = mode.partition("-")
    if prefix == "every" and n.isdigit() and int(n) > 0:
        return int(n)
    raise ValueError(mode)
