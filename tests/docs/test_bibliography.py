"""Every paper and method is cited in full: in rfed.bibliography, in `rfed show`, in the modules."""

from __future__ import annotations

import contextlib
import importlib
import io
import re

import pytest

from rfed.bibliography import METHODS, PAPERS, REFERENCES, Reference, cited_in
from rfed.cli import main
from rfed.experiments import list_experiments


def test_every_reference_is_complete():
    for ref in REFERENCES.values():
        assert ref.authors and all(a.strip() for a in ref.authors), ref.key
        assert ref.title and ref.venue and 1900 < ref.year < 2100, ref.key
        if ref.arxiv:
            assert re.fullmatch(r"\d{4}\.\d{4,5}|[a-z-]+/\d{7}", ref.arxiv), ref.key
    for ref in PAPERS.values():
        assert ref.arxiv, f"{ref.key}: each of the five papers has an arXiv identifier"
    assert set(PAPERS) == {"prirfed", "doadp", "dpdl", "dpdda", "dpdgt"}
    assert not set(PAPERS) & set(METHODS)


def test_a_reference_prints_authors_title_venue_year_and_arxiv():
    ref = Reference("x", ("A One", "B Two", "C Three"), "A Title", "Some Venue 1", 2020,
                    "2001.00001")
    assert str(ref) == "A One, B Two and C Three. A Title. Some Venue 1, 2020. arXiv:2001.00001."
    pre = Reference("y", ("A One",), "T", "arXiv preprint", 2024, "2404.10029")
    assert str(pre) == "A One. T. arXiv preprint arXiv:2404.10029, 2024."


def test_cited_in_finds_whole_names_only():
    keys = [r.key for r in cited_in("DP-DDA against DP-DGT; Analyze Gauss and noisy power")]
    assert keys[:2] == ["dpdda", "dpdgt"] and "dwork2014gauss" in keys and "hardt2014" in keys
    assert cited_in("DP-DDAX and xDPDL") == []


def _show(name: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["show", name]) == 0
    return out.getvalue()


@pytest.mark.parametrize("experiment", [e.name for e in list_experiments()])
def test_rfed_show_cites_the_papers_an_experiment_reproduces(experiment):
    from rfed.experiments import get_experiment

    exp = get_experiment(experiment)
    text = _show(experiment)
    named = [p for p in PAPERS.values() if any(n in exp.paper_label for n in p.names)]
    assert named, f"{experiment}: its paper label names none of the five papers"
    assert "reproduces:" in text
    for paper in named:
        assert paper.arxiv in text and paper.authors[0] in text, (experiment, paper.key)


#: The module docstring of each algorithm cites its paper (and the methods it implements).
MODULE_CITATIONS = {
    "rfed.algorithms.federated": ["prirfed"],
    "rfed.algorithms.federated.prirfed": ["prirfed"],
    "rfed.algorithms.federated.local": ["prirfed", "han2024", "utpala2023", "wang2019"],
    "rfed.algorithms.federated.client_dp": ["prirfed"],
    "rfed.algorithms.decentralized.doadp": ["doadp"],
    "rfed.algorithms.decentralized.dpdl": ["dpdl", "xu2021"],
    "rfed.algorithms.decentralized.dpdda": ["dpdda", "liu2022dda"],
    "rfed.algorithms.decentralized.dpdgt": ["dpdgt", "zhang2020ddgt"],
    "rfed.algorithms.centralized": ["abadi2016"],
    "rfed.algorithms.baselines.pca": ["dwork2014gauss", "hardt2014"],
    "rfed.algorithms.baselines.spd_mean": ["reimherr2021"],
    "rfed.privacy.papers": ["prirfed", "doadp", "dpdl", "dpdda", "dpdgt"],
    "rfed.privacy.accountants": ["mironov2017", "mironov2019", "wang2019", "zhu2019",
                                 "meiser2018", "koskela2020", "doroshenko2022"],
    "rfed.privacy.secure": ["canonne2020", "mironov2012"],
    "rfed.privacy.audit": ["jagielski2020", "nasr2021", "clopper1934", "kairouz2015"],
    "rfed.manifolds.base": ["karcher1977"],
    "rfed.networks.mixing": ["xiao2007"],
    "rfed.algorithms.decentralized": ["doadp", "dpdl", "dpdda", "dpdgt"],
    "rfed.privacy.mechanisms": ["prirfed", "canonne2020"],
    "rfed.datasets.synthetic": ["prirfed", "shamir2015", "reimherr2021"],
    "rfed.datasets.wordnet": ["nickel2017", "nickel2018", "belkin2003"],
    "rfed.datasets.images": ["tuzel2006"],
    "rfed.datasets.dispatch": ["dpdgt", "kar2012"],
}


@pytest.mark.parametrize("module, keys", MODULE_CITATIONS.items())
def test_module_docstrings_cite_in_full(module, keys):
    doc = " ".join((importlib.import_module(module).__doc__ or "").split())
    for key in keys:
        ref = REFERENCES[key]
        title = " ".join(ref.title.split())
        assert title in doc, f"{module} does not cite {key} ({title!r})"
        assert str(ref.year) in doc
        if ref.arxiv:
            assert ref.arxiv in doc, f"{module}: {key} without its arXiv identifier"
