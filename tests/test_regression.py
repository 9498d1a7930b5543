"""1-D regression: the synthetic tasks, the MLP regressor, predict, and the experiment's command line."""

import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats as st

from bnn_zoo.data import regression
from bnn_zoo.experiments.regression import command as experiment
import optax

import bnn_zoo
from bnn_zoo.models import mlp_regressor
from tests.conftest import command_env

REQUIRED = {"task", "beta", "seed", "steps", "lr", "hidden", "activation", "noise", "rmse_in",
            "coverage50_in", "coverage90_in", "coverage95_in", "width95_in", "conf_coverage90_in",
            "conf_coverage95_in", "conf_width95_in", "sd_ratio_out_in", "sd_ratio_out_in_total", "fit_seconds"}


# --- data -------------------------------------------------------------------


@pytest.mark.parametrize("name, n, lo, hi, g_lo, g_hi",
                         [("sine", 200, -3, 3, -6, 6), ("blundell", 1000, 0, 0.5, -0.2, 1.2)])
def test_tasks_have_the_documented_shapes_and_ranges(name, n, lo, hi, g_lo, g_hi):
    task = regression.load(name, n_test=300, n_grid=141, seed=3)
    assert task.x_train.shape == task.y_train.shape == (n,)
    assert task.x_test.shape == task.y_test.shape == (300,)
    assert task.x_grid.shape == task.f_grid.shape == task.mean_grid.shape == (141,)
    assert task.data_range == (lo, hi)
    for x in (task.x_train, task.x_test):
        assert lo <= x.min() and x.max() <= hi
    assert (task.x_grid[0], task.x_grid[-1]) == (g_lo, g_hi)
    inside = task.in_range
    assert inside.any() and (~inside).any()
    assert np.all((task.x_grid[inside] >= lo) & (task.x_grid[inside] <= hi))


def test_same_seed_same_data_other_seed_other_data():
    a, b, c = (regression.load("blundell", seed=s) for s in (5, 5, 6))
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not np.allclose(a.x_train, c.x_train)
    assert not np.allclose(a.x_train[:len(a.x_test)], a.x_test)  # test points are fresh draws


def test_sine_noise_is_additive_with_the_given_sd():
    task = regression.load("sine", n_train=5000, seed=0)
    resid = task.y_train - np.sin(task.x_train)
    assert resid.std() == pytest.approx(0.1, rel=0.05)
    np.testing.assert_allclose(task.mean_grid, np.sin(task.x_grid))
    np.testing.assert_allclose(task.f_grid, np.sin(task.x_grid))
    noiseless = regression.load("sine", n_train=50, noise_sd=0.0, seed=0)
    np.testing.assert_allclose(noiseless.y_train, np.sin(noiseless.x_train))


def test_blundell_noise_and_the_conditional_mean_are_right():
    # y = h(x + e) with h(u) = u + 0.3 sin(2 pi u) + 0.3 sin(4 pi u): from the noise-free
    # curve, e is recoverable only in distribution, so check moments at one x by Monte Carlo.
    assert regression.load("blundell", seed=0).noise_sd == 0.02  # the sd, as in Fig. 5 of the paper
    task = regression.load("blundell", noise_sd=np.sqrt(0.02), seed=0)  # 0.02 read as the variance
    x = 0.3
    e = np.random.default_rng(1).normal(0, np.sqrt(0.02), 400_000)
    y = (x + 0.3 * np.sin(2 * np.pi * (x + e)) + 0.3 * np.sin(4 * np.pi * (x + e)) + e)
    sd = np.sqrt(0.02)
    assert regression.conditional_mean("blundell", x, sd) == pytest.approx(y.mean(), abs=3e-3)
    h = lambda u: u + 0.3 * np.sin(2 * np.pi * u) + 0.3 * np.sin(4 * np.pi * u)  # noqa: E731
    np.testing.assert_allclose(task.f_grid, h(task.x_grid))
    assert not np.allclose(task.mean_grid, task.f_grid, atol=0.05)  # the noise damps the sines
    # The training targets are h at jittered inputs: their mean per bin follows E[y | x].
    big = regression.load("blundell", n_train=200_000, noise_sd=np.sqrt(0.02), seed=2)
    bins = np.digitize(big.x_train, np.linspace(0, 0.5, 11)) - 1
    centres = np.linspace(0.025, 0.475, 10)
    means = np.array([big.y_train[bins == b].mean() for b in range(10)])
    np.testing.assert_allclose(means, regression.conditional_mean("blundell", centres, sd), atol=0.03)


