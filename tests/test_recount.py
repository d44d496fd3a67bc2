"""Every published match figure is recounted from its kept games: first on a match played here, then on every row
of docs/benchmarks/*.csv that names its records (dlzero.gating.recount, read with cshogi's own CSA parser)."""

from __future__ import annotations

import csv
import tarfile
from pathlib import Path

import pytest

from dlzero.cli import main
from dlzero.errors import DataError
from dlzero.gating.recount import recount

BENCHMARKS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"


def published_rows() -> list[tuple[Path, dict[str, str]]]:
    rows = []
    for table in sorted(BENCHMARKS.glob("*.csv")):
        with table.open(newline="", encoding="utf-8") as fh:
            rows += [(table, row) for row in csv.DictReader(fh) if row.get("records")]
    return rows


def test_a_matchs_csv_row_is_its_kept_games(tmp_path, capsys):
    records, table = tmp_path / "games", tmp_path / "m.csv"
    assert main(["match", "alphabeta:10", "random", "--games", "6", "--records", str(records), "--csv", str(table),
                 "--set", "gate.max_moves=80"]) == 0
    out = capsys.readouterr().out
    [row] = list(csv.DictReader(table.open()))
    counted = recount(records)
    assert counted == (int(row["wins"]), int(row["draws"]), int(row["losses"])) and sum(counted) == 6
    assert f"W-D-L {counted[0]}-{counted[1]}-{counted[2]} (for A)" in out
    assert recount(records, "B") == (counted[2], counted[1], counted[0])
    as_black, as_white = recount(records, colour="black"), recount(records, colour="white")
    assert tuple(b + w for b, w in zip(as_black, as_white, strict=True)) == counted and sum(as_white) == 3
    packed = tmp_path / "games.tar.xz"
    with tarfile.open(packed, "w:xz") as tar:
        tar.add(records, arcname="games")
    assert recount(packed) == counted
    with pytest.raises(DataError, match="did not play it"):
        recount(records, "C")
    (records / "game-999.csa").write_text("not a game\n")
    with pytest.raises(DataError, match="game-999.csa"):
        recount(records)


@pytest.mark.parametrize(("table", "row"), published_rows() or [pytest.param(None, None, marks=pytest.mark.skip(
    reason="no docs/benchmarks/*.csv row names its records yet"))])
def test_a_published_figure_is_its_kept_games(table, row):
    counted = recount(table.parent / row["records"], "A")
    assert counted == (int(row["wins"]), int(row["draws"]), int(row["losses"])), (table.name, row)
    if row.get("giving_wins"):  # a handicap row: A's games as White, the side that gives the handicap
        giving = recount(table.parent / row["records"], "A", colour="white")
        assert giving == (int(row["giving_wins"]), int(row["giving_draws"]), int(row["giving_losses"])), row
