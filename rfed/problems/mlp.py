"""A small neural-network classifier, the offline stand-in for the papers' CNNs.

DO-ADP (Sec. VI-B of the paper) trains a 3-conv-layer CNN on MNIST and DPDL (Sec. VI-A)
a LeNet on MNIST and a small CNN on CIFAR-10. Neither data set can be downloaded here, so rfed
uses scikit-learn's shipped 8x8 digits (1,797 images, 10 classes) with a one-hidden-layer
perceptron; experiments label it as a stand-in.

The parameters are one flat vector in ``Euclidean(d)`` (weights of both layers and biases,
concatenated; :meth:`MLPClassifier.unflatten` names the blocks). Per-sample gradients are one
batched backward pass, without a loop over samples: each parameter block is broadcast to one
(read-only) view per sample, and since sample ``b`` only touches view ``b`` the gradient of the
summed losses with respect to the views is the stack of per-sample gradients. The pass is written
out by hand, as the same operations autograd's reverse mode performs on that sum (same einsum
subscripts, the same ``g / cosh(z)^2`` for tanh), so it has autograd's bits (a test compares them)
without its tape and without materializing a copy of the weights per sample.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from rfed._checks import held_out_samples, numeric_array
from rfed.manifolds import Euclidean, as_generator
from rfed.problems.base import Problem

__all__ = ["MLPClassifier", "load_digits_split"]


def _per_sample_grads(blocks, feats, onehot, out):
    r"""Gradients of :math:`L = \sum_s \ell_s` with respect to per-sample parameter views.

    ``blocks = (W1, b1, W2, b2)`` of shapes ``(*lead, n_in, h)``, ``(*lead, h)``,
    ``(*lead, h, c)``, ``(*lead, c)`` (``lead`` ends with the sample axis), ``feats``
    ``(*lead, n_in)``, ``onehot`` ``(*lead, c)``; with :math:`z = a W_1 + b_1`,
    :math:`u = \tanh z`, :math:`o = u W_2 + b_2` and
    :math:`\ell = \mathrm{logsumexp}(o) - o_y`:
    :math:`\partial o = e^{o - \mathrm{lse}(o)} - y`, :math:`\partial W_2 = u \otimes \partial o`,
    :math:`\partial z = (W_2 \partial o) / \cosh^2 z`, :math:`\partial W_1 = a \otimes \partial z`.
    Each line is the operation autograd's reverse pass applies to the summed loss (its einsum
    vjps swap the operands the same way), hence the same bits.

    The four gradients are written into ``out``, views of the shapes of ``blocks`` (the blocks of
    the flat result, so it is not assembled by a copy).
    """
    w1, b1, w2, b2 = blocks
    g_w1, g_b1, g_w2, g_b2 = out
    pre = np.einsum("...i,...ih->...h", feats, w1) + b1
    hidden = np.tanh(pre)
    logits = np.einsum("...h,...hc->...c", hidden, w2) + b2
    g_logits = np.subtract(np.exp(logits - logsumexp(logits, axis=-1)[..., None]), onehot,
                           out=g_b2)
    np.einsum("...c,...h->...hc", g_logits, hidden, out=g_w2)
    g_hidden = np.einsum("...c,...hc->...h", g_logits, w2)
    # tanh' = 1 / cosh^2: cosh overflows to inf for |z| > 710 and the quotient is then the
    # correct limit 0, so the overflow warning is spurious
    with np.errstate(over="ignore"):
        g_pre = g_hidden / np.cosh(pre) ** 2
    np.einsum("...h,...i->...ih", g_pre, feats, out=g_w1)
    # autograd accumulates each block's gradient into zeros (0 + g): that turns the -0.0 of a
    # negative g_hidden over an overflowed cosh into +0.0 (the other blocks come out of einsum,
    # which also sums into zeros, or of exp(.) - y: they hold no -0.0)
    np.add(g_pre, 0.0, out=g_b1)


def load_digits_split(test_fraction: float = 0.2, rng: np.random.Generator | int = 0):
    """scikit-learn's shipped digits scaled to [0, 1], split into train and test sets.

    Parameters
    ----------
    test_fraction : float
        In ``(0, 1)``.
    rng : numpy.random.Generator or int
        Shuffles the images before the split.

    Returns
    -------
    (X_train, y_train, X_test, y_test)
        ``X`` of shape ``(N, 64)``, integer labels ``y`` in 0..9.
    """
    from sklearn.datasets import load_digits

    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"argument 'test_fraction' must be in (0, 1), got {test_fraction!r}")
    data = load_digits()
    x = data.data / 16.0
    y = data.target.astype(int)
    order = as_generator(rng).permutation(len(y))
    n_test = int(round(test_fraction * len(y)))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


class MLPClassifier(Problem):
    r"""Softmax classifier with one tanh hidden layer; parameters flattened in ``Euclidean(d)``.

    ``logits = W2^T tanh(W1^T a + b1) + b2`` and the per-sample loss is the cross-entropy
    ``logsumexp(logits) - logits[y]``; ``d = n_in h + h + h n_classes + n_classes``.

    Parameters
    ----------
    features : array, shape ``(n_agents, n_max, n_in)``
    labels : array of int, shape ``(n_agents, n_max)``, values in ``0..n_classes-1``
    n_hidden : int
    n_classes : int
    counts : array of int, shape ``(n_agents,)``, optional
        Valid rows per agent (non-IID partitions have unequal sizes).
    """

    name = "mlp"

    def __init__(self, features: np.ndarray, labels: np.ndarray, n_hidden: int = 32,
                 n_classes: int = 10, counts: np.ndarray | None = None):
        features = numeric_array(features, "features")
        labels = numeric_array(labels, "labels", dtype=None)
        if features.ndim != 3:
            raise ValueError(f"argument 'features' must have shape (n_agents, n_max, n_in), got "
                             f"{features.shape}")
        if labels.shape != features.shape[:2] or not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"argument 'labels' must be integers of shape {features.shape[:2]}")
        if labels.min() < 0 or labels.max() >= n_classes:
            raise ValueError(f"argument 'labels' must lie in [0, {n_classes - 1}]")
        if not isinstance(n_hidden, (int, np.integer)) or n_hidden < 1:
            raise ValueError(f"argument 'n_hidden' must be an int >= 1, got {n_hidden!r}")
        self.n_in = features.shape[-1]
        self.n_hidden = int(n_hidden)
        self.n_classes = int(n_classes)
        sizes = [self.n_in * self.n_hidden, self.n_hidden, self.n_hidden * self.n_classes,
                 self.n_classes]
        self._offsets = np.cumsum([0] + sizes)
        onehot = np.eye(self.n_classes)[labels]
        super().__init__(Euclidean(int(self._offsets[-1])),
                         {"features": features, "labels": labels, "onehot": onehot},
                         counts=counts, arg_names={"features": "features", "labels": "labels",
                                                   "onehot": "labels"})

    @property
    def n_params(self) -> int:
        """``d``, the length of the flat parameter vector."""
        return int(self._offsets[-1])

    def unflatten(self, x):
        """``(W1, b1, W2, b2)`` of shapes ``(*lead, n_in, h)``, ``(*lead, h)``,
        ``(*lead, h, n_classes)``, ``(*lead, n_classes)`` from ``x`` of shape ``(*lead, d)``.

        Parameters
        ----------
        x : array, shape ``(*lead, d)``
            Flat parameters.

        Returns
        -------
        tuple of 4 arrays
        """
        o = self._offsets
        lead = x.shape[:-1]
        return (np.reshape(x[..., o[0]:o[1]], lead + (self.n_in, self.n_hidden)),
                x[..., o[1]:o[2]],
                np.reshape(x[..., o[2]:o[3]], lead + (self.n_hidden, self.n_classes)),
                x[..., o[3]:o[4]])

    def _blocks_of(self, flat: np.ndarray) -> tuple[np.ndarray, ...]:
        """:meth:`unflatten` of ``flat`` as views (writing them writes ``flat``)."""
        o, lead = self._offsets, flat.shape[:-1]
        shapes = ((self.n_in, self.n_hidden), (self.n_hidden,),
                  (self.n_hidden, self.n_classes), (self.n_classes,))
        views = tuple(flat[..., o[k]:o[k + 1]].reshape(lead + shape)
                      for k, shape in enumerate(shapes))
        # splitting the last axis of a slice is always a view (numpy >= 1.26 has no
        # reshape(copy=False) to say so)
        assert all(v.size == 0 or np.may_share_memory(v, flat) for v in views)
        return views

    @classmethod
    def from_parts(cls, features: np.ndarray, labels: np.ndarray, parts, **kwargs):
        """Build from pooled data ``(N, n_in)``, ``(N,)`` and per-agent index arrays ``parts``
        (e.g. a Dirichlet partition); unequal parts are padded and ``counts`` records the sizes.

        Parameters
        ----------
        features : array, shape ``(N, n_in)``
            Pooled samples.
        labels : int array, shape ``(N,)``
            Their classes.
        parts : sequence of int arrays
            Each agent's sample indices.
        **kwargs
            Further arguments of the constructor.

        Returns
        -------
        MLPClassifier
        """
        parts = [np.asarray(p, dtype=int) for p in parts]
        if not parts or min(len(p) for p in parts) < 1:
            raise ValueError("argument 'parts' must be a non-empty list of non-empty index arrays")
        counts = np.array([len(p) for p in parts])
        n_max = int(counts.max())
        idx = np.stack([np.concatenate([p, np.full(n_max - len(p), p[0])]) for p in parts])
        return cls(np.asarray(features)[idx], np.asarray(labels)[idx], counts=counts, **kwargs)

    def initial_point(self, rng: np.random.Generator | int) -> np.ndarray:
        """Glorot-uniform weights and zero biases (one common start for all agents).

        Parameters
        ----------
        rng : numpy.random.Generator or int
            Generator or seed.

        Returns
        -------
        array, shape ``(n_params,)``
        """
        gen = as_generator(rng)
        x = np.zeros(self.n_params)
        o = self._offsets
        lim1 = np.sqrt(6.0 / (self.n_in + self.n_hidden))
        lim2 = np.sqrt(6.0 / (self.n_hidden + self.n_classes))
        x[o[0]:o[1]] = gen.uniform(-lim1, lim1, o[1] - o[0])
        x[o[2]:o[3]] = gen.uniform(-lim2, lim2, o[3] - o[2])
        return x

    def logits(self, x: np.ndarray, features: np.ndarray) -> np.ndarray:
        """Logits at ``x`` ``(*lead, d)`` for ``features`` ``(*lead, b, n_in)``.

        Returns an array of shape ``(*lead, b, n_classes)``.

        Parameters
        ----------
        x : array, shape ``(*lead, d)``
            Flat parameters.
        features : array, shape ``(*lead, b, n_in)``
            Samples.

        Returns
        -------
        ndarray, shape ``(*lead, b, n_classes)``
        """
        w1, b1, w2, b2 = self.unflatten(np.asarray(x, dtype=float))
        hidden = np.tanh(np.einsum("...bi,...ih->...bh", features, w1) + b1[..., None, :])
        return np.einsum("...bh,...hc->...bc", hidden, w2) + b2[..., None, :]

    def sample_loss(self, x, batch):
        logits = self.logits(x, batch["features"])
        m = logits.max(axis=-1, keepdims=True)
        lse = m[..., 0] + np.log(np.sum(np.exp(logits - m), axis=-1))
        return lse - np.sum(logits * batch["onehot"], axis=-1)

    def sample_rgrad(self, x, batch):
        x = np.asarray(x, dtype=float)
        feats = batch["features"]
        lead = feats.shape[:-1]
        # per-sample views of each block (broadcast, not copied)
        blocks = tuple(np.broadcast_to(np.expand_dims(blk, -1 - (blk.ndim - x.ndim + 1)),
                                       lead + blk.shape[x.ndim - 1:])
                       for blk in self.unflatten(x))
        out = np.empty(lead + (self.n_params,))
        _per_sample_grads(blocks, feats, batch["onehot"], self._blocks_of(out))
        return out

    def local_grad(self, x: np.ndarray, agents: np.ndarray | None = None) -> np.ndarray:
        """:meth:`Problem.local_grad`, with the padding rows' per-sample gradients set to 0 in
        place: the values of the base class's masked copy (``+0.0`` there), so the same sums,
        without a second array of every per-sample gradient (on dpdl-digits, 10 agents padded
        to 206 rows: 40 MB per evaluation, mapped and unmapped by the kernel each time).

        Parameters
        ----------
        x : ndarray, shape ``(n_agents, d)`` or ``(d,)``
            One point per agent (or one for all).
        agents : ndarray of int, optional
            Global ids (default: every agent held).

        Returns
        -------
        ndarray, shape ``(len(agents), d)``
            Each agent's mean gradient over its records.
        """
        agents, data, mask = self._all(agents)
        x = np.broadcast_to(x, (agents.size,) + self.manifold.point_shape)
        g = self.sample_rgrad(x, data)  # a new array (sample_rgrad's own): ours to write
        g[~mask] = 0.0
        return np.sum(g, axis=1) / self.counts[agents].reshape(-1, 1)

    def accuracy(self, x: np.ndarray, features: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """Classification accuracy of parameters ``x`` ``(*lead, d)`` on ``(N, n_in)`` data.

        Returns an array of the batch shape of ``x`` (a float for one point).

        Parameters
        ----------
        x : array, shape ``(*lead, d)``
            Flat parameters.
        features : array, shape ``(N, n_in)``
            Samples.
        labels : int array, shape ``(N,)``
            Their classes.

        Returns
        -------
        ndarray or float
            The fraction classified correctly, of the batch shape ``lead`` of ``x``.

        Raises
        ------
        ValueError
            ``x``, ``features`` or ``labels`` of another shape (naming the argument).
        """
        x, features, labels = held_out_samples(x, features, labels, self.manifold.point_shape,
                                               self.n_in, batched=True)
        x = np.asarray(x, dtype=float)
        lead = x.shape[:-1]
        feats = np.broadcast_to(features, lead + np.shape(features))
        pred = np.argmax(self.logits(x, feats), axis=-1)
        return np.mean(pred == labels, axis=-1)
