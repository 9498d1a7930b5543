"""The README's Python example, and the first fit of the home page and of Getting started, run as
written."""

import re

import pytest

from tests.conftest import ROOT


def test_fit_your_own_model_section_runs(capsys):
    text = (ROOT / "README.md").read_text()
    section = text.split("## Fit your own PyMC model", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(code.strip().splitlines()) <= 16  # the "at most ~15 lines"
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert abs(float(scope["result"].mean["b"]) + 2) < 0.2  # the data's slope is -2
    assert {"posterior", "sample_stats", "log_likelihood", "fit", "fit_stats"} <= set(scope["idata"].children)
    y = scope["pred"]["predictions"]["y_obs"]
    assert y.shape == (1, 1000, 7)
    assert "elpd_loo" in capsys.readouterr().out


@pytest.mark.parametrize("page, slope", [("docs/index.md", -2.0), ("docs/getting_started.md", 1.5)])
def test_the_first_fit_on_the_page_runs_as_written(page, slope, capsys):
    code = re.search(r"```python\n(.*?)```", (ROOT / page).read_text(), re.S).group(1)
    scope = {}
    exec(compile(code, page, "exec"), scope)
    assert abs(float(scope["idata"]["posterior"]["slope"].mean()) - slope) < 0.2  # the data's slope
    assert {"posterior", "sample_stats", "log_likelihood"} <= set(scope["idata"].children)
    assert "predictions" in scope["pred"].children
    assert "elpd_loo" in capsys.readouterr().out
