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
