"""Data for rfed's experiments, all available offline.

* :mod:`rfed.datasets.synthetic`: the papers' synthetic recipes (PriRFed PCA and Wishart SPD) and
  stand-ins for the LIBSVM ``epsilon`` and ``rcv1`` sets.
* :mod:`rfed.datasets.images`: scikit-learn's digits, MNIST IDX and npz loaders, SPD covariance
  descriptors of real images, geomstats' shipped SPD sets.
* :mod:`rfed.datasets.libsvm`: LIBSVM text files.
* :mod:`rfed.datasets.wordnet`: WordNet mammals (shipped with its license), Laplacian-eigenmap
  features and a Lorentz embedding trained by rfed.
* :mod:`rfed.datasets.partition`: iid and Dirichlet non-IID splits across agents.
* :mod:`rfed.datasets.dispatch`: the IEEE 14-bus economic dispatch of DP-DGT.
"""

from rfed.datasets.dispatch import EconomicDispatch, dispatch_optimum, ieee14_dispatch
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
from rfed.datasets.partition import dirichlet_partition, iid_partition, label_counts, stack_agents
from rfed.datasets.synthetic import (
    EPSILON_SHAPE,
    RCV1_SHAPE,
    haar_orthogonal,
    make_epsilon_like,
    make_pca_synthetic,
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
    "TEST_WORD",
    "EconomicDispatch",
    "WordNetMammals",
    "covariance_descriptors",
    "dirichlet_partition",
    "dispatch_optimum",
    "extract_patches",
    "haar_orthogonal",
    "iid_partition",
    "ieee14_dispatch",
    "label_counts",
    "laplacian_eigenmap",
    "load_connectomes",
    "load_digits_descriptors",
    "load_digits_images",
    "load_emg_covariances",
    "load_libsvm",
    "load_mnist_idx",
    "load_npz_images",
    "load_sample_image_descriptors",
    "load_wordnet_embedding",
    "load_wordnet_mammals",
    "make_epsilon_like",
    "make_pca_synthetic",
    "make_rcv1_like",
    "make_wishart_spd",
    "normalize_rows",
    "pca_spectrum",
    "random_orthonormal_columns",
    "read_idx",
    "reconstruction_metrics",
    "scale_pixels",
    "stack_agents",
    "to_pm1_labels",
    "train_lorentz_embedding",
    "wordnet_prediction_data",
]
