"""Data for rfed's experiments, all available offline.

* :mod:`rfed.datasets.synthetic`: the papers' synthetic recipes (PriRFed PCA and Wishart SPD) and
  stand-ins for the LIBSVM ``epsilon`` and ``rcv1`` sets.
* :mod:`rfed.datasets.cached`: the ``epsilon`` and ``rcv1`` stand-ins at paper size, float32,
  generated in chunks and cached on disk (memory-mapped when read back).
* :mod:`rfed.datasets.mnist`: Fashion-MNIST and MNIST from their IDX files (Debian's
  ``dataset-fashion-mnist``, ``$RFED_DATA`` or a given folder; never downloaded).
* :mod:`rfed.datasets.preprocess`: flattening, unit-norm rows (a public data bound), binary
  tasks, and a declared public split for choosing hyperparameters.
* :mod:`rfed.datasets.images`: scikit-learn's digits, MNIST IDX and npz loaders, SPD covariance
  descriptors of real images, geomstats' shipped SPD sets.
* :mod:`rfed.datasets.scattering` and :mod:`rfed.datasets.features`: the 2-D scattering
  transform (Bruna and Mallat 2013), per-record GroupNorm, the public-split PCA, and the
  scattering coefficients of a data set cached on disk with a checksum.
* :mod:`rfed.datasets.libsvm`: LIBSVM text files.
* :mod:`rfed.datasets.wordnet`: WordNet mammals (shipped with its license), Laplacian-eigenmap
  features and a Lorentz embedding trained by rfed.
* :mod:`rfed.datasets.partition`: iid and Dirichlet non-IID splits across agents.
* :mod:`rfed.datasets.dispatch`: the IEEE 14-bus economic dispatch of DP-DGT.
"""

from rfed.datasets.cached import (
    cache_dir,
    cache_key,
    make_epsilon_like_cached,
    make_rcv1_like_cached,
)
from rfed.datasets.dispatch import EconomicDispatch, dispatch_optimum, ieee14_dispatch
from rfed.datasets.features import (
    group_norm,
    group_norm_bound,
    public_pca,
    scattering_cache_entry,
    scattering_features,
)
from rfed.datasets.images import (
    COVARIANCE_FEATURES_GRAY,
    COVARIANCE_FEATURES_RGB,
    covariance_descriptors,
    extract_patches,
    load_connectomes,
    load_digits_descriptors,
    load_digits_images,
    load_emg_covariances,
    load_mnist_idx,
    load_npz_images,
    load_sample_image_descriptors,
    read_idx,
    scale_pixels,
)
from rfed.datasets.libsvm import load_libsvm, normalize_rows, to_pm1_labels
from rfed.datasets.mnist import (
    DatasetNotFoundError,
    fashion_mnist_available,
    find_mnist_files,
    load_fashion_mnist,
    load_mnist,
    mnist_available,
)
from rfed.datasets.partition import (
    dirichlet_partition,
    iid_partition,
    label_counts,
    stack_agents,
    stack_agents_padded,
)
from rfed.datasets.preprocess import (
    PublicSplit,
    binary_task,
    flatten_images,
    normalize_l2,
    public_split,
)
from rfed.datasets.scattering import Scattering2D
from rfed.datasets.synthetic import (
    EPSILON_SHAPE,
    RCV1_SHAPE,
    RCV1_TRAIN_SHAPE,
    haar_orthogonal,
    make_epsilon_like,
    make_pca_synthetic,
    make_pca_synthetic_agents,
    make_rcv1_like,
    make_wishart_spd,
    pca_spectrum,
    random_orthonormal_columns,
)
from rfed.datasets.wordnet import (
    TEST_WORD,
    WordNetMammals,
    laplacian_eigenmap,
    load_wordnet_embedding,
    load_wordnet_mammals,
    reconstruction_metrics,
    train_lorentz_embedding,
    wordnet_prediction_data,
)

__all__ = [
    "COVARIANCE_FEATURES_GRAY",
    "COVARIANCE_FEATURES_RGB",
    "EPSILON_SHAPE",
    "RCV1_SHAPE",
    "RCV1_TRAIN_SHAPE",
    "TEST_WORD",
    "DatasetNotFoundError",
    "EconomicDispatch",
    "PublicSplit",
    "Scattering2D",
    "WordNetMammals",
    "binary_task",
    "cache_dir",
    "cache_key",
    "covariance_descriptors",
    "dirichlet_partition",
    "dispatch_optimum",
    "extract_patches",
    "fashion_mnist_available",
    "find_mnist_files",
    "flatten_images",
    "group_norm",
    "group_norm_bound",
    "haar_orthogonal",
    "ieee14_dispatch",
    "iid_partition",
    "label_counts",
    "laplacian_eigenmap",
    "load_connectomes",
    "load_digits_descriptors",
    "load_digits_images",
    "load_emg_covariances",
    "load_fashion_mnist",
    "load_libsvm",
    "load_mnist",
    "load_mnist_idx",
    "load_npz_images",
    "load_sample_image_descriptors",
    "load_wordnet_embedding",
    "load_wordnet_mammals",
    "make_epsilon_like",
    "make_epsilon_like_cached",
    "make_pca_synthetic",
    "make_pca_synthetic_agents",
    "make_rcv1_like",
    "make_rcv1_like_cached",
    "make_wishart_spd",
    "mnist_available",
    "normalize_l2",
    "normalize_rows",
    "pca_spectrum",
    "public_pca",
    "public_split",
    "random_orthonormal_columns",
    "read_idx",
    "reconstruction_metrics",
    "scale_pixels",
    "scattering_cache_entry",
    "scattering_features",
    "stack_agents",
    "stack_agents_padded",
    "to_pm1_labels",
    "train_lorentz_embedding",
    "wordnet_prediction_data",
]
