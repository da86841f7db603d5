"""``rfed run dpdl-attack`` (DPDL's Tables III-IV at small scale): the unnoised messages are
inverted exactly, the noised ones no better than a blank image, and the membership table puts
the attack beside the certificate's bound."""

import numpy as np

from rfed.experiments.registry import run_experiment

SMALL = {"n_agents": 4, "per_agent": 20, "rounds": 4, "attack_rounds": [2, 4], "hidden": 8}


def test_dpdl_attack_small(tmp_path):
    summary, ctx = run_experiment("dpdl-attack", seed=0, overrides=SMALL, out_dir=tmp_path)
    rows = ctx.tables["table3_inversion"]
    assert {(r["scenario"], r["round"]) for r in rows} == {
        (s, t) for s in ("ND-CG", "DPDL-CG", "ND-MM", "DPDL-MM") for t in (2, 4)}
    blank = summary["blank_psnr_db"]
    for r in rows:
        if r["scenario"] == "ND-CG":          # one record's clipped gradient: exact
            assert r["psnr_db"] > 100 and r["ssim"] > 0.999
        if r["scenario"] == "DPDL-CG":        # at the certified budget: no better than blank
            assert r["psnr_db"] < blank + 1.0
    mi = {r["run"]: r for r in ctx.tables["membership_inference"]}
    private = next(r for name, r in mi.items() if "certified" in name)
    assert private["advantage"] <= private["advantage_bound"]
    assert 0 < private["epsilon"] <= 8.0
    assert ctx.privacy and all(np.isfinite(r["mse"]) for r in rows)
    assert {p.name for p in tmp_path.glob("*.png")} == {"fig5_reconstructions.png",
                                                         "table3_psnr.png"}
