"""The works rfed implements, reproduces or compares against, with their full citations.

One record per work: authors, title, venue, year and arXiv identifier where one exists. ``rfed
show NAME`` prints the records of the papers an experiment reproduces and of the methods it
compares against (:func:`cited_in` finds them from the experiment's text), the documentation's
bibliography page lists every record, and the module docstring of each algorithm cites its paper
in the same words.

>>> from rfed.bibliography import PAPERS
>>> print(PAPERS["prirfed"].arxiv)
2404.10029
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Reference", "PAPERS", "METHODS", "REFERENCES", "cited_in"]


@dataclass(frozen=True)
class Reference:
    """One cited work.

    Parameters
    ----------
    key : str
        Short identifier, also the label of its entry in the documentation's bibliography.
    authors : tuple of str
        Authors as printed by the work, in order.
    title : str
        Title as printed.
    venue : str
        Journal or conference with volume and article number where there is one, or
        ``"arXiv preprint"``.
    year : int
        Year of the version cited.
    arxiv : str or None
        arXiv identifier (``"2404.10029"``) when the work has one.
    names : tuple of str
        The names rfed's text uses for the work or its method (``"PriRFed"``, ``"Analyze
        Gauss"``); :func:`cited_in` looks for them as whole words.
    """

    key: str
    authors: tuple[str, ...]
    title: str
    venue: str
    year: int
    arxiv: str | None = None
    names: tuple[str, ...] = ()

    @property
    def author_text(self) -> str:
        """``"A, B and C"``."""
        if len(self.authors) == 1:
            return self.authors[0]
        return ", ".join(self.authors[:-1]) + " and " + self.authors[-1]

    def __str__(self) -> str:
        """``Authors. Title. Venue, year. arXiv:ID.``; a preprint ends ``arXiv preprint
        arXiv:ID, year.``"""
        if self.venue == "arXiv preprint" and self.arxiv:
            return (f"{self.author_text}. {self.title}. arXiv preprint arXiv:{self.arxiv}, "
                    f"{self.year}.")
        text = f"{self.author_text}. {self.title}. {self.venue}, {self.year}."
        if self.arxiv:
            text += f" arXiv:{self.arxiv}."
        return text


def _ref(key, authors, title, venue, year, arxiv=None, names=()) -> Reference:
    return Reference(key, tuple(authors), title, venue, year, arxiv, tuple(names))


#: The five papers whose algorithms and experiments rfed reproduces.
PAPERS: dict[str, Reference] = {r.key: r for r in [
    _ref("prirfed", ["Zhenwei Huang", "Wen Huang", "Pratik Jawanpuria", "Bamdev Mishra"],
         "Federated Learning on Riemannian Manifolds with Differential Privacy",
         "arXiv preprint", 2024, "2404.10029", ["PriRFed", "DP-RSGD", "DP-RSVRG"]),
    _ref("doadp", ["Wei Huo", "Changxin Liu", "Kemi Ding", "Karl Henrik Johansson", "Ling Shi"],
         "Decentralized Optimization with Amplified Privacy via Efficient Communication",
         "arXiv preprint", 2025, "2506.07102", ["DO-ADP"]),
    _ref("dpdl", ["Yunsheng Yuan", "Xue Xiao", "Lina Wang", "Feng Li"],
         "DPDL: Towards Differential Privacy Preservation in Decentralized Stochastic Learning "
         "on Non-IID Data", "arXiv preprint", 2026, "2606.04399", ["DPDL"]),
    _ref("dpdda", ["Changxin Liu", "Karl H. Johansson", "Yang Shi"],
         "Distributed Empirical Risk Minimization With Differential Privacy",
         "Automatica 162, 111514", 2024, "2302.10520", ["DP-DDA"]),
    _ref("dpdgt", ["Wei Huo", "Xiaomeng Chen", "Lingying Huang", "Karl Henrik Johansson",
                   "Ling Shi"],
         "Differentially Private Dual Gradient Tracking for Distributed Resource Allocation",
         "Automatica 182, 112521", 2025, "2403.18275", ["DP-DGT"]),
]}

#: Methods rfed implements, evaluates or compares against, and the sources of its conventions.
METHODS: dict[str, Reference] = {r.key: r for r in [
    # private learning on manifolds: the sources of PriRFed's local trainers and baselines
    _ref("han2024", ["Andi Han", "Bamdev Mishra", "Pratik Jawanpuria", "Junbin Gao"],
         "Differentially Private Riemannian Optimization", "Machine Learning 113", 2024,
         "2205.09494"),
    _ref("utpala2023", ["Saiteja Utpala", "Andi Han", "Pratik Jawanpuria", "Bamdev Mishra"],
         "Improved Differentially Private Riemannian Optimization: Fast Sampling and Variance "
         "Reduction", "Transactions on Machine Learning Research", 2023),
    _ref("reimherr2021", ["Matthew Reimherr", "Karthik Bharath", "Carlos Soto"],
         "Differential Privacy over Riemannian Manifolds",
         "Advances in Neural Information Processing Systems 34 (NeurIPS)", 2021, "2111.02516",
         ["log-Euclidean private mean"]),
    # private PCA baselines
    _ref("dwork2014gauss", ["Cynthia Dwork", "Kunal Talwar", "Abhradeep Thakurta", "Li Zhang"],
         "Analyze Gauss: Optimal Bounds for Privacy-Preserving Principal Component Analysis",
         "Proceedings of the 46th ACM Symposium on Theory of Computing (STOC)", 2014,
         names=["Analyze Gauss"]),
    _ref("hardt2014", ["Moritz Hardt", "Eric Price"],
         "The Noisy Power Method: A Meta Algorithm with Applications",
         "Advances in Neural Information Processing Systems 27 (NeurIPS)", 2014, "1311.2495",
         ["noisy power method", "noisy power"]),
    # decentralized baselines
    _ref("xu2021", ["Jie Xu", "Wei Zhang", "Fei Wang"],
         "A(DP)^2SGD: Asynchronous Decentralized Parallel Stochastic Gradient Descent with "
         "Differential Privacy", "IEEE Transactions on Pattern Analysis and Machine Intelligence",
         2021, "2008.09246", ["DP-DPSGD"]),
    _ref("zhang2020ddgt", ["Jiaqi Zhang", "Keyou You", "Kai Cai"],
         "Distributed Dual Gradient Tracking for Resource Allocation in Unbalanced Networks",
         "IEEE Transactions on Signal Processing 68", 2020, names=["DDGT"]),
    _ref("liu2022dda", ["Changxin Liu", "Karl H. Johansson", "Yang Shi"],
         "Private Stochastic Dual Averaging for Decentralized Empirical Risk Minimization",
         "IFAC-PapersOnLine 55(13) (NecSys)", 2022),
    _ref("abadi2016", ["Martin Abadi", "Andy Chu", "Ian Goodfellow", "H. Brendan McMahan",
                       "Ilya Mironov", "Kunal Talwar", "Li Zhang"],
         "Deep Learning with Differential Privacy",
         "Proceedings of the 2016 ACM SIGSAC Conference on Computer and Communications "
         "Security (CCS)", 2016, "1607.00133", ["DP-SGD"]),
    # accounting
    _ref("dwork2014book", ["Cynthia Dwork", "Aaron Roth"],
         "The Algorithmic Foundations of Differential Privacy",
         "Foundations and Trends in Theoretical Computer Science 9(3-4)", 2014),
    _ref("dwork2010", ["Cynthia Dwork", "Guy N. Rothblum", "Salil Vadhan"],
         "Boosting and Differential Privacy",
         "IEEE 51st Annual Symposium on Foundations of Computer Science (FOCS)", 2010,
         names=["advanced composition"]),
    _ref("kairouz2015", ["Peter Kairouz", "Sewoong Oh", "Pramod Viswanath"],
         "The Composition Theorem for Differential Privacy",
         "Proceedings of the 32nd International Conference on Machine Learning (ICML)", 2015,
         "1311.0776"),
    _ref("mironov2017", ["Ilya Mironov"], "Renyi Differential Privacy",
         "IEEE 30th Computer Security Foundations Symposium (CSF)", 2017, "1702.07476",
         ["RDP"]),
    _ref("mironov2019", ["Ilya Mironov", "Kunal Talwar", "Li Zhang"],
         "Renyi Differential Privacy of the Sampled Gaussian Mechanism", "arXiv preprint", 2019,
         "1908.10530"),
    _ref("wang2019", ["Yu-Xiang Wang", "Borja Balle", "Shiva Prasad Kasiviswanathan"],
         "Subsampled Renyi Differential Privacy and Analytical Moments Accountant",
         "Proceedings of the 22nd International Conference on Artificial Intelligence and "
         "Statistics (AISTATS)", 2019, "1808.00087"),
    _ref("zhu2019", ["Yuqing Zhu", "Yu-Xiang Wang"],
         "Poisson Subsampled Renyi Differential Privacy",
         "Proceedings of the 36th International Conference on Machine Learning (ICML)", 2019),
    _ref("meiser2018", ["Sebastian Meiser", "Esfandiar Mohammadi"],
         "Tight on Budget? Tight Bounds for r-Fold Approximate Differential Privacy",
         "Proceedings of the 2018 ACM SIGSAC Conference on Computer and Communications Security "
         "(CCS)", 2018),
    _ref("koskela2020", ["Antti Koskela", "Joonas Jalko", "Antti Honkela"],
         "Computing Tight Differential Privacy Guarantees Using FFT",
         "Proceedings of the 23rd International Conference on Artificial Intelligence and "
         "Statistics (AISTATS)", 2020, "1906.03049", ["PLD"]),
    _ref("doroshenko2022", ["Vadym Doroshenko", "Badih Ghazi", "Pritish Kamath", "Ravi Kumar",
                            "Pasin Manurangsi"],
         "Connect the Dots: Tighter Discrete Approximations of Privacy Loss Distributions",
         "Proceedings on Privacy Enhancing Technologies (PETS) 2022(4)", 2022, "2207.04380"),
    # secure mode
    _ref("canonne2020", ["Clement L. Canonne", "Gautam Kamath", "Thomas Steinke"],
         "The Discrete Gaussian for Differential Privacy",
         "Advances in Neural Information Processing Systems 33 (NeurIPS)", 2020, "2004.00010",
         ["discrete Gaussian", "discrete Laplace", "secure mode"]),
    _ref("mironov2012", ["Ilya Mironov"],
         "On Significance of the Least Significant Bits for Differential Privacy",
         "Proceedings of the 2012 ACM Conference on Computer and Communications Security (CCS)",
         2012),
    # audits
    _ref("jagielski2020", ["Matthew Jagielski", "Jonathan Ullman", "Alina Oprea"],
         "Auditing Differentially Private Machine Learning: How Private is Private SGD?",
         "Advances in Neural Information Processing Systems 33 (NeurIPS)", 2020, "2006.07709",
         ["audit"]),
    _ref("nasr2021", ["Milad Nasr", "Shuang Song", "Abhradeep Thakurta", "Nicolas Papernot",
                      "Nicholas Carlini"],
         "Adversary Instantiation: Lower Bounds for Differentially Private Machine Learning",
         "IEEE Symposium on Security and Privacy (S&P)", 2021, "2101.04535"),
    _ref("clopper1934", ["C. J. Clopper", "E. S. Pearson"],
         "The Use of Confidence or Fiducial Limits Illustrated in the Case of the Binomial",
         "Biometrika 26(4)", 1934, names=["Clopper-Pearson"]),
    # geometry
    _ref("karcher1977", ["Hermann Karcher"], "Riemannian Center of Mass and Mollifier Smoothing",
         "Communications on Pure and Applied Mathematics 30(5)", 1977,
         names=["Karcher mean", "Frechet mean"]),
    _ref("edelman1998", ["Alan Edelman", "Tomas A. Arias", "Steven T. Smith"],
         "The Geometry of Algorithms with Orthogonality Constraints",
         "SIAM Journal on Matrix Analysis and Applications 20(2)", 1998, "physics/9806030",
         ["Stiefel", "Grassmann"]),
    _ref("absil2008", ["P.-A. Absil", "R. Mahony", "R. Sepulchre"],
         "Optimization Algorithms on Matrix Manifolds", "Princeton University Press", 2008),
    _ref("zimmermann2017", ["Ralf Zimmermann"],
         "A Matrix-Algebraic Algorithm for the Riemannian Logarithm on the Stiefel Manifold "
         "under the Canonical Metric", "SIAM Journal on Matrix Analysis and Applications 38(2)",
         2017, "1604.05054"),
    _ref("nickel2017", ["Maximilian Nickel", "Douwe Kiela"],
         "Poincare Embeddings for Learning Hierarchical Representations",
         "Advances in Neural Information Processing Systems 30 (NeurIPS)", 2017, "1705.08039"),
    _ref("nickel2018", ["Maximilian Nickel", "Douwe Kiela"],
         "Learning Continuous Hierarchies in the Lorentz Model of Hyperbolic Geometry",
         "Proceedings of the 35th International Conference on Machine Learning (ICML)", 2018,
         "1806.03417", ["WordNet"]),
    # networks
    _ref("xiao2007", ["Lin Xiao", "Stephen Boyd", "Seung-Jean Kim"],
         "Distributed Average Consensus with Least-Mean-Square Deviation",
         "Journal of Parallel and Distributed Computing 67(1)", 2007,
         names=["Metropolis"]),
    # data
    _ref("shamir2015", ["Ohad Shamir"],
         "A Stochastic PCA and SVD Algorithm with an Exponential Convergence Rate",
         "Proceedings of the 32nd International Conference on Machine Learning (ICML)", 2015,
         "1409.2848"),
    _ref("tuzel2006", ["Oncel Tuzel", "Fatih Porikli", "Peter Meer"],
         "Region Covariance: A Fast Descriptor for Detection and Classification",
         "European Conference on Computer Vision (ECCV)", 2006,
         names=["covariance descriptors"]),
    _ref("belkin2003", ["Mikhail Belkin", "Partha Niyogi"],
         "Laplacian Eigenmaps for Dimensionality Reduction and Data Representation",
         "Neural Computation 15(6)", 2003, names=["Laplacian eigenmap"]),
    _ref("xiao2017fmnist", ["Han Xiao", "Kashif Rasul", "Roland Vollgraf"],
         "Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine Learning Algorithms",
         "arXiv preprint", 2017, "1708.07747", ["Fashion-MNIST"]),
    _ref("wortsman2022", ["Mitchell Wortsman", "Gabriel Ilharco", "Jong Wook Kim", "Mike Li",
                          "Simon Kornblith", "Rebecca Roelofs", "Raphael Gontijo Lopes",
                          "Hannaneh Hajishirzi", "Ali Farhadi", "Hongseok Namkoong",
                          "Ludwig Schmidt"],
         "Robust fine-tuning of zero-shot models",
         "Proceedings of the IEEE/CVF Conference on Computer Vision and Pattern Recognition "
         "(CVPR)", 2022, "2109.01903", ["WiSE-FT"]),
    # the decentralized papers' baselines (docs/guide/baselines.md)
    _ref("cyffers2022", ["Edwige Cyffers", "Mathieu Even", "Aurelien Bellet",
                         "Laurent Massoulie"],
         "Muffliato: Peer-to-Peer Privacy Amplification for Decentralized Optimization and "
         "Averaging", "Advances in Neural Information Processing Systems 35 (NeurIPS)", 2022,
         "2206.05091", ["MUFFLIATO", "Muffliato"]),
    _ref("huang2015dpdo", ["Zhenqi Huang", "Sayan Mitra", "Nitin Vaidya"],
         "Differentially Private Distributed Optimization",
         "Proceedings of the 16th International Conference on Distributed Computing and "
         "Networking (ICDCN)", 2015, "1401.2596", ["DPDO"]),
    _ref("esfandiari2021", ["Yasaman Esfandiari", "Sin Yong Tan", "Zhanhong Jiang",
                            "Aditya Balu", "Ethan Herron", "Chinmay Hegde", "Soumik Sarkar"],
         "Cross-Gradient Aggregation for Decentralized Learning from Non-IID Data",
         "Proceedings of the 38th International Conference on Machine Learning (ICML), PMLR "
         "139", 2021, "2103.02051", ["DP-CGA", "CGA"]),
    # private learning on public features (utility-fmnist-classify)
    _ref("tramer2021", ["Florian Tramer", "Dan Boneh"],
         "Differentially Private Learning Needs Better Features (or Much More Data)",
         "International Conference on Learning Representations (ICLR)", 2021, "2011.11660",
         ["Tramer and Boneh"]),
    _ref("bruna2013", ["Joan Bruna", "Stephane Mallat"],
         "Invariant Scattering Convolution Networks",
         "IEEE Transactions on Pattern Analysis and Machine Intelligence 35(8)", 2013,
         "1203.1513", ["ScatterNet", "Bruna and Mallat"]),
    _ref("wu2018groupnorm", ["Yuxin Wu", "Kaiming He"], "Group Normalization",
         "European Conference on Computer Vision (ECCV)", 2018, "1803.08494",
         ["GroupNorm"]),
    _ref("papernot2021", ["Nicolas Papernot", "Abhradeep Thakurta", "Shuang Song",
                          "Steve Chien", "Ulfar Erlingsson"],
         "Tempered Sigmoid Activations for Deep Learning with Differential Privacy",
         "Proceedings of the AAAI Conference on Artificial Intelligence 35", 2021,
         "2007.14191", ["tempered sigmoid"]),
    _ref("kar2012", ["Soummya Kar", "Gabriela Hug"],
         "Distributed Robust Economic Dispatch in Power Systems: A Consensus + Innovations "
         "Approach", "IEEE Power and Energy Society General Meeting", 2012,
         names=["IEEE 14-bus"]),
]}

#: Every record, papers first.
REFERENCES: dict[str, Reference] = {**PAPERS, **METHODS}


def cited_in(text: str) -> list[Reference]:
    """The records whose names occur in ``text`` as whole words, papers first.

    Parameters
    ----------
    text : str
        Any text, e.g. an experiment's paper label and description.

    Returns
    -------
    list of Reference
        Each record at most once, in the order of :data:`REFERENCES`.
    """
    found = []
    for ref in REFERENCES.values():
        for name in ref.names:
            if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text):
                found.append(ref)
                break
    return found
