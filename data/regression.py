"""The 1-D synthetic regression tasks: Garg's sine wave and Blundell et al. 2015's curve.

Garg, "Bayesian Neural Networks and Variational Inference", fits the sine wave; Blundell et
al. 2015, "Weight Uncertainty in Neural Networks", draw the curve.

Each task is a noise-free curve ``f``, a noise model and a data range; the
network sees ``n_train`` noisy points inside the range and predicts on a grid
that reaches beyond it, where its uncertainty should grow.

``sine``
    ``y = sin(x) + e``, ``e ~ N(0, 0.1^2)``, ``x ~ U(-3, 3)`` (Garg gives
    2 x 10 tanh units but no range or noise: one period, seen through
    moderate noise, is what its figures show); grid ``[-6, 6]``.
``blundell``
    ``y = x + 0.3 sin(2 pi (x + e)) + 0.3 sin(4 pi (x + e)) + e``,
    ``e ~ N(0, 0.02)`` as the paper writes it (sd 0.02 here), 1000 inputs ``x ~ U(0, 0.5)``; grid ``[-0.2, 1.2]`` (Blundell et al.
    2015, section 5.2). The noise also enters inside the sines, so it is not
    additive: the mean of ``y`` given ``x`` is the damped curve
    ``x + 0.3 exp(-2 pi^2 s2) sin(2 pi x) + 0.3 exp(-8 pi^2 s2) sin(4 pi x)``
    (``E[sin(a (x + e))] = exp(-a^2 s2 / 2) sin(a x)``), not the noise-free
    ``f(x) = y(x, e=0)``. Both are returned.

    The paper does not say whether 0.02 is the sd or the variance. Read as
    the sd, the data are the clean wiggly curve of its Fig. 5, so that is
    the default; as the variance (``noise_sd=sqrt(0.02)``), the phase noise
    ``4 pi e`` of about 1.8 rad smears the data into a band.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GAP", "SETTINGS", "TASKS", "Task", "conditional_mean", "load"]

#: The regression tasks' names: what :func:`load` and :func:`conditional_mean` accept as ``name``.
TASKS = ("sine", "blundell")
#: The sine wave's gap (a third of its range) for the in-between case: the ``"gap"`` case of
#: :mod:`bnn_zoo.experiments.alternatives.cases` passes it to :func:`load`.
GAP = (-1.0, 1.0)


@dataclass(frozen=True)
class Task:
    """One regression task's training data, prediction grid and truth.

    ``x_*`` are 1-D; the models take ``x[:, None]``.

    Parameters
    ----------
    name : str
        The task.
    x_train, y_train : numpy.ndarray, shape (n_train,)
        The training data.
    x_test, y_test : numpy.ndarray, shape (n_test,)
        Fresh inputs inside the data range, and their noisy targets drawn like the training ones.
    data_range : tuple of float
        Where the training inputs were drawn.
    x_grid : numpy.ndarray, shape (n_grid,)
        Prediction inputs, reaching beyond the data range.
    f_grid : numpy.ndarray, shape (n_grid,)
        The noise-free curve on the grid.
    mean_grid : numpy.ndarray, shape (n_grid,)
        ``E[y | x]`` on the grid (equal to ``f_grid`` for additive noise).
    noise_sd : float
        The noise's sd.
    gap : tuple of float, optional
        An interval of the data range without data.
    """

    name: str
    x_train: np.ndarray  # (n_train,)
    y_train: np.ndarray  # (n_train,)
    x_test: np.ndarray  # (n_test,): fresh inputs inside the data range
    y_test: np.ndarray  # (n_test,): their noisy targets, drawn like the training ones
    data_range: tuple[float, float]  # where the training inputs were drawn
    x_grid: np.ndarray  # (n_grid,): prediction inputs, reaching beyond the data range
    f_grid: np.ndarray  # noise-free curve y(x, e=0) on the grid
    mean_grid: np.ndarray  # E[y | x] on the grid (equal to f_grid for additive noise)
    noise_sd: float  # sd of the noise e
    gap: tuple[float, float] | None = None  # an interval of the data range without data

    @property
    def in_range(self) -> np.ndarray:
        """Boolean mask of the grid points inside the data range (and outside the gap)."""
        lo, hi = self.data_range
        return (self.x_grid >= lo) & (self.x_grid <= hi) & ~self.in_gap

    @property
    def in_gap(self) -> np.ndarray:
        """Boolean mask of the grid points inside the gap (none without one)."""
        if self.gap is None:
            return np.zeros(len(self.x_grid), bool)
        return (self.x_grid > self.gap[0]) & (self.x_grid < self.gap[1])


#: Each task's (data range, grid range, default ``n_train``, default noise sd), which
#: :func:`load` and :func:`conditional_mean` read.
SETTINGS = {
    "sine": ((-3.0, 3.0), (-6.0, 6.0), 200, 0.1),
    "blundell": ((0.0, 0.5), (-0.2, 1.2), 1000, 0.02),
}


def _sample(name: str, x: np.ndarray, e: np.ndarray) -> np.ndarray:
    if name == "sine":
        return np.sin(x) + e
    return x + 0.3 * np.sin(2 * np.pi * (x + e)) + 0.3 * np.sin(4 * np.pi * (x + e)) + e


def _mean(name: str, x: np.ndarray, noise_sd: float) -> np.ndarray:
    if name == "sine":
        return np.sin(x)
    s2 = noise_sd**2
    return (x + 0.3 * np.exp(-2 * np.pi**2 * s2) * np.sin(2 * np.pi * x)
            + 0.3 * np.exp(-8 * np.pi**2 * s2) * np.sin(4 * np.pi * x))


def load(name: str, *, n_train: int | None = None, n_test: int = 1000, n_grid: int = 400,
         noise_sd: float | None = None, gap: tuple[float, float] | None = None, seed: int = 0) -> Task:
    """Sample task ``name``: training and test points, and the prediction grid.

    Parameters
    ----------
    name : {"sine", "blundell"}
        See the module docstring.
    n_train : int, optional
        Training points, uniform in the data range (default 200 for sine,
        1000 for blundell).
    n_test : int, default 1000
        Fresh test points, uniform in the data range, with noisy targets.
    n_grid : int, default 400
        Evenly spaced prediction points over the grid range.
    noise_sd : float, optional
        Sd of the noise ``e`` (default 0.1 for sine, 0.02 for blundell); >= 0.
    gap : (float, float), optional
        An open interval inside the data range with no training or test
        inputs (they are drawn uniformly from the rest of the range), e.g.
        :data:`GAP`. Default: none.
    seed : int, default 0
        Seeds the training and the test draws (two independent streams
        spawned from it): the same seed gives the same data.

    Returns
    -------
    Task
        The sampled data, the grid with the noise-free curve and ``E[y | x]``
        on it, and the settings used.

    Raises
    ------
    ValueError
        For an unknown task, ``n_train < 2``, ``n_test < 1``, ``n_grid < 2``,
        a negative ``noise_sd``, or a ``gap`` that is not an interval strictly
        inside the data range.
    """
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid: {', '.join(TASKS)}")
    (lo, hi), (g_lo, g_hi), default_n, default_sd = SETTINGS[name]
    n_train = default_n if n_train is None else int(n_train)
    noise_sd = default_sd if noise_sd is None else float(noise_sd)
    if n_train < 2 or n_test < 1 or n_grid < 2:
        raise ValueError(f"need n_train >= 2, n_test >= 1 and n_grid >= 2, "
                         f"got {n_train}, {n_test} and {n_grid}")
    if not noise_sd >= 0:
        raise ValueError(f"noise_sd must be >= 0, got {noise_sd}")
    if gap is not None and not lo < gap[0] < gap[1] < hi:
        raise ValueError(f"gap must be an interval inside the data range ({lo}, {hi}), got {gap}")
    train_rng, test_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))

    def inputs(rng, n):  # uniform on the range, the gap cut out
        if gap is None:
            return rng.uniform(lo, hi, n)
        u = rng.uniform(lo, hi - (gap[1] - gap[0]), n)
        return np.where(u > gap[0], u + (gap[1] - gap[0]), u)

    x_train = inputs(train_rng, n_train)
    y_train = _sample(name, x_train, train_rng.normal(0.0, noise_sd, n_train))
    x_test = inputs(test_rng, n_test)
    y_test = _sample(name, x_test, test_rng.normal(0.0, noise_sd, n_test))
    x_grid = np.linspace(g_lo, g_hi, n_grid)
    return Task(name=name, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test,
                data_range=(lo, hi), x_grid=x_grid, f_grid=_sample(name, x_grid, 0.0 * x_grid),
                mean_grid=_mean(name, x_grid, noise_sd), noise_sd=noise_sd,
                gap=None if gap is None else (float(gap[0]), float(gap[1])))


def conditional_mean(name: str, x: np.ndarray, noise_sd: float | None = None) -> np.ndarray:
    """``E[y | x]`` of a task: the regression function a posterior mean estimates.

    Parameters
    ----------
    name : str
        A name of :data:`TASKS`.
    x : numpy.ndarray
        Inputs.
    noise_sd : float, optional
        The noise sd (default the task's).

    Returns
    -------
    numpy.ndarray
        ``E[y | x]`` at each input, float64.

    Raises
    ------
    ValueError
        For an unknown task.
    """
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid: {', '.join(TASKS)}")
    return _mean(name, np.asarray(x, dtype="float64"),
                 SETTINGS[name][3] if noise_sd is None else float(noise_sd))
