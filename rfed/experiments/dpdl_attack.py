"""DPDL's privacy attacks at small scale (Tables III-IV, Figs. 5-6): inversion and membership.

DPDL (Yuan et al.) attacks the messages an agent sends, with and without its Gaussian mechanism:
the cross-gradients (CG) it returns to its neighbours and its aggregate update (MM, the
aggregate ``gtilde^i_t = vtilde^i_t - beta v^i_{t-1}`` recovered from consecutive momenta), at
three rounds, reporting MSE, PSNR and SSIM of the reconstructions. Here, on the offline stand-in
(scikit-learn's 8x8 digits, an MLP, DPDL's complete bipartite graph), with minibatches of ONE
record so that a message is one record's gradient (the attack the paper's tables need), the
analytic inversion of the first layer (:func:`rfed.privacy.attacks.invert_affine_gradient`)
attacks:

* ND-CG / ND-MM: a run without noise (no defence);
* DPDL-CG / DPDL-MM: a run whose noise certifies ``epsilon`` (record level, replace-one, delta)
  over the planned rounds.

A cross-gradient of round ``t`` is the mechanism's output for the record the data owner drew,
at the model it received (the clipped gradient divided by ``B``, plus, privately, the Gaussian
noise of the run's calibrated standard deviation, drawn here from the experiment's own stream:
the same distribution as the run's message). An aggregate mixes ``|N_i|`` records; it is scored
against the record it reconstructs best (in the attacker's favour). The reconstructions are
clipped to the pixel box [0, 1]; a blank image (all pixels 1/2) is the data-independent
reference.

Membership inference (:func:`rfed.privacy.attacks.loss_threshold_attack`) on the agents' mean
model at the end of both runs, members = the training records, non-members = the test split,
beside the bound the private run's certificate implies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rfed.algorithms.decentralized import DPDL
from rfed.algorithms.private import certifies
from rfed.experiments._decentralized import budget_label
from rfed.experiments.plotting import new_figure
from rfed.experiments.registry import RunContext, register, summary_row
from rfed.networks.graphs import dpdl_bipartite
from rfed.networks.mixing import uniform_weights
from rfed.networks.network import Network
from rfed.privacy.attacks import (
    invert_affine_gradient,
    loss_threshold_attack,
    reconstruction_scores,
)
from rfed.privacy.budget import PrivacyBudget
from rfed.privacy.clipping import clip_by_norm
from rfed.problems.mlp import MLPClassifier, load_digits_split

__all__: list[str] = []

SCENARIOS = ("ND-CG", "DPDL-CG", "ND-MM", "DPDL-MM")


def _invert(problem: MLPClassifier, messages: np.ndarray) -> np.ndarray:
    w1, b1, _, _ = problem.unflatten(messages)
    return np.clip(invert_affine_gradient(w1, b1), 0.0, 1.0)


def _best_match(guess: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """For each guess ``(m, d)``, the candidate ``(m, k, d)`` nearest to it (the record an
    attacker would claim)."""
    err = np.sum((candidates - guess[:, None]) ** 2, axis=-1)
    return candidates[np.arange(guess.shape[0]), np.argmin(err, axis=1)]


@register(
    "dpdl-attack",
    paper="DPDL, Sec. 6: Tables III-IV and Figs. 5-6 (gradient inversion)",
    description=(
        "Gradient inversion of the messages DPDL agents send, without noise and at a certified "
        "budget, on scikit-learn's digits (stand-in for MNIST; MLP 64-16-10; 10 agents on the "
        "complete bipartite graph; minibatches of one record): the analytic inversion of the "
        "first layer from each cross-gradient (CG) and each aggregate update (MM) at three "
        "rounds, MSE / PSNR / SSIM of the reconstructions against a blank image; and a "
        "loss-threshold membership inference on the final models beside the bound the "
        "certified epsilon implies on its advantage."
    ),
    defaults={"n_agents": 10, "per_agent": 100, "hidden": 16, "rounds": 40,
              "attack_rounds": [10, 20, 40], "epsilon": 8.0, "delta": 1e-5, "clip": 2.0,
              "lr": 0.05, "beta": 0.7, "alpha": 1.5},
)
def dpdl_attack(config: dict, ctx: RunContext) -> dict:
    """Experiment ``dpdl-attack``: gradient inversion of the messages DPDL agents send.

    Follows DPDL Sec. 6 (Tables III-IV, Figs. 5-6): the attack on messages sent without noise
    and at a certified budget. See ``docs/guide/attacks.md`` and
    ``docs/guide/experiments.md``.

    Parameters
    ----------
    config : dict
        The experiment's settings: its registered defaults updated by ``--set`` and validated
        (:meth:`rfed.experiments.registry.Experiment.config`);
        ``rfed show dpdl-attack`` lists them.
    ctx : RunContext
        The run's context: seeded generators, the history log, privacy reports, tables, figures
        and checkpoints of the output folder.

    Returns
    -------
    dict
        The run's summary (written to ``summary.json`` by :meth:`RunContext.finish`).
    """
    cfg = dict(config)
    n, q = cfg["n_agents"], cfg["per_agent"]
    x_tr, y_tr, x_te, y_te = load_digits_split(rng=ctx.rng(98))
    if n * q > len(y_tr):
        raise ValueError(f"settings 'n_agents' x 'per_agent' ({n} x {q}) exceed the "
                         f"{len(y_tr)} training images")
    rounds = cfg["rounds"]
    attack_rounds = sorted(set(cfg["attack_rounds"]))
    if not attack_rounds or attack_rounds[0] < 1 or attack_rounds[-1] > rounds:
        raise ValueError(f"setting 'attack_rounds' must be rounds in [1, rounds={rounds}], "
                         f"got {cfg['attack_rounds']!r}")
    order = ctx.rng(97).permutation(len(y_tr))[: n * q]
    problem = MLPClassifier(x_tr[order].reshape(n, q, -1), y_tr[order].reshape(n, q),
                            n_hidden=cfg["hidden"])
    x0 = problem.initial_point(ctx.rng(96))
    graph = dpdl_bipartite(n)
    weights = uniform_weights(graph)
    agents = np.arange(n)
    budget = PrivacyBudget(cfg["epsilon"], cfg["delta"])
    private_label = f"DPDL {budget_label(cfg['epsilon'], cfg['delta'])}"
    runs = {"ND": ("DPDL non-private", {}),
            "DPDL": (private_label, {"budget": budget, "n_rounds": rounds})}
    noise = ctx.rng(95)
    rows: list[Mapping[str, Any]] = []
    mi_rows: list[Mapping[str, Any]] = []
    shown: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    finals: dict[str, tuple[Any, DPDL]] = {}
    for key, (label, private) in runs.items():
        alg = DPDL(Network(graph, weights), lr=cfg["lr"], beta=cfg["beta"], alpha=cfg["alpha"],
                   batch_size=1, clip=cfg["clip"], **private)
        state = alg.init(problem, x0, ctx.rng(len(finals), 0))
        for t in range(1, rounds + 1):
            before = state
            state = alg.step(problem, state)
            if t not in attack_rounds:
                continue
            # the minibatch (one record per agent) of round t, drawn from before's keyed streams
            idx = alg._minibatches(problem, before, agents)[:, 0]
            records = problem.data["features"][agents, idx]            # (n, 64)
            # CG: data owner j's message for neighbour i, at the model i sent (x_i of round t)
            owners, models = weights.nonzero()
            off = owners != models
            owners, models = owners[off], models[off]
            grads = problem.sample_rgrad(before.x[models], problem.batch(owners, idx[owners,
                                                                                     None]))
            clipped, _ = clip_by_norm(problem.manifold, before.x[models], grads, alg.clip)
            cg = clipped[:, 0] + before.noise_std * noise.standard_normal(clipped[:, 0].shape)
            cg_guess = _invert(problem, cg)
            # MM: agent i's aggregate of round t mixes the records of i and its neighbours
            mm_guess = _invert(problem, state.gtilde)
            closed = [np.flatnonzero(weights[i].toarray()[0]) for i in agents]
            width = max(len(c) for c in closed)
            cands = np.stack([records[np.resize(c, width)] for c in closed])
            for scenario, guess, truth in ((f"{key}-CG", cg_guess, records[owners]),
                                           (f"{key}-MM", mm_guess,
                                            _best_match(mm_guess, cands))):
                score = reconstruction_scores(guess, truth, (8, 8), 1.0).summary()
                rows.append({"scenario": scenario, "round": t, "messages": score["n"],
                             "mse": score["mse"], "psnr_db": score["psnr_db"],
                             "ssim": score["ssim"], "exact_reconstructions": score["exact"],
                             "privacy": label if key == "DPDL" else "non-private"})
                if t == attack_rounds[-1]:
                    # four different records: the first message of each of four data owners
                    # (CG), the aggregates of agents 0-3 (MM)
                    first = (np.unique(owners, return_index=True)[1][:4] if scenario.endswith(
                        "CG") else np.arange(4))
                    shown[scenario] = (guess[first], truth[first])
        finals[key] = (state, alg)
    # membership inference on the agents' mean model of each run
    members = (problem.data["features"].reshape(n * q, -1), problem.data["labels"].reshape(-1))
    for key, (state, alg) in finals.items():
        theta = np.mean(state.x, axis=0)

        def losses(feats, labels, theta=theta):
            return problem.sample_loss(theta, {"features": feats,
                                               "onehot": np.eye(problem.n_classes)[labels]})

        result = loss_threshold_attack(losses(*members), losses(x_te, y_te))
        row: dict[str, Any] = {
               "run": runs[key][0], "advantage": result.advantage, "auc": result.auc,
               "ks_p_value": result.p_value, "tpr_at_fpr_0.01": result.tpr_at_fpr[0.01],
               "tpr_at_fpr_0.1": result.tpr_at_fpr[0.1],
               "test_accuracy_pct": 100 * float(problem.accuracy(theta, x_te, y_te))}
        rep = alg.privacy(state)
        if certifies(rep):
            ctx.set_privacy(runs[key][0], rep)
            row.update(result.against(rep["epsilon_certified"], rep["delta"]))
            row["privacy"] = rep["label"]
        else:
            row["privacy"] = "non-private"
        mi_rows.append(row)
    blank_psnr = float(np.mean(reconstruction_scores(
        np.full(members[0].shape, 0.5), members[0], (8, 8), 1.0).psnr))
    ctx.save_table("table3_inversion", rows)
    ctx.save_table("membership_inference", mi_rows)
    private_rep = ctx.privacy.get(private_label, {})
    last = [r for r in rows if r["round"] == attack_rounds[-1]]
    ctx.summary_table([summary_row(
        f"{r['scenario']} round {r['round']}" + (f" {private_label}" if "DPDL-" in
                                                 r["scenario"] else " non-private"),
        utility_name="reconstruction PSNR (dB, lower = less leakage)", utility=r["psnr_db"],
        reference=blank_psnr, reference_name="blank image",
        epsilon=private_rep.get("epsilon_certified") if "DPDL-" in r["scenario"] else None,
        delta=private_rep.get("delta") if "DPDL-" in r["scenario"] else None,
        accountant=str(private_rep.get("accountant", "")) if "DPDL-" in r["scenario"] else "",
        figure="DPDL Tables III-IV", repetitions=1) for r in last])
    # Figs. 5-6: true records and their reconstructions at the last attacked round
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(5, 4, figsize=(6.4, 8.4))
    panels = [("true record (CG)", shown["ND-CG"][1])] + [
        (name, shown[name][0]) for name in SCENARIOS]
    for r, (name, imgs) in enumerate(panels):
        for c in range(4):
            ax = axes[r, c]
            ax.imshow(imgs[c].reshape(8, 8), cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(name, fontsize=8)
    eps_text = (f"certified eps={private_rep['epsilon_certified']:.3g} of the budget "
                f"{cfg['epsilon']:g} (delta={cfg['delta']:g}, record level, replace-one)"
                if private_rep else "")
    fig.suptitle(f"Reconstructions at round {attack_rounds[-1]} (digits stand-in; ND: no "
                 f"defence)\nDPDL: {eps_text}", fontsize=9)
    ctx.save_figure(fig, "fig5_reconstructions")
    fig, axes = new_figure(1)
    ax = axes[0]
    for name, style in zip(SCENARIOS, ("k-", "C0-", "k--", "C0--"), strict=True):
        pts = [r for r in rows if r["scenario"] == name]
        lab = name if name.startswith("ND") else f"{name} {private_label}"
        ax.plot([r["round"] for r in pts], [r["psnr_db"] for r in pts], style, marker="o",
                label=lab)
    ax.axhline(blank_psnr, color="0.5", ls=":", label="blank image (all pixels 1/2)")
    ax.set_yscale("log")   # exact reconstructions sit near 300 dB (float rounding)
    ax.set_xlabel("communication round")
    ax.set_ylabel("reconstruction PSNR (dB)")
    ax.set_title("analytic first-layer inversion of DPDL messages", fontsize=10)
    ax.legend()
    fig.suptitle(f"DPDL's messages inverted (digits stand-in): PSNR by round; DPDL: {eps_text}",
                 fontsize=9)
    ctx.save_figure(fig, "table3_psnr")
    return {"inversion": rows, "membership": mi_rows, "blank_psnr_db": blank_psnr}
