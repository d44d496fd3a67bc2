"""metrics/timeline.csv: rows as the loop writes them, and the share of the wall time each phase ran."""

from __future__ import annotations

import pytest

from dlzero.progress.timeline import Timeline, read_rows, shares

EPOCH = 1_700_000_000.0  # a real wall-clock time: its float has only ~0.1 us to spare below 1 s


def run_phases(path, phases: list[tuple[str, float, float]]) -> None:
    """Time each (name, start, end) phase of the sequential loop through `Timeline` on a scripted clock."""
    times = iter([EPOCH] + [EPOCH + t for _, start, end in phases for t in (start, end)])
    timeline = Timeline(path, clock=lambda: next(times))
    for name, _, _ in phases:
        with timeline.phase(name, 1):
            pass


def test_sequential_phases_with_sub_second_starts_share_at_most_the_whole_wall(tmp_path):
    """Each phase starts at a different fraction of a second: cut to whole seconds (the old rows), the
    train row began 0.9 s early and overlapped self-play, so the shares summed to more than 1."""
    path = tmp_path / "timeline.csv"
    run_phases(path, [("selfplay", 0.1, 10.4), ("train", 10.9, 12.0), ("gate", 12.5, 12.6)])
    got = shares(read_rows(path))
    wall = 10.3 + 1.1 + 0.1  # the time some phase ran: the gaps between phases are not the loop's
    assert got == pytest.approx({"selfplay": 10.3 / wall, "train": 1.1 / wall, "gate": 0.1 / wall}, abs=1e-3)
    assert sum(got.values()) <= 1.0


def test_phases_that_touch_do_not_overlap_in_the_file(tmp_path):
    """Back to back (one ends the instant the next starts) at many sub-millisecond offsets: the rows
    never overlap, so the shares of the sequential loop never sum past 1, not even by a rounding."""
    for k in range(200):
        path = tmp_path / f"timeline{k}.csv"
        t = k * 0.0137 + 0.00049
        run_phases(path, [("selfplay", t, t + 1.3703), ("train", t + 1.3703, t + 2.83), ("gate", t + 2.83, t + 2.8304)])
        assert sum(shares(read_rows(path)).values()) <= 1.0, k


def test_rows_without_a_finite_length_are_left_out():
    rows = [{"phase": "selfplay", "generation": "0", "start": "2026-01-01T00:00:00.000+00:00", "seconds": "10"},
            {"phase": "train", "generation": "1", "start": "2026-01-01T00:00:10.000+00:00", "seconds": "inf"},
            {"phase": "gate", "generation": "1", "start": "2026-01-01T00:00:10.000+00:00", "seconds": "nan"}]
    assert shares(rows) == {"selfplay": 1.0}
