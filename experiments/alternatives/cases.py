"""The cases of ``bnn-zoo alternatives``: each benchmark's data, model, inputs and method settings.

A :class:`Spec` names a case (benchmark, case, seed, ``--quick``); its
benchmark's class (:data:`BENCHES`: :class:`Toy`, :class:`Regression`,
:class:`MNIST`) rebuilds the data, the PyMC model under a prior pair, the
input sets every method predicts at, and each method's settings, in
whichever process runs the method (:mod:`~bnn_zoo.experiments.alternatives.fits`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["BENCHES", "BENCHMARKS", "METHODS", "MNIST", "NOT_ON", "REGRESSION_TASKS", "Benchmark", "Regression",
           "Spec", "Toy"]

#: The methods ``--methods`` chooses from, in the order they run and appear in the tables.
METHODS = ("nuts", "advi", "fullrank_advi", "advi_mixture", "advi_best_prior", "sgld", "csgld", "ensemble",
           "mc_dropout", "swag")
#: The benchmarks, the command's positional argument.
BENCHMARKS = ("toy", "regression", "mnist")
#: The methods each benchmark does not run: NUTS and a full-rank q do not scale to the MNIST
#: MLP's 478,410 weights, and the prior study that picks ``advi_best_prior``'s pair was on toy data.
NOT_ON = {"mnist": ("nuts", "fullrank_advi", "advi_best_prior", "advi_mixture"),
          "regression": ("advi_best_prior",)}
#: The regression cases (``--cases``): the sine, Blundell's curve, and the sine with a gap.
REGRESSION_TASKS = ("sine", "blundell", "gap")


@dataclass(frozen=True)
class Spec:
    """One benchmark case: what a worker process needs to rebuild its data and models.

    Parameters
    ----------
    benchmark : {"toy", "regression", "mnist"}
        The benchmark.
    case : str
        ``"moons"`` or ``"circles"`` (toy), a name of :data:`REGRESSION_TASKS`, or ``"mlp2x400"``
        (MNIST).
    seed : int, default 0
        The data's and every method's seed.
    quick : bool, default False
        Tiny data and few steps (what the tests run).
    noise : float, default 0.2
        The toy data's noise.
    data_dir : str, optional
        MNIST's folder (default ``$MNIST_DIR`` or a download).
    epochs : int, default 10
        MNIST: epochs of every method.
    limit_train : int, optional
        MNIST: use the first ``limit_train`` training images.
    options : dict, default {}
        Extra settings; not part of the case's identity.
    """

    benchmark: str
    case: str  # "moons" / a regression task / "mlp2x400"
    seed: int = 0
    quick: bool = False  # CI's version: tiny data, few steps
    noise: float = 0.2
    data_dir: str | None = None
    epochs: int = 10
    limit_train: int | None = None
    options: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def key_prefix(self) -> str:
        """``<benchmark>-<case>-s<seed>`` (``-quick`` added): the start of the case's record keys."""
        return f"{self.benchmark}-{self.case}-s{self.seed}{'-quick' if self.quick else ''}"


# --- the benchmarks: data, model, inputs, settings --------------------------------


class Benchmark:
    """A benchmark case's data, PyMC model, prediction inputs and per-method settings.

    A subclass sets ``settings`` (each method's keyword arguments) and ``dropout_data`` (MC
    dropout's network and data) in its ``__init__``, and defines :meth:`model` and :meth:`inputs`.
    """

    var = "p"  # the predicted variable
    prior = ("normal", "fixed")

    def model(self, prior: tuple[str, str]):
        """The case's PyMC model under ``prior``, a (weight prior, hyperprior) pair of names."""
        raise NotImplementedError

    def inputs(self) -> dict[str, np.ndarray]:
        """The input sets every method predicts at, by name (``"test"`` among them)."""
        raise NotImplementedError


