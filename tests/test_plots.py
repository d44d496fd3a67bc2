"""Progress plot from the run's CSV files (losses; anchored Elo from elo.csv, else the gate chain)."""

from __future__ import annotations

from dlzero.config import Config
from dlzero.gating.chain import Chained, Gate, gate_chain, gate_of, read_gates
from dlzero.progress.plots import anchored_scale, anchored_series, chain_series, loss_series, plot_progress
from dlzero.rundir import RunDir

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

RATINGS = """\
generation,opponent,games,wins,draws,losses,score,elo,elo_low,elo_high,llr,decision,promoted,timestamp
1,0,40,30,5,5,0.8,100.0,50,150,3.0,accept,1,t
2,1,40,10,5,25,0.3,-20.0,-80,40,-3.0,reject,0,t
3,1,100,50,10,40,0.55,50.0,0,100,1.0,cap_pass,1,t
"""


def test_gate_chain_sums_promoted_gates(tmp_path):
    path = tmp_path / "ratings.csv"
    path.write_text(RATINGS)
    gates = read_gates(path)
    assert gates[1] == Gate(2, 1, -20.0, -80.0, 40.0, promoted=False)
    assert gate_chain(gates) == [Chained(100.0, 50.0, 150.0), Chained(80.0, 20.0, 140.0),
                                 Chained(150.0, 100.0, 200.0)]
    assert chain_series(gates) == ([(0, 0.0), (1, 100.0), (3, 150.0)], [(2, 80.0)])
    # files without a promoted column fall back to the SPRT decision; a row without an Elo is skipped
    rows = [{"generation": "1", "opponent": "0", "elo": "30", "decision": "accept"},
            {"generation": "2", "opponent": "1", "elo": "x", "decision": "reject"}]
    gates = [g for row in rows if (g := gate_of(row)) is not None]
    assert chain_series(gates) == ([(0, 0.0), (1, 30.0)], [])
    # a gate against a generation promoted without a match (gate.mode every-N) has no place on the chain
    gates = [Gate(4, 3, 50.0, 0.0, 100.0, True), Gate(5, 4, 10.0, -40.0, 60.0, True)]
    assert gate_chain(gates) == [None, None] and chain_series(gates) == ([], [])


def test_loss_series_tolerates_missing_cells():
    rows = [{"step": "10", "policy_loss": "3.0", "value_loss": ""}, {"step": "20", "policy_loss": "2.5",
                                                                     "value_loss": "0.9", "lr": "0.1"}]
    x_label, series = loss_series(rows)
    assert x_label == "step"
    assert series == {"policy_loss": ([10.0, 20.0], [3.0, 2.5]), "value_loss": ([20.0], [0.9])}


def test_plot_progress_writes_png(tmp_path):
    rd = RunDir.create(tmp_path / "run", Config())
    out = plot_progress(rd)  # no CSVs yet: still a valid (empty) plot
    assert out.read_bytes().startswith(PNG_SIGNATURE)
    (rd.metrics_dir / "metrics.csv").write_text(
        "step,generation,policy_loss,value_loss,lr\n100,1,4.1,0.95,0.02\n200,1,3.8,0.91,0.02\n300,2,3.5,\n")
    (rd.metrics_dir / "ratings.csv").write_text(RATINGS)
    out = plot_progress(rd)
    assert out == rd.metrics_dir / "progress.png"
    data = out.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 5000


ELO = """\
player,generation,elo,elo_low,elo_high,games,anchor,wall_seconds
gen-0000,0,40.0,-60.0,140.0,40,1,0
gen-0003,3,350.5,250.0,450.0,40,0,900
gen-0001,1,120.0,20.0,220.0,40,0,
alphabeta:100,,300.0,200.0,400.0,60,1,
random,,0.0,0.0,0.0,60,1,
broken,x,,,,,,
"""


def test_anchored_series_reads_elo_csv():
    import csv
    import io

    models, anchors = anchored_series(list(csv.DictReader(io.StringIO(ELO))))
    assert models == [(0, 0.0, 40.0, -60.0, 140.0), (1, None, 120.0, 20.0, 220.0), (3, 900.0, 350.5, 250.0, 450.0)]
    assert anchors == [("alphabeta:100", 300.0), ("random", 0.0)]


def test_plot_progress_prefers_anchored_ratings(tmp_path):
    rd = RunDir.create(tmp_path / "run", Config())
    (rd.metrics_dir / "ratings.csv").write_text(RATINGS)
    chain = plot_progress(rd).read_bytes()
    (rd.metrics_dir / "elo.csv").write_text(ELO)
    anchored = plot_progress(rd).read_bytes()
    assert anchored.startswith(PNG_SIGNATURE) and anchored != chain
    (rd.metrics_dir / "elo.csv").write_text(ELO_SCALES)  # players off the drawn scale and without an Elo
    scales = plot_progress(rd).read_bytes()
    assert scales.startswith(PNG_SIGNATURE) and scales not in (chain, anchored)


ELO_SCALES = """\
player,generation,elo,elo_low,elo_high,games,anchor,wall_seconds,relative_to,prior_draws,wins,draws,losses
gen-0000,0,,,,20,1,0,,1,0,0,20
gen-0003,3,150.0,50.0,250.0,40,0,900,alphabeta:1,1,20,2,18
gen-0004,4,210.0,90.0,330.0,40,0,1200,alphabeta:1,1,25,1,14
gen-0005,5,40.0,-60.0,140.0,20,0,1500,yane,1,9,1,10
alphabeta:1,,0.0,0.0,0.0,80,1,,alphabeta:1,1,30,0,50
yane,,0.0,0.0,0.0,20,0,,yane,1,10,1,9
random,,,,,40,1,,,1,0,0,40
"""


def test_anchored_series_draws_one_scale_and_names_its_prior():
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(ELO_SCALES)))
    # the scale most rated models are on (alphabeta:1 = 0); no Elo (sweeps only) or another zero: left out
    assert anchored_scale(rows) == ("alphabeta:1", "Elo (1 virtual draw per pairing, alphabeta:1 = 0)")
    models, anchors = anchored_series(rows)
    assert models == [(3, 900.0, 150.0, 50.0, 250.0), (4, 1200.0, 210.0, 90.0, 330.0)]
    assert anchors == [("alphabeta:1", 0.0)]
    # a file from before the zero and the prior were written: random = 0, the prior not recorded
    assert anchored_scale(list(csv.DictReader(io.StringIO(ELO)))) == \
        ("random", "Elo (prior not recorded, random = 0)")