@pytest.mark.parametrize("kwargs, message", [
    (dict(name="cosine"), "unknown task 'cosine'"),
    (dict(name="sine", n_train=1), "n_train >= 2"),
    (dict(name="sine", n_grid=1), "n_grid >= 2"),
    (dict(name="blundell", noise_sd=-0.1), "noise_sd must be >= 0"),
])
def test_bad_task_arguments_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        regression.load(**kwargs)


# --- model ------------------------------------------------------------------


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 1))
    return x, np.sin(3 * x[:, 0]) + 0.1 * rng.standard_normal(n)


def test_regressor_variables_and_dims():
    X, y = _data()
    model = mlp_regressor(X, y, hidden=(4, 3))
    assert {rv.name for rv in model.free_RVs} == {
        "W_0", "b_0", "W_1", "b_1", "W_2", "b_2", "sigma"}  # fixed hyperprior: no scale_<l>
    dims = model.named_vars_to_dims
    assert dims["W_0"] == ("feature", "unit_0") and dims["W_2"] == ("unit_1", "output")
    assert dims["mu"] == ("obs",) and dims["y_obs"] == ("obs",)
    np.testing.assert_array_equal(model["y"].get_value(), y.astype(model["y"].dtype))
    assert np.isfinite(model.compile_logp(mode="FAST_COMPILE")(model.initial_point()))


def test_fixed_noise_and_hierarchical_scales():
    X, y = _data()
    fixed = mlp_regressor(X, y, noise=0.1)
    assert "sigma" not in fixed.named_vars
    # The likelihood is Normal(mu, 0.1): all weights 0 and the output bias 0.5 give mu = 0.5.
    point = fixed.initial_point()
    point["b_2"] = np.array([0.5])
    logp = fixed.compile_logp(vars=[fixed["y_obs"]], mode="FAST_COMPILE")
    assert float(logp(point)) == pytest.approx(st.norm(0.5, 0.1).logpdf(y).sum(), rel=1e-9)
    hier = mlp_regressor(X, y, hyperprior="halfnormal", activation="relu")
    assert {"scale_0", "scale_1", "scale_2"} <= {rv.name for rv in hier.free_RVs}


@pytest.mark.parametrize("kwargs, message", [
    (dict(X=np.zeros(5), y=np.zeros(5)), "X must be"),
    (dict(X=np.zeros((5, 1)), y=np.zeros(4)), "X must be"),
    (dict(X=np.zeros((5, 1)), y=np.zeros((5, 1))), "X must be"),
    (dict(X=np.zeros((5, 1)), y=np.array([0, 1, np.nan, 0, 0])), "finite"),
    (dict(activation="swish"), "unknown activation 'swish'"),
    (dict(noise="studentt"), "unknown noise model 'studentt'"),
    (dict(noise=-1.0), "noise must be 'halfnormal' or a positive number"),
    (dict(noise=0), "noise must be 'halfnormal' or a positive number"),
    (dict(noise_scale=0.0), "noise_scale must be positive"),
    (dict(hidden=(10, 0)), "hidden layer sizes must be >= 1"),
    (dict(prior="gauss"), "unknown prior 'gauss'"),
    (dict(total_size=3), "total_size must be >= len"),
])
def test_regressor_rejects_bad_input(kwargs, message):
    X, y = _data(5)
    args = dict(X=X, y=y)
    args.update({k: kwargs.pop(k) for k in ("X", "y") if k in kwargs})
    with pytest.raises(ValueError, match=message):
        mlp_regressor(args["X"], args["y"], **kwargs)


# --- predict ----------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted_regressor():
    X, y = _data(60, seed=1)
    model = mlp_regressor(X, y, hidden=(5, 4))
    result = bnn_zoo.fit(model, steps=400, optimizer=optax.adam(0.01), progressbar=False)
    return X, result, bnn_zoo.sample(result, 30, random_seed=0, log_likelihood=False)