class Toy(Benchmark):
    """Moons (or circles), a 2-5-5-2 tanh net with N(0, 1) weights, where NUTS is the reference.

    The step sizes of SGLD, cyclical SGLD and SWAG are each chosen from 3-4 values by their
    agreement with NUTS on seed 0 (docs/user_guide/alternatives.md): a best case, which a user
    without a reference cannot tune to. ADVI runs with the toy experiment's defaults.

    Parameters
    ----------
    spec : Spec
        The case.
    """

    GRID = 60

    def __init__(self, spec: Spec):
        from bnn_zoo.data import toy

        self.spec = spec
        n_train, n_test = (200, 100) if spec.quick else (700, 1000)
        self.split = toy.load(spec.case, n_train=n_train, n_test=n_test, noise=spec.noise, seed=spec.seed)
        self.xx, self.yy, self.grid = self.split.grid(self.GRID)
        steps = 400 if spec.quick else 10_000
        self.settings = {
            "nuts": dict(draws=60, tune=60, chains=2) if spec.quick else dict(draws=1000, tune=1000, chains=4),
            "advi": dict(steps=steps, lr=0.05, lr_final=0.01, restarts=2 if spec.quick else 6, pick_at=0.2,
                         fullrank_lr=0.001, draws=100 if spec.quick else 1000),
            "sgld": dict(steps=1000 if spec.quick else 100_000, lr=0.3, thin=10 if spec.quick else 50),
            "csgld": dict(steps=1000 if spec.quick else 100_000, lr=1.0, cycles=4, explore=0.5,
                          thin=10 if spec.quick else 25),
            "ensemble": dict(members=2 if spec.quick else 5, steps=steps, lr=0.01),
            "mc_dropout": dict(fit=dict(steps=steps, lr=0.01, rate=0.1), draws=100 if spec.quick else 1000),
            "swag": dict(map_steps=steps, map_lr=0.01, steps=200 if spec.quick else 5_000, lr=0.1,
                         batch_size=50, collect_every=10, rank=20, draws=100 if spec.quick else 1000),
        }
        self.best_prior = ("laplace", "fixed")  # best by held-out ELPD at moons 0.2 (docs/user_guide/comparing_priors.md)
        self.dropout_data = dict(X=self.split.X_train, y=self.split.y_train, kind="classifier", hidden=(5, 5),
                                 activation="tanh")

    def model(self, prior):
        from bnn_zoo.experiments.toy import priors as toy_priors

        return toy_priors.model(toy_priors.ToyConfig(prior=prior[0], hyperprior=prior[1]), self.split)

    def inputs(self):
        return {"test": self.split.X_test, "grid": self.grid}


