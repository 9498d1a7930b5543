"""The JAX engine and the functional core: noise, softplus, batches, state, compiled programs, and
agreement with PyMC's own step."""


import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.extend.random import threefry_2x32
from scipy import stats

import bnn_zoo
from bnn_zoo.data import toy
from bnn_zoo.inference import families
from bnn_zoo.inference.advi import core, engine, noise, objective, optim
from bnn_zoo.inference.alternatives import reference
from bnn_zoo.inference.compile import cost, graphs, jaxmodel
from bnn_zoo.inference.advi.starts import initial_mean
from bnn_zoo.inference.advi.engine import batch_indices
from bnn_zoo.inference.families import softplus
from bnn_zoo.inference.posterior.draws import draw_z, evaluate_z
from bnn_zoo.models import mlp_classifier

jax.config.update("jax_enable_x64", True)  # as pytensor's JAX backend sets it


def test_threefry_is_jax_threefry_bit_for_bit():
    rng = np.random.default_rng(0)
    key = rng.integers(0, 2**32, 2, dtype=np.uint64).astype(np.uint32)
    count = rng.integers(0, 2**32, 2 * 1000, dtype=np.uint64).astype(np.uint32)
    ours = noise.threefry2x32(jnp.uint32(key[0]), jnp.uint32(key[1]), count[:1000], count[1000:])
    np.testing.assert_array_equal(np.concatenate(ours), threefry_2x32(key, count))


def test_noise_is_standard_normal_and_independent():
    words = noise.key_words(jax.random.key(7))
    a = np.asarray(noise.normal(words, 3, 0, (200_000,), jnp.float32), dtype=np.float64)
    assert stats.kstest(a, "norm").pvalue > 1e-3
    assert abs(a.mean()) < 4 / np.sqrt(a.size) and abs(a.var() - 1) < 0.02
    b = np.asarray(noise.normal(words, 4, 0, (200_000,), jnp.float32))  # next step
    c = np.asarray(noise.normal(words, 3, 200_000, (200_000,), jnp.float32))  # next counters
    for other in (b, c):
        assert abs(np.corrcoef(a, other)[0, 1]) < 4 / np.sqrt(a.size)
    assert abs(np.corrcoef(a[:-1], a[1:])[0, 1]) < 4 / np.sqrt(a.size)
    again = np.asarray(noise.normal(words, 3, 0, (200_000,), jnp.float32), dtype=np.float64)
    np.testing.assert_array_equal(again, a)  # a function of (key, step, counter) only
    other_key = np.asarray(noise.normal(noise.key_words(jax.random.key(8)), 3, 0, (1000,), jnp.float32))
    assert not np.allclose(other_key, a[:1000])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softplus_and_its_gradient_are_accurate(dtype):
    x = np.concatenate([np.linspace(-80, 80, 100_001), [-1e-8, 0.0, 1e-8, -30.0]]).astype(dtype)
    value = np.asarray(softplus(jnp.asarray(x)), np.float64)
    slope = np.asarray(jax.vmap(jax.grad(softplus))(jnp.asarray(x)), np.float64)
    exact = np.logaddexp(0.0, x.astype(np.float64))
    exact_slope = 1 / (1 + np.exp(-x.astype(np.float64)))
    ulp = np.finfo(dtype).eps
    assert np.max(np.abs(value - exact) / exact) < 4 * ulp
    assert np.max(np.abs(slope - exact_slope) / exact_slope) < 4 * ulp


def test_unflatten_and_its_gradient_are_jnp_split():
    # The engine's split has its own gradient (a concatenation behind barriers);
    # it must be the plain split's, piece for piece, in and out of jit.
    layout = jaxmodel.Layout((("a", slice(0, 6), (2, 3), "float64"), ("b", slice(6, 10), (4,), "float64"),
                              ("c", slice(10, 11), (), "float64")))
    z = jnp.linspace(-1.0, 2.0, 11)

    def plain(z):
        return [p.reshape(s) for p, (_, _, s, _) in zip(jnp.split(z, [6, 10]), layout.slots)]

    def loss(unflatten):
        return lambda z: sum(jnp.sum(jnp.sin(v) * (i + 1)) for i, v in enumerate(unflatten(z)))

    for ours, ref in zip(layout.unflatten(z), plain(z)):
        np.testing.assert_array_equal(ours, ref)
    expected = jax.grad(loss(plain))(z)
    assert len(set(np.round(np.asarray(expected) / np.cos(z), 12))) == 3  # the pieces' weights differ
    np.testing.assert_allclose(jax.grad(loss(layout.unflatten))(z), expected, rtol=1e-15)
    np.testing.assert_allclose(jax.jit(jax.grad(loss(layout.unflatten)))(z), expected, rtol=1e-15)


