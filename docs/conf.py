"""Sphinx configuration of rfed's documentation.

Build (offline, from the repository root; fails on any warning, any broken cross-reference and
any tutorial that raises):

    python -m sphinx -W --keep-going -n -b html docs docs/_build/html
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "_ext"))

import rfed  # noqa: E402

project = "rfed"
author = "the rfed developers"
copyright = "the rfed developers"  # noqa: A001
release = rfed.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "rfed_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# results/*/results.md are fragments included by guide/experiments.md
exclude_patterns = ["_build", "_pending", "results", "tutorials_src", "Thumbs.db", ".DS_Store"]
templates_path: list[str] = []

# Every warning is an error (-W on the command line) and every cross-reference must resolve (-n).
nitpicky = True
# External libraries have no inventory offline (no intersphinx): their names are not checked.
nitpick_ignore_regex = [
    ("py:.*", r"(numpy|np|scipy|dp_accounting|dpa|flwr|mpi4py|MPI|matplotlib|pymanopt|"
              r"geomstats|autograd|sklearn|tqdm|collections|typing|abc|enum|concurrent|"
              r"dataclasses|pathlib|os|io|json|contextlib|types|numbers|random|threading|"
              r"multiprocessing|warnings|functools|re)(\..*)?"),
    ("py:.*", r"(int|float|str|bool|bytes|dict|list|tuple|set|frozenset|object|type|None|"
              r"callable|Callable|Iterable|Iterator|Sequence|Mapping|MutableMapping|Any|"
              r"Optional|Union|Literal|Self|TypeVar|Path|Generator|ndarray|array_like|"
              r"array-like|optional|default|NDArray|ArrayLike|DTypeLike|np\.ndarray|"
              r"Exception|BaseException|ValueError|TypeError|RuntimeError|KeyError|OSError|"
              r"UserWarning|RuntimeWarning|Warning|ArithmeticError|FloatingPointError|"
              r"LookupError|IndexError|NotImplementedError|AttributeError|ImportError|"
              r"FileNotFoundError|Protocol|ABC|NamedTuple|slice|complex|range|memoryview|"
              r"bytearray|Ellipsis|NotImplemented|property|classmethod|staticmethod)"),
]

# MyST: $...$ maths, ::: fences, definition lists; headings get anchors for links.
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# Autodoc and numpydoc.
autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"undoc-members": False}
autosummary_generate = False
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_attributes_as_param_list = False

# Executed tutorials: every script in tutorials_src/ runs at build time; one that raises fails
# the build (sphinx-gallery's abort_on_example_error).
sphinx_gallery_conf = {
    "examples_dirs": ["tutorials_src"],
    "gallery_dirs": ["tutorials"],
    "filename_pattern": r"/plot_",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "download_all_examples": False,
    "plot_gallery": "True",
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "show_memory": False,
    "capture_repr": ("_repr_html_",),
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "reset_modules": ("matplotlib",),
}

# Pages other parts of the project write: left out of the toctrees, and their links turned into
# plain text, while they do not exist (docs/_ext/rfed_docs.py).
rfed_optional_pages = [
    "guide/geometry", "guide/optimizers", "guide/privacy-relations", "guide/secure-mode",
    "guide/files-and-checkpoints", "guide/flower", "guide/baselines", "guide/attacks",
    "guide/scale",
]

html_theme = "alabaster"
html_title = f"rfed {release}"
html_static_path: list[str] = []
html_theme_options = {
    "description": "Differentially private federated and decentralized optimization on "
                   "Riemannian manifolds",
    "fixed_sidebar": True,
}

# One BLAS thread for the executed tutorials: the build runs beside other jobs.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