class Regression(Benchmark):
    """A 1-D regression task, with the regression experiment's architecture and ADVI settings.

    Parameters
    ----------
    spec : Spec
        The case (``"gap"``: the sine with :data:`bnn_zoo.data.regression.GAP` left out).
    """

    var = "mu"

    def __init__(self, spec: Spec):
        from bnn_zoo.data import regression
        from bnn_zoo.experiments.regression.command import ARCHITECTURE, DEFAULTS

        self.spec = spec
        task = "sine" if spec.case == "gap" else spec.case
        self.task = regression.load(task, n_train=60 if spec.quick else None, seed=spec.seed,
                                    gap=regression.GAP if spec.case == "gap" else None)
        arch = ARCHITECTURE[task]
        self.hidden, self.activation = arch["hidden"], arch["activation"]
        steps = 500 if spec.quick else DEFAULTS["steps"]
        self.settings = {
            # Regression posteriors make NUTS take its deepest trees (1,024 steps): 4 x 500 draws.
            "nuts": dict(draws=60, tune=60, chains=2) if spec.quick else dict(draws=500, tune=500, chains=4),
            "advi": dict(steps=steps, lr=DEFAULTS["lr"], lr_final=DEFAULTS["lr_final"], restarts=2 if spec.quick else 5,
                         pick_at=0.2, fullrank_lr=DEFAULTS["fullrank_lr"], draws=100 if spec.quick else 1000),
            "sgld": dict(steps=1000 if spec.quick else 100_000, lr=0.01, thin=10 if spec.quick else 50),
            "csgld": dict(steps=1000 if spec.quick else 100_000, lr=0.02, cycles=4, explore=0.5,
                          thin=10 if spec.quick else 25),
            "ensemble": dict(members=2 if spec.quick else 5, steps=steps // 2, lr=0.01),
            "mc_dropout": dict(fit=dict(steps=steps // 2, lr=0.01, rate=0.1), draws=100 if spec.quick else 1000),
            "swag": dict(map_steps=steps // 2, map_lr=0.01, steps=200 if spec.quick else 5_000, lr=0.01,
                         batch_size=20, collect_every=10, rank=20, draws=100 if spec.quick else 1000),
        }
        self.dropout_data = dict(X=self.task.x_train[:, None], y=self.task.y_train, kind="regressor",
                                 hidden=self.hidden, activation=self.activation)

    def model(self, prior):
        from bnn_zoo.models.mlp import mlp_regressor

        return mlp_regressor(self.task.x_train[:, None], self.task.y_train, hidden=self.hidden,
                             activation=self.activation, prior=prior[0], hyperprior=prior[1])

    def inputs(self):
        return {"grid": self.task.x_grid[:, None], "test": self.task.x_test[:, None]}


class MNIST(Benchmark):
    """The 2x400 ReLU MLP of the reproduction table, N(0, 1) weights, on flat [0, 1] images, in float32.

    Every method predicts the test images rotated by :attr:`ANGLES` and the out-of-distribution
    sets of :func:`bnn_zoo.data.shift.ood_sets`.

    Parameters
    ----------
    spec : Spec
        The case (its epochs, training images and data folder).
    """

    ANGLES = tuple(range(0, 181, 15))
    HIDDEN = (400, 400)

    def __init__(self, spec: Spec):
        from bnn_zoo.data import mnist, shift

        self.spec = spec
        d = mnist.load(spec.data_dir, normalize="255", seed=spec.seed)
        n = spec.limit_train or len(d.X_train)
        self.X_train, self.y_train = d.flat(d.X_train[:n]), d.y_train[:n]
        n_test = 200 if spec.quick else len(d.X_test)
        images, self.y_test = d.X_test[:n_test, 0], d.y_test[:n_test]
        self.sets = {f"rot{a}": d.flat(shift.rotate(images, a)[:, None]) for a in self.ANGLES}
        rng = np.random.default_rng(spec.seed)
        self.sets.update(shift.ood_sets(images, rng, n_noise=200 if spec.quick else 2_000))
        self.sets = {k: d.flat(v[:, None]) if v.ndim == 3 else v for k, v in self.sets.items()}
        per_epoch = len(self.X_train) // 128
        steps = spec.epochs * per_epoch
        draws = 4 if spec.quick else 20
        self.settings = {
            "advi": dict(steps=steps, lr=1e-3, lr_final=0.01, restarts=1, pick_at=0, batch_size=128,
                         init_std=0.03, draws=draws),
            "sgld": dict(steps=steps, lr=0.05, thin=max(steps // (2 * draws), 1), batch_size=128),
            "csgld": dict(steps=steps, lr=0.1, cycles=max(min(4, steps // 10), 1), explore=0.5,
                          thin=max(steps // (2 * draws), 1), batch_size=128),
            "ensemble": dict(members=2 if spec.quick else 5, steps=steps, lr=1e-3, batch_size=128),
            "mc_dropout": dict(fit=dict(steps=steps, lr=1e-3, rate=0.2, batch_size=128), draws=draws),
            "swag": dict(map_steps=steps, map_lr=1e-3, steps=max(steps // 2, 2 * per_epoch), lr=0.01,
                         batch_size=128, collect_every=per_epoch if not spec.quick else 2,
                         rank=20 if not spec.quick else 2, draws=draws),
        }
        self.dropout_data = dict(X=self.X_train, y=self.y_train, kind="classifier", hidden=self.HIDDEN,
                                 activation="relu")

    def model(self, prior):
        import bnn_zoo
        from bnn_zoo.models import mlp_classifier

        with bnn_zoo.precision(True):  # as in the reproduction: float32 halves the step
            return mlp_classifier(self.X_train, self.y_train, hidden=self.HIDDEN, n_classes=10,
                                  activation="relu", prior=prior[0], hyperprior=prior[1])

    def inputs(self):
        return self.sets


#: Each benchmark's class.
BENCHES = {"toy": Toy, "regression": Regression, "mnist": MNIST}