def test_batches_are_epochs_of_a_permutation():
    rows = batch_indices(seed=0, n=103, batch_size=10, steps=25)  # 10 batches per epoch
    assert rows.shape == (25, 10)
    first, second = rows[:10].ravel(), rows[10:20].ravel()
    assert len(set(first)) == 100 and len(set(second)) == 100  # no row twice in an epoch
    assert set(first) <= set(range(103))
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(rows, batch_indices(seed=0, n=103, batch_size=10, steps=25))


@pytest.fixture(scope="module")
def moons():
    return toy.load("moons", n_train=300, n_test=10, noise=0.2, seed=0)


def _toy_model(name, n_train=60, **kwargs):
    split = toy.load(name, n_train=n_train, n_test=10, noise=0.2, seed=0)
    return mlp_classifier(split.X_train, split.y_train, hidden=(3, 4),
                          **{"prior": "cauchy", "hyperprior": "halfnormal", **kwargs})


def _compose(model, *, lr=0.01, batch_size=None, seed=0):
    """The functional core assembled by hand, as a user of the library would (blackjax style):
    the model as JAX, the objective, the optimizer, the state, the compiled steps."""
    point = model.initial_point()
    layout = jaxmodel.Layout.of(model, point)
    density = jaxmodel.compile_model(model, layout)
    params = {k: jnp.asarray(v) for k, v in families.MEAN_FIELD.init(initial_mean(layout, point, seed),
                                                                      0.01).items()}
    optimizer = optax.adam(lr)
    n = model["X"].get_value().shape[0]
    steps = engine.compile_steps(
        objective.ELBOFunction(density, families.MEAN_FIELD, scale=n / batch_size if batch_size else 1.0),
        optimizer, sliced=(batch_size is not None,) * 2, n=n, batch_size=batch_size, mc_samples=1,
        kl_weight=objective.constant(), dtype="float64")
    data = tuple(jnp.asarray(v.get_value()) for v in model.data_vars)
    return density, core.init(params, optimizer), steps, engine.Runner(steps, data, seed)


def test_core_steps_by_hand_are_the_fit(moons):
    model = mlp_classifier(moons.X_train, moons.y_train, hidden=(5, 5))
    _, state, _, runner = _compose(model, lr=0.05, batch_size=50, seed=2)
    state, elbo = runner.advance(state, 0, 120)
    result = bnn_zoo.fit(model, steps=120, optimizer=optax.adam(0.05), batch_size=50, random_seed=2,
                         average=0, progressbar=False)
    np.testing.assert_allclose(elbo, result.elbo, rtol=1e-12)
    np.testing.assert_allclose(state.params["mu"], result.params["mu"], rtol=1e-12)
    assert int(state.step) == 120


def test_state_is_updated_in_place(moons):
    model = mlp_classifier(moons.X_train, moons.y_train, hidden=(5, 5))
    _, state, _, runner = _compose(model, batch_size=32)
    before = jax.tree_util.tree_leaves(state)
    state, _ = runner.advance(state, 0, 50)
    # The state was donated to the compiled loop: its buffers were reused, not
    # copied, so the old handles are gone.
    assert all(a.is_deleted() for a in before)
    assert np.isfinite(state.params["mu"]).all()


def test_resumed_engine_fit_is_the_uninterrupted_fit(moons, tmp_path):
    def model():
        return mlp_classifier(moons.X_train, moons.y_train, hidden=(5, 5))

    settings = dict(optimizer=optim.make("adam", 0.05, 300), batch_size=50, progressbar=False, random_seed=2)
    whole = bnn_zoo.fit(model(), steps=300, **settings)
    ckpt = tmp_path / "half.nc"
    bnn_zoo.fit(model(), steps=130, checkpoint=bnn_zoo.Checkpoint(ckpt), **settings)  # stops mid-epoch (6 batches each)
    resumed = bnn_zoo.fit(model(), steps=300, checkpoint=bnn_zoo.Checkpoint(ckpt, resume=True), **settings)
    assert resumed.config["resumed_at"] == 130
    np.testing.assert_array_equal(resumed.elbo, whole.elbo)
    np.testing.assert_array_equal(resumed.params["mu"], whole.params["mu"])