def test_predict_mu_is_the_forward_pass_of_each_draw(fitted_regressor):
    X, result, idata = fitted_regressor
    X_new = np.linspace(-2, 2, 23)[:, None]
    pred = bnn_zoo.predict(result, {"X": X_new}, idata=idata, var_names=["mu", "y_obs"], chunk=7)
    mu = pred["predictions"]["mu"].values[0]
    assert mu.shape == (30, 23) and mu.dtype == np.float64
    post = {k: v.values[0] for k, v in idata["posterior"].items()}
    h = X_new[None]
    for layer in range(3):
        h = h @ post[f"W_{layer}"] + post[f"b_{layer}"][:, None, :]
        if layer < 2:
            h = np.tanh(h)
    np.testing.assert_allclose(mu, h[..., 0], rtol=1e-6, atol=1e-9)
    assert mu.std(0).min() > 0  # draws differ
    # y_obs is mu plus noise of the draw's sigma: standardised, it is N(0, 1).
    z = (pred["predictions"]["y_obs"].values[0] - mu) / post["sigma"][:, None]
    assert st.kstest(z.ravel(), "norm").pvalue > 1e-3
    # The training data stay in the model.
    np.testing.assert_array_equal(result.model["X"].get_value(), X.astype(result.model["X"].dtype))


def test_predict_rejects_unknown_variables_and_empty_inputs(fitted_regressor):
    _, result, idata = fitted_regressor
    with pytest.raises(ValueError, match="no variable 'p'"):
        bnn_zoo.predict(result, {"X": np.zeros((3, 1))}, idata=idata, var_names=["p"])
    with pytest.raises(ValueError, match="must be non-empty"):
        bnn_zoo.predict(result, {"X": np.zeros((0, 1))}, idata=idata, var_names=["mu"])


# --- the experiment -----------------------------------------------------------


def test_a_short_run_writes_metrics_grid_and_figure(tmp_path, capsys):
    out, figs = tmp_path / "res", tmp_path / "figs"
    code = experiment.main(["--task", "all", "--beta", "1", "--steps", "300", "--draws", "64",
                            "--seed", "4", "--out", str(out), "--figures", str(figs),
                            "--no-progress"])
    assert code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert sum("rmse_in" in line for line in lines) == 2  # one line per run
    for name, activation in (("sine", "tanh"), ("blundell", "relu")):
        folder = out / "regression" / f"{name}-beta1-s4"
        m = json.loads((folder / "metrics.json").read_text())
        assert REQUIRED <= set(m)
        assert (m["task"], m["beta"], m["seed"], m["steps"], m["draws"]) == (name, 1.0, 4, 300, 64)
        assert m["activation"] == activation and m["hidden"] == [10, 10]
        restarts = experiment.ARCHITECTURE[name]["restarts"]
        assert m["restarts"] == restarts and (m["elbo_restarts"] is None) == (restarts == 1)
        grid = np.loadtxt(folder / "grid.csv", delimiter=",", skiprows=1)
        assert grid.shape == (400, 8)
        # The metrics are those of the written grid: x, truth, truth_e0, mean, sd, lo, hi, in_range.
        inside = grid[:, 7] == 1
        assert m["rmse_in"] == pytest.approx(np.sqrt(np.mean((grid[inside, 3] - grid[inside, 1]) ** 2)), rel=1e-4)
        assert m["sd_ratio_out_in"] == pytest.approx(grid[~inside, 4].mean() / grid[inside, 4].mean(), rel=1e-4)
        assert np.all(grid[:, 5] <= grid[:, 3]) and np.all(grid[:, 3] <= grid[:, 6])  # lo <= mean <= hi
        png = figs / "regression" / f"{name}-beta1-s4.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in (out / "regression").iterdir() if p.name.startswith(".")]


