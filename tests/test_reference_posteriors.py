"""The reference-posterior benchmark's scoring, and its models as PyMC builds them."""

import numpy as np
import xarray as xr

from benchmarks import reference_posteriors as rp


def _posterior(values: dict) -> xr.Dataset:
    return xr.Dataset({k: (("chain", "draw", *[f"{k}_{i}" for i in range(np.ndim(v) - 2)]), v)
                       for k, v in values.items()})


def test_errors_are_in_reference_sds_over_every_scalar():
    rng = np.random.default_rng(0)
    ref = _posterior({"a": rng.normal(0, 2, (4, 5000)), "b": rng.normal(1, 1, (4, 5000, 3))})
    shifted = _posterior({"a": rng.normal(1, 2, (1, 5000)), "b": rng.normal(1, 0.5, (1, 5000, 3))})
    out = rp.errors(shifted, ref)
    np.testing.assert_allclose(out["mean_error_sd"], 0.5, atol=0.06)  # a: 1 / 2
    np.testing.assert_allclose(out["sd_ratio_min"], 0.5, atol=0.03)   # b's sds halved
    np.testing.assert_allclose(out["sd_ratio_max"], 1.0, atol=0.04)


def test_every_model_builds_with_the_variables_its_reference_scores():
    for name, (build, ref_name, _) in rp.MODELS.items():
        model = build()
        reference_vars = set(rp.MODELS[ref_name][0]().named_vars)
        assert {"mu", "tau", "theta"} <= reference_vars if name.startswith("eight") else model.free_RVs
        assert {rv.name for rv in model.free_RVs} - {"theta_tilde"} <= reference_vars, name


def test_the_markdown_ranks_k_only_where_three_methods_of_a_model_have_one():
    def row(method, k=None, error=0.1):
        r = {"model": "m", "method": method, "seconds": 1.0, "mean_error_sd": error, "sd_ratio_min": 0.9,
             "sd_ratio_max": 1.1}
        return r | ({"q_pareto_k": k} if k is not None else {})

    one_k = rp.markdown([row("a", 0.3), row("b"), row("c")])
    assert "rank correlation" not in one_k and one_k.splitlines()[-1].startswith("| m | c |")
    three_k = rp.markdown([row("a", 0.3, 0.1), row("b", 0.5, 0.2), row("c", 0.9, 0.4)])
    assert three_k.splitlines()[-1] == "| m | 1.00 | 3 |"