def test_schedule_decays_scale_the_rate_after_them():
    rate, text = optim.schedule("constant", 0.05, 100, decays={30: 0.25, 60: 0.5})
    np.testing.assert_allclose([float(rate(t)) for t in (0, 29, 30, 59, 60, 99)],
                               [0.05, 0.05, 0.0125, 0.0125, 0.00625, 0.00625])
    cosine, text_c = optim.schedule("cosine", 0.05, 100, final=0.01)
    assert float(cosine(0)) == pytest.approx(0.05) and float(cosine(100)) == pytest.approx(5e-4)
    exponential, _ = optim.schedule("exponential", 0.05, 100, final=0.01)
    assert float(exponential(50)) == pytest.approx(0.005) and float(exponential(100)) == pytest.approx(5e-4)
    assert text == "constant(0.05) x 0.25 from step 30, 0.5 from step 60"
    assert optim.make("adam", 0.05, 100, schedule_kind="cosine").description == f"adam(lr={text_c})"


def test_a_later_decay_on_resume_continues_the_decayed_fit(moons, tmp_path):
    def model():
        return mlp_classifier(moons.X_train, moons.y_train, hidden=(5, 5))

    settings = dict(batch_size=50, progressbar=False, random_seed=2, average=0)
    decayed = optim.make("adam", 0.05, 200, decays={130: 0.1})
    whole = bnn_zoo.fit(model(), steps=200, optimizer=decayed, **settings)
    ckpt = tmp_path / "constant.nc"
    bnn_zoo.fit(model(), steps=130, checkpoint=bnn_zoo.Checkpoint(ckpt), optimizer=optim.make("adam", 0.05, 130),
                **settings)
    resumed = bnn_zoo.fit(model(), steps=200, checkpoint=bnn_zoo.Checkpoint(ckpt, resume=True), optimizer=decayed,
                          **settings)
    # Equal to rounding: the first 130 steps ran without the multiply by 1.
    np.testing.assert_allclose(resumed.elbo, whole.elbo, rtol=1e-9)
    np.testing.assert_allclose(resumed.params["mu"], whole.params["mu"], rtol=1e-9, atol=1e-12)
    assert resumed.config["history"] == [[0, "adam(lr=constant(0.05))"],
                                         [130, "adam(lr=constant(0.05) x 0.1 from step 130)"]]


@pytest.mark.parametrize("decays", [{0: 0.1}, {10: 0.0}, {2.5: 0.1}, {10: float("inf")}])
def test_bad_decays_are_refused(decays):
    with pytest.raises(ValueError, match="decays need integer steps >= 1 and positive finite factors"):
        optim.make("adam", 0.05, 20, decays=decays)


def test_toy_bnn_elbo_matches_pm_fit(moons):
    """Same model, same initial q, same settings: the engine and PyMC's step reach the same ELBO.

    The two draw different noise, so their paths differ, and the toy BNN has
    several optima. Measured over seeds 0-3 (10,000 steps, lr 0.05, 300
    points): both ended in the same optimum for seeds 0 and 3 (ELBO about
    -147 and -92), where their running ELBOs (mean of the last 1,000 steps)
    differed by 0.50 and 0.21 nats and the ELBOs of the final q (E_q[log p -
    log q] from 4,000 draws, standard error 0.15-0.2) by 1.2 and 1.5; for
    seeds 1 and 2 one found the better optimum (about -92) and the other did
    not, once each way.
    """
    results = {}
    for name in ("jax", "pymc"):
        # measured (above) with InverseGamma(3, 2) on the scales, the registry's default then
        model = mlp_classifier(moons.X_train, moons.y_train, hidden=(5, 5),
                               hyperprior_params={"alpha": 3.0, "beta": 2.0})
        result = (bnn_zoo.fit(model, steps=10_000, optimizer=optax.adam(0.05), random_seed=0, average=0,
                              progressbar=False) if name == "jax"
                  else reference.pymc_fit(model, steps=10_000, learning_rate=0.05, seed=0))
        z, log_q = draw_z(result, 4000, seed=1)
        results[name] = (result.elbo_final, np.mean(evaluate_z(result, z, ["logp"])["logp"] - log_q))
    (trace_a, final_a), (trace_b, final_b) = results["jax"], results["pymc"]
    assert abs(trace_a - trace_b) < 1.5, results
    assert abs(final_a - final_b) < 3.0, results


