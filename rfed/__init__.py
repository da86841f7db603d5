"""rfed: differentially private federated and decentralized optimization on Riemannian manifolds."""

__version__ = "0.1.0"
