"""The 2-D scattering transform: a fixed, data-independent feature map of images.

The scattering transform of Bruna and Mallat ("Invariant Scattering Convolution Networks",
IEEE TPAMI 35(8), 2013, arXiv:1203.1513) cascades wavelet convolutions and complex moduli and
averages each path with a low-pass filter:

.. math::

    S_J^{(0)} x = x \\star \\phi_J, \\quad
    S_J^{(1)} x = |x \\star \\psi_{j_1,\\theta_1}| \\star \\phi_J, \\quad
    S_J^{(2)} x = ||x \\star \\psi_{j_1,\\theta_1}| \\star \\psi_{j_2,\\theta_2}| \\star \\phi_J
    \\ (j_1 < j_2),

sampled every ``2^J`` pixels. With ``J`` scales and ``L`` angles there are
``K = 1 + J L + L^2 J (J - 1) / 2`` paths: for ``J = 2``, ``L = 8`` on a 28 x 28 image,
``K = 81`` channels of 7 x 7, i.e. 3,969 features, the ScatterNet of Tramer and Boneh
("Differentially Private Learning Needs Better Features (or Much More Data)", ICLR 2021,
arXiv:2011.11660).

Filter bank and layout follow kymatio's conventions (Andreux et al., "Kymatio: Scattering
Transforms in Python", JMLR 21(60), 2020, arXiv:1812.11214), so the coefficients can be checked
against kymatio's: Morlet wavelets ``psi_{j,theta}`` with ``sigma = 0.8 * 2^j``, central
frequency ``xi = 3 pi / (4 * 2^j)``, slant ``4 / L`` and angle ``theta_l = (L/2 - 1 - l) pi / L``
(Gabor minus a multiple of its envelope so that its mean is zero), a Gaussian low-pass ``phi``
with ``sigma = 0.8 * 2^(J-1)``, every filter periodised on the padded grid and its discrete
Fourier transform taken real; images are padded by reflection to
``M_pad = (floor((M + 2^J) / 2^J) + 1) 2^J`` and one output sample is dropped at each border;
channels come in the order: order 0, order 1 by ``(j_1, theta_1)``, order 2 by
``(j_1, theta_1, j_2, theta_2)``. One known difference: kymatio normalises its filters by
``2 * 3.1415 * sigma^2 / slant``, rfed by ``2 pi sigma^2 / slant``, so kymatio's order-``m``
coefficients are rfed's times ``(pi / 3.1415)^(m+1)`` (a relative 3e-5 to 9e-5).

Computation (all images of a chunk and all paths at once, one FFT call per stage): the
wavelet stages go through batched FFTs (:mod:`scipy.fft`, complex64 by default); every
low-pass stage is done in space, since the Gaussian ``phi`` is separable: the averaging,
subsampling and border cropping of a path ``A`` (``m x n``) is ``P_r A P_c^T`` with ``P_r``
the ``(h, m)`` matrix of the periodised, band-limited Gaussian read at the output rows, two
small matrix products instead of an FFT, a product and an inverse FFT.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.fft as sfft
from numpy.typing import DTypeLike

from rfed.datasets._validation import check_float_dtype, check_int

__all__ = ["Scattering2D", "gabor_2d", "morlet_2d", "scattering_padding"]


def scattering_padding(size: int, J: int) -> int:
    """Padded size of one image axis: ``(floor((size + 2^J) / 2^J) + 1) 2^J``.

    Parameters
    ----------
    size : int
        Image size along the axis (``>= 2^J``).
    J : int
        Number of scales.

    Returns
    -------
    int
        A multiple of ``2^J`` at least ``size + 2^J``, so that the reflection padding and the
        dropped border samples keep circular wrap-around away from the image.
    """
    step = 2 ** J
    return ((size + step) // step + 1) * step


def gabor_2d(M: int, N: int, sigma: float, theta: float, xi: float,
             slant: float = 1.0) -> np.ndarray:
    """A Gabor filter on an ``M x N`` grid, periodised over the 5 x 5 neighbouring periods.

    ``g(u) = exp(-u^T R D R^T u / (2 sigma^2) + i xi (u_1 cos theta + u_2 sin theta))
    / (2 pi sigma^2 / slant)`` with ``R`` the rotation by ``theta`` and
    ``D = diag(1, slant^2)``, summed over ``u + (a M, b N)`` for ``a, b`` in ``-2..2``
    (float64).

    Parameters
    ----------
    M, N : int
        Grid size (rows, columns).
    sigma : float
        Width of the Gaussian envelope (pixels).
    theta : float
        Angle (radians).
    xi : float
        Central frequency (radians per pixel).
    slant : float
        Ratio of the envelope's widths across and along ``theta``.

    Returns
    -------
    ndarray of complex128, shape ``(M, N)``
    """
    c, s = math.cos(theta), math.sin(theta)
    rot = np.array([[c, -s], [s, c]])
    curv = rot @ np.diag([1.0, slant * slant]) @ rot.T / (2.0 * sigma * sigma)
    shifts = np.arange(-2, 3)
    xx = (np.arange(M)[None, :] + M * shifts[:, None]).reshape(-1, 1, M, 1)
    yy = (np.arange(N)[None, :] + N * shifts[:, None]).reshape(1, -1, 1, N)
    quad = curv[0, 0] * xx * xx + (curv[0, 1] + curv[1, 0]) * xx * yy + curv[1, 1] * yy * yy
    phase = xi * (c * xx + s * yy)
    gab = np.exp(-quad + 1j * phase).sum(axis=(0, 1))
    return gab / (2.0 * math.pi * sigma * sigma / slant)


def morlet_2d(M: int, N: int, sigma: float, theta: float, xi: float,
              slant: float = 0.5) -> np.ndarray:
    """A Morlet wavelet: the Gabor filter minus the multiple of its envelope that zeroes its sum.

    ``psi = g_{sigma,theta,xi} - K g_{sigma,theta,0}`` with ``K = sum(g_xi) / sum(g_0)``.

    Parameters
    ----------
    M, N, sigma, theta, xi, slant
        As in :func:`gabor_2d`.

    Returns
    -------
    ndarray of complex128, shape ``(M, N)``, summing to zero.
    """
    wave = gabor_2d(M, N, sigma, theta, xi, slant)
    envelope = gabor_2d(M, N, sigma, theta, 0.0, slant)
    return wave - (wave.sum() / envelope.sum()) * envelope


def _crop_spectrum(spec: np.ndarray, res: int, axes: tuple[int, ...]) -> np.ndarray:
    """The low band of a DFT (length ``n`` on each of ``axes``) on a grid ``2^res`` times
    coarser: frequencies ``0 .. n'/2 - 1`` and ``-n'/2 .. -1`` with ``n' = n / 2^res``."""
    for ax in axes:
        n = spec.shape[ax]
        n_low = n >> res
        keep = np.r_[0:n_low // 2, n - n_low + n_low // 2:n]
        spec = np.take(spec, keep, axis=ax)
    return spec


@dataclass(frozen=True)
class _Path:
    order: int
    j: tuple[int, ...]
    theta: tuple[int, ...]


class Scattering2D:
    """The scattering transform of ``M x N`` images at ``J`` scales and ``L`` angles, order 2.

    A public, data-independent map: every image is transformed on its own, with filters that
    depend on ``(shape, J, L)`` only.

    Parameters
    ----------
    shape : (int, int)
        Image size ``(M, N)``, each at least ``2^J``.
    J : int
        Number of scales (``>= 1``); the output is sampled every ``2^J`` pixels.
    L : int
        Number of angles (``>= 1``).
    dtype : {float32, float64}
        Arithmetic and output precision (float32: complex64 FFTs; a relative 1e-6 or so of the
        float64 coefficients).

    Attributes
    ----------
    n_channels : int
        ``K = 1 + J L + L^2 J (J - 1) / 2``.
    out_shape : (int, int, int)
        ``(K, h, w)`` with ``h = M_pad / 2^J - 2``.
    n_features : int
        ``K h w`` (3,969 for 28 x 28, ``J = 2``, ``L = 8``).
    paths : list of (order, js, thetas)
        The channels in output order.
    """

    def __init__(self, shape: tuple[int, int] = (28, 28), J: int = 2, L: int = 8, *,
                 dtype: DTypeLike = np.float32):
        if not (isinstance(shape, (tuple, list)) and len(shape) == 2):
            raise ValueError(f"argument 'shape' must be (M, N), got {shape!r}")
        self.J = check_int(J, "J")
        self.L = check_int(L, "L")
        M, N = (check_int(s, "shape") for s in shape)
        if min(M, N) < 2 ** self.J:
            raise ValueError(f"argument 'shape' {(M, N)} must be at least 2^J = {2 ** self.J} "
                             "on each axis")
        self.shape = (M, N)
        self.dtype = check_float_dtype(dtype)
        self._complex = np.result_type(self.dtype, np.complex64)
        self.padded = (scattering_padding(M, self.J), scattering_padding(N, self.J))
        Mp, Np = self.padded
        self._pad = ((Mp - M) // 2, (Mp - M + 1) // 2, (Np - N) // 2, (Np - N + 1) // 2)
        h, w = Mp // 2 ** self.J - 2, Np // 2 ** self.J - 2
        self.paths = [_Path(0, (), ())]
        self.paths += [_Path(1, (j,), (t,)) for j in range(self.J) for t in range(self.L)]
        self.paths += [_Path(2, (j1, j2), (t1, t2)) for j1 in range(self.J)
                       for t1 in range(self.L) for j2 in range(j1 + 1, self.J)
                       for t2 in range(self.L)]
        self.n_channels = len(self.paths)
        self.out_shape = (self.n_channels, h, w)
        self.n_features = self.n_channels * h * w
        self._build_filters()

    # ------------------------------------------------------------------ filters
    def angle(self, index: int) -> float:
        """Angle of wavelet ``index`` in ``0 .. L-1``: ``(L/2 - 1 - index) pi / L`` (radians,
        with ``L/2`` rounded down as kymatio does, ``int(L - L/2 - 1)``).

        Parameters
        ----------
        index : int
            Wavelet orientation, ``0 .. L-1``.

        Returns
        -------
        float
        """
        return (int(self.L - self.L / 2 - 1) - index) * math.pi / self.L

    def _build_filters(self) -> None:
        J, L = self.J, self.L
        Mp, Np = self.padded
        # wavelets: real DFT on the padded grid (the imaginary part is zero up to rounding for
        # these symmetric envelopes), one array (L, Mp, Np) per scale
        self.psi_hat = []
        for j in range(J):
            bank = [np.real(np.fft.fft2(morlet_2d(Mp, Np, 0.8 * 2 ** j, self.angle(t),
                                                  0.75 * math.pi / 2 ** j, 4.0 / L)))
                    for t in range(L)]
            self.psi_hat.append(np.stack(bank))
        # low-pass: the Gaussian is separable, so its DFT is the outer product of two 1-d DFTs
        sigma = 0.8 * 2 ** (J - 1)
        self._lowpass = [
            (self._lowpass_matrix(Mp, sigma, res), self._lowpass_matrix(Np, sigma, res))
            for res in range(J)]
        # wavelet j2 applied at resolution res and subsampled by k = 2^(j2 - res): its band at
        # that resolution, scaled by 1 / k^2 (the mean over aliases of the subsampling) and cut
        # into the k x k alias blocks (see _filter_subsample)
        self._psi_blocks = {}
        for j2 in range(J):
            for res in range(j2 + 1):
                k = 2 ** (j2 - res)
                band = _crop_spectrum(self.psi_hat[j2], res, (1, 2)) / (k * k)
                # stored complex: a complex-by-complex product is faster than numpy's mixed one
                self._psi_blocks[(j2, res)] = (k, band.astype(self._complex))

    def _lowpass_matrix(self, n_pad: int, sigma: float, res: int) -> np.ndarray:
        """``P`` of shape ``(h, n_pad / 2^res)``: ``(P A P'^T)`` is ``A`` (at resolution
        ``res``) convolved circularly with the band-limited Gaussian and read every
        ``2^(J - res)`` samples, at the output rows ``1 .. h`` (the border samples dropped)."""
        x = np.arange(n_pad)[None, :] + n_pad * np.arange(-2, 3)[:, None]
        g = np.exp(-(x * x) / (2.0 * sigma * sigma)).sum(axis=0)
        # the 2-d filter is g(x) g(y) / (2 pi sigma^2): each axis takes the square root
        g = g / math.sqrt(2.0 * math.pi * sigma * sigma)
        g_hat = _crop_spectrum(np.real(np.fft.fft(g)), res, (0,))
        h_res = np.real(np.fft.ifft(g_hat))
        n_res = n_pad >> res
        stride = 2 ** (self.J - res)
        rows = stride * np.arange(1, n_pad // 2 ** self.J - 1)
        return h_res[(rows[:, None] - np.arange(n_res)[None, :]) % n_res].astype(self.dtype)

    # ------------------------------------------------------------------ transform
    def _lowpass_apply(self, a: np.ndarray, res: int) -> np.ndarray:
        pr, pc = self._lowpass[res]
        return np.matmul(np.matmul(pr, a), pc.T)

    def _batch(self, x: np.ndarray, workers: int) -> np.ndarray:
        """Coefficients ``(n, K, h, w)`` of a chunk of images ``(n, M, N)``."""
        J, L = self.J, self.L
        top, bottom, left, right = self._pad
        xp = np.pad(x.astype(self.dtype, copy=False), ((0, 0), (top, bottom), (left, right)),
                    mode="reflect")
        n = xp.shape[0]
        out = np.empty((n,) + self.out_shape, dtype=self.dtype)
        out[:, 0] = self._lowpass_apply(xp, 0)
        x_hat = sfft.fft2(xp.astype(self._complex), workers=workers)
        first = 1
        second = 1 + J * L
        for j1 in range(J):
            # |x * psi_{j1, theta}| for every angle, sampled every 2^j1 pixels
            prod = _filter_subsample(x_hat[:, None], *self._psi_blocks[(j1, 0)])[:, 0]
            u1 = np.abs(sfft.ifft2(prod, workers=workers, overwrite_x=True))
            out[:, first:first + L] = self._lowpass_apply(u1, j1)
            first += L
            if j1 == J - 1:
                continue
            u1_hat = sfft.fft2(u1.astype(self._complex), workers=workers)
            for j2 in range(j1 + 1, J):
                prod = _filter_subsample(u1_hat, *self._psi_blocks[(j2, j1)])
                u2 = np.abs(sfft.ifft2(prod, workers=workers, overwrite_x=True))
                # (n, L theta1, L theta2, m, m): channels in (theta1, theta2) order per j2;
                # the output is ordered (j1, theta1, j2, theta2)
                s2 = self._lowpass_apply(u2, j2)
                for t1 in range(L):
                    start = second + self._second_offset(j1, t1, j2)
                    out[:, start:start + L] = s2[:, t1]
            second += L * L * (J - 1 - j1)
        return out

    def _second_offset(self, j1: int, t1: int, j2: int) -> int:
        """Position of path ``(j1, t1, j2, theta2 = 0)`` among the second-order paths of ``j1``."""
        per_theta = self.L * (self.J - 1 - j1)
        return t1 * per_theta + (j2 - j1 - 1) * self.L

    def chunks(self, images: np.ndarray, batch_size: int = 256, workers: int = 1
               ) -> Iterator[np.ndarray]:
        """The coefficients of ``images`` ``(n, M, N)``, ``batch_size`` images at a time.

        Parameters
        ----------
        images : ndarray, shape ``(n, M, N)``, finite
        batch_size : int
            Images per chunk (memory: about ``batch_size * K * M_pad * N_pad / 2`` complex
            values at the second order; 256 images of 28 x 28: 170 MB in complex64).
        workers : int
            Threads of each FFT call (:func:`scipy.fft.fft2`); 1 is one core.

        Yields
        ------
        ndarray, shape ``(b, K, h, w)``, of ``self.dtype``
        """
        x = self._check_images(images)
        batch_size = check_int(batch_size, "batch_size")
        workers = check_int(workers, "workers")
        for lo in range(0, x.shape[0], batch_size):
            yield self._batch(x[lo:lo + batch_size], workers)

    def __call__(self, images: np.ndarray, batch_size: int = 256, workers: int = 1
                 ) -> np.ndarray:
        """The scattering coefficients of ``images``.

        Parameters
        ----------
        images : ndarray, shape ``(n, M, N)`` or ``(M, N)``, finite
            Grey-level images (any scale; Tramer and Boneh use pixels in [0, 1]).
        batch_size, workers : int
            As in :meth:`chunks` (the result does not depend on them).

        Returns
        -------
        ndarray, shape ``(n, K, h, w)`` (``(K, h, w)`` for one image), of ``self.dtype``
        """
        single = np.ndim(images) == 2
        x = np.asarray(images)[None] if single else images
        x = self._check_images(x)
        out = np.empty((x.shape[0],) + self.out_shape, dtype=self.dtype)
        lo = 0
        for block in self.chunks(x, batch_size, workers):
            out[lo:lo + block.shape[0]] = block
            lo += block.shape[0]
        return out[0] if single else out

    def _check_images(self, images: np.ndarray) -> np.ndarray:
        x = np.asarray(images)
        if x.ndim != 3 or x.shape[1:] != self.shape:
            raise ValueError(f"argument 'images' must have shape (n, {self.shape[0]}, "
                             f"{self.shape[1]}), got {x.shape}")
        if not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
            raise TypeError(f"argument 'images' must hold real numbers, got dtype {x.dtype}")
        if x.size and not np.isfinite(x).all():
            raise ValueError("argument 'images' contains NaN or inf")
        return x

    def __repr__(self) -> str:
        return (f"Scattering2D(shape={self.shape}, J={self.J}, L={self.L}, "
                f"dtype={self.dtype.name}): {self.out_shape} per image")


def _filter_subsample(x_hat: np.ndarray, k: int, psi: np.ndarray) -> np.ndarray:
    """DFT of ``(x * psi_b)`` sampled every ``k`` pixels, for every filter ``b``.

    ``x_hat`` ``(n, A, m, m')`` holds spectra, ``psi`` ``(B, m, m')`` the (real-valued)
    filters already divided by ``k^2``; the result ``(n, A, B, m / k, m' / k)`` is the sum over
    the ``k x k`` alias blocks of ``x_hat * psi`` (sampling every ``k`` pixels averages the
    spectrum's ``k^2`` aliases), accumulated block by block so that the full product is never
    stored.
    """
    m, n = x_hat.shape[-2:]
    h, w = m // k, n // k
    out = np.empty(x_hat.shape[:2] + (psi.shape[0], h, w), dtype=x_hat.dtype)
    np.multiply(x_hat[:, :, None, :h, :w], psi[:, :h, :w], out=out)
    if k == 1:
        return out
    tmp = np.empty_like(out)
    for a in range(k):
        for b in range(k):
            if a == b == 0:
                continue
            rows, cols = slice(a * h, (a + 1) * h), slice(b * w, (b + 1) * w)
            np.multiply(x_hat[:, :, None, rows, cols], psi[:, rows, cols], out=tmp)
            out += tmp
    return out