def test_one_structure_on_two_data_sets_is_one_compiled_program(monkeypatch):
    # The data are arguments of the compiled loop, not constants in it: the same
    # prior pair on moons and on circles is one entry of JAX's compilation cache
    # (which outlives the process, unlike compile_model's memo, emptied here).
    texts = []
    for name in ("moons", "circles"):
        graphs.clear_memo()
        _, state, steps, runner = _compose(_toy_model(name))
        lowered = steps["loop"].lower(state, runner.key, 1, runner.data)
        texts.append(lowered.as_text(debug_info=False))
    assert texts[0] == texts[1]


def test_models_of_one_structure_share_their_compiled_functions(monkeypatch):
    graphs.clear_memo()
    fits = [bnn_zoo.fit(_toy_model(name), steps=1, progressbar=False) for name in ("moons", "circles")]
    assert fits[1].density is fits[0].density
    assert len([k for k in fits[0].density.jitted if k[0] == "fit"]) == 1  # one set of runners
    # Another structure: other constants (a prior scale, the data size) or other priors.
    for other in (_toy_model("circles", n_train=61), _toy_model("circles", prior="laplace"),
                  _toy_model("circles", hyperprior="fixed")):
        assert bnn_zoo.fit(other, steps=1, progressbar=False).density is not fits[0].density


def test_sharing_compiled_functions_leaves_the_fit_unchanged(monkeypatch):
    settings = dict(steps=300, optimizer=optim.make("adam", 0.05, 300), random_seed=1, progressbar=False)
    graphs.clear_memo()
    alone = bnn_zoo.fit(_toy_model("circles"), **settings)
    graphs.clear_memo()
    bnn_zoo.fit(_toy_model("moons"), **settings)
    shared = bnn_zoo.fit(_toy_model("circles"), **settings)
    assert shared.density is not alone.density  # really rebuilt, then shared
    np.testing.assert_array_equal(shared.elbo, alone.elbo)
    a, b = (bnn_zoo.sample(r, 50, random_seed=2) for r in (alone, shared))
    np.testing.assert_array_equal(a["sample_stats"]["log_p"], b["sample_stats"]["log_p"])