def test_the_default_blundell_fit_meets_the_targets(tmp_path):
    # The documented claim at beta = 1 with the script's defaults (README).
    code = experiment.main(["--task", "blundell", "--beta", "1", "--draws", "300",
                            "--out", str(tmp_path), "--figures", str(tmp_path), "--no-progress"])
    assert code == 0
    m = json.loads((tmp_path / "regression" / "blundell-beta1-s0" / "metrics.json").read_text())
    assert 0.9 <= m["coverage95_in"] <= 0.99
    # The conformal intervals hold their level on the 1,000 test targets (binomial sd 0.7 points).
    assert 0.93 <= m["conf_coverage95_in"] <= 0.97 and 0.87 <= m["conf_coverage90_in"] <= 0.93
    assert m["coverage50_in"] < m["coverage90_in"] < m["coverage95_in"]
    assert m["width50_in"] < m["width90_in"] < m["width95_in"]
    assert m["sd_ratio_out_in"] >= 3
    assert m["rmse_in"] < 0.05


def test_the_default_sine_mixture_meets_the_targets(tmp_path):
    # The documented claim at beta = 1: five restarts (README); one fit alone gives ~1.2x.
    code = experiment.main(["--task", "sine", "--beta", "1", "--draws", "300",
                            "--out", str(tmp_path), "--figures", str(tmp_path), "--no-progress"])
    assert code == 0
    m = json.loads((tmp_path / "regression" / "sine-beta1-s0" / "metrics.json").read_text())
    assert m["restarts"] == 5 and m["activation"] == "tanh"
    assert 0.9 <= m["coverage95_in"] <= 0.99
    assert m["sd_ratio_out_in"] >= 3
    assert m["rmse_in"] < 0.06


def test_run_folder_and_figure_names(tmp_path):
    def cfg(task, beta=1.0, seed=0, restarts=None):
        restarts = experiment.ARCHITECTURE[task]["restarts"] if restarts is None else restarts
        return experiment.RegressionConfig(task=task, beta=beta, seed=seed, restarts=restarts,
                                           dataset="regression", out=tmp_path, figures=tmp_path)

    f = experiment.figure_path
    assert f(cfg("sine"), experiment.BETAS).name == "sine.png"
    assert f(cfg("sine", 0.1), (0.1,)).name == "sine-beta0.1.png"
    assert f(cfg("blundell", seed=2), experiment.BETAS).name == "blundell-s2.png"
    assert f(cfg("sine", restarts=1), (1.0,)).name == "sine-beta1-r1.png"
    assert cfg("sine", restarts=1).run_dir == tmp_path / "regression" / "sine-beta1-s0-r1"
    assert cfg("blundell", 0.1, seed=3).run_dir.name == "blundell-beta0.1-s3"


@pytest.mark.parametrize("args, message", [
    (["--task", "cosine"], "argument --task: invalid choice: 'cosine'"),
    (["--beta", "0"], "argument --beta: must be positive and finite, got 0"),
    (["--beta", "-1"], "argument --beta: must be positive"),
    (["--steps", "0"], "argument --steps: must be a positive integer"),
    (["--restarts", "0"], "argument --restarts: must be a positive integer"),
    (["--lr", "abc"], "argument --lr: invalid"),
    (["--noise", "gamma"], "argument --noise: must be 'halfnormal' or a positive number"),
    (["--noise", "-0.1"], "argument --noise: must be 'halfnormal' or a positive number"),
    (["--hidden", "10,x"], "argument --hidden: must be comma-separated integers"),
    (["--hidden", "10,0"], "argument --hidden: must be integers >= 1"),
    (["--activation", "swish"], "argument --activation: invalid choice"),
    (["--data-noise", "-1"], "argument --data-noise: must be >= 0"),
])
def test_bad_flags_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, args, message):
    out, figs = tmp_path / "out", tmp_path / "figs"
    with pytest.raises(SystemExit) as exit_:
        experiment.main([*args, "--out", str(out), "--figures", str(figs)])
    assert exit_.value.code == 2
    stderr = capsys.readouterr().err
    assert message in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert not out.exists() and not figs.exists()


def test_bad_flag_exit_status_of_the_real_command(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "bnn_zoo.experiments.regression", "--beta", "0", "--out", "out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env=command_env(),
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("python -m bnn_zoo.experiments.regression: error: argument --beta: "
                                   "must be positive and finite, got 0")
    assert not (tmp_path / "out").exists()
