"""The README's Python example runs as written."""

import re

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