def test_steps_one_per_call_equal_steps_in_the_loop(monkeypatch):
    # Minibatches of 50 from 200 points (4 per epoch), steps 0-12 then 13-29 (a call that
    # starts mid-epoch and crosses epochs): the step runner (large models) and the compiled
    # loop (small ones) take the same steps.
    runs = {}
    for name, below in (("loop", np.inf), ("step", 0.0)):
        graphs.clear_memo()
        monkeypatch.setattr(cost, "LOOP_BELOW_FLOPS", below)
        _, state, steps, runner = _compose(_toy_model("moons", n_train=200), lr=0.05, batch_size=50,
                                           seed=3)
        state, first = runner.advance(state, 0, 13)
        state, second = runner.advance(state, 13, 17)
        assert steps["in_loop"] is (name == "loop")
        runs[name] = np.concatenate([first, second]), jax.tree_util.tree_leaves(state)
    np.testing.assert_allclose(runs["step"][0], runs["loop"][0], rtol=1e-10)
    for a, b in zip(runs["step"][1], runs["loop"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_iterate_averaging_is_the_mean_of_the_iterates():
    # Polyak-Ruppert: the state's average is the plain mean of the parameters after the steps
    # numbered average_from (0-based) and later; before, it follows them.
    model = _toy_model("moons")
    point = model.initial_point()
    layout = jaxmodel.Layout.of(model, point)
    density = jaxmodel.compile_model(model, layout)
    params = {k: jnp.asarray(v) for k, v in families.MEAN_FIELD.init(initial_mean(layout, point, 0), 0.01).items()}
    optimizer = optax.adam(0.05)
    elbo = objective.ELBOFunction(density, families.MEAN_FIELD)
    data = tuple(jnp.asarray(v.get_value()) for v in model.data_vars)
    words = noise.key_words(jax.random.key(0))
    state, seen = core.init(params, optimizer, average=True), []
    for _ in range(12):
        state, _ = core.step(state, words, data, objective=elbo, optimizer=optimizer, average_from=7)
        seen.append(state.params["mu"])
        if len(seen) <= 7:
            np.testing.assert_array_equal(state.average["mu"], state.params["mu"])
    np.testing.assert_allclose(state.average["mu"], np.mean(seen[7:], axis=0), rtol=1e-12)
    assert not np.allclose(state.average["mu"], np.mean(seen[6:], axis=0), rtol=1e-9)


def test_fit_many_is_the_separate_fits():
    """One vmapped program over fits on two data sets, two seeds each: each fit is bnn_zoo.fit's."""
    from bnn_zoo.inference.advi.batch import fit_many

    splits = [toy.load("moons", n_train=120, n_test=10, noise=0.2, seed=s) for s in (0, 1)]
    models = [mlp_classifier(s.X_train, s.y_train, hidden=(4,), prior="laplace", hyperprior="halfnormal")
              for s in splits]
    settings = dict(steps=600, optimizer=optim.make("adam", 0.03, 600, schedule_kind="cosine"), average=0.2)
    many = fit_many([models[0], models[0], models[1], models[1]], random_seed=[0, 1, 0, 1], **settings)
    for result, model, seed in zip(many, [models[0], models[0], models[1], models[1]], [0, 1, 0, 1]):
        alone = bnn_zoo.fit(model, random_seed=seed, progressbar=False, **settings)
        for name in alone.params:
            np.testing.assert_allclose(result.params[name], alone.params[name], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(result.elbo, alone.elbo, rtol=1e-9)
    assert not np.allclose(many[0].params["mu"], many[2].params["mu"])  # other data, another fit
    with pytest.raises(ValueError, match="one structure"):
        fit_many([models[0], mlp_classifier(splits[0].X_train, splits[0].y_train, hidden=(3,))])


def test_an_early_pick_keeps_the_best_restart_and_its_exact_fit():
    """Restarts picked early: each fit keeps the restart whose ELBO estimates over the last
    500 steps before the pick have the highest mean, and that restart's fit is bnn_zoo.fit's
    with its seed (the others stop; the kept one's steps are unchanged)."""
    from bnn_zoo.inference.advi.batch import PICK_WINDOW, fit_many, pick_step

    splits = [toy.load("moons", n_train=120, n_test=10, noise=0.4, seed=s) for s in (0, 1)]
    models = [mlp_classifier(s.X_train, s.y_train, hidden=(4, 4)) for s in splits]
    settings = dict(steps=1500, optimizer=optim.make("adam", 0.05, 1500, schedule_kind="cosine"), average=0.3)
    picked = fit_many(models, random_seed=[10, 20], restarts=4, pick_at=0.55, **settings)  # step 800
    assert len(picked) == 2
    for result, model, seed in zip(picked, models, [10, 20]):
        alone = [bnn_zoo.fit(model, random_seed=seed + k, progressbar=False, **settings) for k in range(4)]
        scores = [a.elbo[800 - PICK_WINDOW:800].mean() for a in alone]
        k = result.config["picked_restart"]
        assert k == int(np.argmax(scores)) and result.config["seed"] == seed + k
        np.testing.assert_allclose(result.config["pick_elbos"], scores, rtol=1e-9)
        np.testing.assert_allclose(result.params["mu"], alone[k].params["mu"], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(result.elbo, alone[k].elbo, rtol=1e-9)
    assert pick_step(0.2, 10_000) == 2000 and pick_step(0.2, 1234) == 200 and pick_step(0.99, 1000) == 900
    assert pick_step(0.0, 10_000) == 0 and pick_step(0.5, 150) == 0
    assert picked[0].config["pick_at"] == 0.55 and picked[0].config["pick_step"] == 800
    with pytest.raises(ValueError, match=r"pick_at must be a share of the steps in \[0, 1\), got 800"):
        fit_many(models, random_seed=[0, 1], restarts=2, pick_at=800, **settings)


def test_restarts_without_an_early_pick_keep_the_best_at_the_end():
    from bnn_zoo.inference.advi.batch import PICK_WINDOW, fit_many

    split = toy.load("moons", n_train=120, n_test=10, noise=0.4, seed=0)
    model = mlp_classifier(split.X_train, split.y_train, hidden=(4,))
    settings = dict(steps=700, optimizer=optim.make("adam", 0.05, 700), average=0)
    [result] = fit_many([model], random_seed=5, restarts=3, pick_at=0, **settings)
    alone = [bnn_zoo.fit(model, random_seed=5 + k, progressbar=False, **settings) for k in range(3)]
    scores = [a.elbo[-PICK_WINDOW:].mean() for a in alone]
    assert result.config["picked_restart"] == int(np.argmax(scores)) and result.config["pick_step"] == 0
    np.testing.assert_allclose(result.elbo, alone[int(np.argmax(scores))].elbo, rtol=1e-9)
