"""Dataset shift and out-of-distribution inputs for MNIST, made from the test images (no download).

- :func:`rotate`: every image rotated by one angle about its centre (Ovadia et
  al. 2019's rotated-MNIST protocol: 0 to 180 degrees in 15-degree steps).
- :func:`ood_sets`: inputs that are no digit: the test images with their
  pixels permuted (one fixed permutation; the same pixel histogram as a
  digit), and uniform and Gaussian noise images with the test set's pixel
  mean and sd.

Images are ``(n, 28, 28)`` in the scale they were given (e.g. ``[0, 1]``).
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

__all__ = ["ood_sets", "rotate"]


def rotate(images: np.ndarray, angle: float) -> np.ndarray:
    """Images rotated counter-clockwise about their centre, bilinear, zeros outside.

    Parameters
    ----------
    images : numpy.ndarray, shape (n, h, w)
        The images.
    angle : float
        Degrees.

    Returns
    -------
    numpy.ndarray, shape (n, h, w)
        The rotated images, in ``images``' dtype (a copy at a multiple of 360).

    Raises
    ------
    ValueError
        If ``images`` is not 3-D.
    """
    images = np.asarray(images)
    if images.ndim != 3:
        raise ValueError(f"need images (n, h, w), got shape {images.shape}")
    if angle % 360 == 0:
        return images.copy()
    return ndimage.rotate(images, angle, axes=(2, 1), reshape=False, order=1, mode="constant",
                          cval=0.0).astype(images.dtype)


def ood_sets(images: np.ndarray, rng: np.random.Generator, n_noise: int = 2000) -> dict[str, np.ndarray]:
    """``{"permuted": ..., "uniform": ..., "gaussian": ...}``, each (n, h, w) like ``images``.

    ``permuted``: every test image with one random permutation of the pixel
    positions. ``uniform``: ``n_noise`` images of i.i.d. uniform pixels on
    ``[lo, min(hi, lo + 2 (m - lo))]`` (mean ``m`` unless ``hi`` cuts it
    short; ``[0, 2 m]`` for ``[0, 1]`` images with ``m <= 0.5``);
    ``gaussian``: of ``N(m, s^2)`` pixels clipped to ``[lo, hi]``, where
    ``lo`` and ``hi`` are the images' smallest and largest pixel and ``m``
    and ``s`` their pixel mean and sd.

    Parameters
    ----------
    images : numpy.ndarray, shape (n, h, w)
        The test images.
    rng : numpy.random.Generator
        Draws the permutation and the noise.
    n_noise : int, default 2000
        Noise images of each kind.

    Returns
    -------
    dict of str to numpy.ndarray
        ``"permuted"``, ``"uniform"`` and ``"gaussian"``, each (n, h, w) in ``images``' dtype.
    """
    images = np.asarray(images)
    n, h, w = images.shape
    perm = rng.permutation(h * w)
    lo, hi = float(images.min()), float(images.max())
    m, s = float(images.mean()), float(images.std())
    return {
        "permuted": images.reshape(n, -1)[:, perm].reshape(n, h, w),
        "uniform": rng.uniform(lo, min(hi, lo + 2 * (m - lo)), (n_noise, h, w)).astype(images.dtype),
        "gaussian": np.clip(rng.normal(m, s, (n_noise, h, w)), lo, hi).astype(images.dtype),
    }
