"""A malicious SuperNode for tests/engines/test_flower.py (never imported by rfed).

The test starts one SuperNode with this directory first on its PYTHONPATH: Python imports this
module when each of the node's processes starts, and it replaces ``rfed.engines.flower``'s
ClientApp, before Flower loads it, by one that tampers with its replies in runs whose seed is
:data:`ATTACK_SEED` (round ``t`` uses ``ATTACKS[t % 4]``) and is honest otherwise. It skips the
honest client's guard and trains as it likes; the other SuperNodes run rfed's ClientApp.
"""

from dataclasses import replace

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.clientapp import ClientApp

import rfed.engines.flower as flower

ATTACK_SEED = 666
ATTACKS = ("nan", "huge", "off-manifold", "no-noise")

app = ClientApp()


@app.train()
def _train(msg, context):
    if int(context.run_config.get("seed", 0)) != ATTACK_SEED:
        return flower.client_train(msg, context)
    c, problem, alg, state0, _ = flower._client_setup(context)
    cfg = msg.content["cfg"]
    t = int(cfg["round"])
    agents = np.asarray(cfg["agents"], dtype=np.int64)
    attack = ATTACKS[t % len(ATTACKS)]
    if attack == "no-noise":   # trains without noise and says so
        state0 = replace(state0, plan=replace(state0.plan, sigma=np.zeros_like(state0.plan.sigma)))
    out = flower.train_block(problem, alg, state0, msg.content["x"]["x"].numpy(), t,
                             int(cfg["seed"]), agents)
    points = np.array(out.points)
    if attack == "nan":
        points[:] = np.nan
    elif attack == "huge":
        points *= 1e150
    elif attack == "off-manifold":
        points *= 1.5
    return Message(RecordDict({
        "points": ArrayRecord({"points": Array(np.ascontiguousarray(points))}),
        "cfg": ConfigRecord({"round": t, "agents": [int(a) for a in agents],
                             "sigma": [float(v) for v in out.sigma],
                             "sensitivity": [float(v) for v in out.sensitivity],
                             "status": "ok", "randomness": "run-seed"})}), reply_to=msg)


app.query()(flower.client_query)
flower.client_app = app
