"""benchmarks.studies.sweep_agreement: two runs of the prior study, their report tables cell by cell."""

from pathlib import Path

import pandas as pd
import pytest

from benchmarks.studies import sweep_agreement

COMMITTED = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "prior_sweep_fits.parquet"


def _store(folder: Path, table: pd.DataFrame) -> str:
    folder.mkdir()
    table.to_parquet(folder / "fits.parquet")
    return str(folder)


def test_a_run_agrees_with_itself_and_a_moved_cell_is_counted(tmp_path, capsys):
    """The committed study against itself: nothing differs. Against a copy where normal-fixed's held-out
    ELPD rises by 50 nats per 1,000 test points in one cell: that cell's best pair changes, its
    ELPD differences and hyperprior effects move, and the accuracy gaps stay as they were."""
    table = pd.read_parquet(COMMITTED)
    moved = table.copy()
    cell = (moved["dataset"] == "circles") & (moved["noise"] == 0.1) & (moved["prior"] == "normal") \
        & (moved["hyperprior"] == "fixed")
    moved.loc[cell, "elpd_test"] += 0.05 * moved.loc[cell, "n_test"]
    first = _store(tmp_path / "first", table)
    same, other = _store(tmp_path / "same", table), _store(tmp_path / "moved", moved)

    assert sweep_agreement.main([first, f"same={same}", f"moved={other}", "--out", str(tmp_path)]) == 0
    rows = pd.read_csv(tmp_path / "sweep_agreement.csv").set_index(["run", "table", "estimate"])
    assert set(rows.index.get_level_values("run")) == {"same", "moved"}
    assert (rows.loc["same", ["printed_differ", "move_max", "side_changed"]] == 0).all().all()
    assert rows.loc[("moved", "gaps", "gap"), "printed_differ"] == 0
    differences = rows.loc[("moved", "elpd_differences", "diff")]
    assert differences["printed_differ"] >= 15 and differences["side_changed"] >= 1  # the new best's cell
    effects = rows.loc[("moved", "hyperprior_effects", "elpd_gain")]
    # the cell's three hyperpriors, each 50/3 nats lower (the mean over the three weight priors with a
    # scale): from above zero to below it
    assert effects["printed_differ"] == 3 and effects["move_max"] > 10 and effects["side_changed"] == 3
    out = capsys.readouterr().out
    assert "same: 1600 fits at 10000 steps" in out and "the same best pair in 10 of 10 cells" in out
    moved_line = next(line for line in out.splitlines() if line.startswith("moved:"))
    assert "the same best pair in 9 of 10 cells" in moved_line
    assert "of 7 verdict lines word for word" in moved_line and " 7 of 7 verdict" not in moved_line


def test_a_folder_without_a_table_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as stop:
        sweep_agreement.main([str(tmp_path / "empty"), f"x={tmp_path / 'empty'}", "--out", str(tmp_path)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "has no fits.parquet" in err and not (tmp_path / "sweep_agreement.csv").exists()
