"""PriRFed on Flower: the app's config, and a real SuperLink with SuperNodes on loopback giving
the in-process run's final point and privacy report bit for bit (same seed)."""

import sys

import numpy as np
import pytest

flwr = pytest.importorskip("flwr", reason="flwr (Python >= 3.11, extra rfed[flower]) is not "
                                          "installed: the Flower engine cannot run")

import tomllib  # noqa: E402  (Python >= 3.11, as flwr)

from rfed.engines import flower  # noqa: E402


def test_app_package_declares_the_engine_and_its_default_config():
    meta = tomllib.loads((flower.APP_DIR / "pyproject.toml").read_text())["tool"]["flwr"]["app"]
    assert meta["components"] == {"serverapp": "rfed.engines.flower:server_app",
                                  "clientapp": "rfed.engines.flower:client_app"}
    assert meta["config"] == flower.DEFAULT_CONFIG
    assert isinstance(flower.server_app, flwr.serverapp.ServerApp)
    assert isinstance(flower.client_app, flwr.clientapp.ClientApp)
    with pytest.raises(ValueError, match="unknown run-config keys"):
        flower.problem_from_config({"n-agent": 3})
    with pytest.raises(ValueError, match="'trainer' must be"):
        flower.algorithm_from_config({"trainer": "sgd"})


@pytest.mark.parametrize("overrides", [{"rounds": 2}, {"rounds": 2, "client-clip": 0.1}])
def test_in_process_reference_is_prirfed_run_with_the_same_seed(overrides):
    x, privacy = flower.run_in_process(overrides)
    cfg = {**flower.DEFAULT_CONFIG, **overrides}
    res = flower.algorithm_from_config(cfg).run(flower.problem_from_config(cfg), 2,
                                                rng=cfg["seed"], eval_every=2)
    np.testing.assert_array_equal(x, res.x)
    assert privacy == res.privacy


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="process groups")
@pytest.mark.parametrize("overrides,n_nodes", [
    ({"rounds": 2}, 2),
    ({"rounds": 2, "trainer": "dp-rsvrg", "aggregation": "karcher", "n-sampled": 5}, 3),
    ({"rounds": 2, "client-clip": 0.1, "client-epsilon": 2.0}, 2),
])
def test_superlink_with_supernodes_gives_the_in_process_run(tmp_path, overrides, n_nodes):
    x, privacy = flower.run_on_deployment(overrides, n_nodes, workdir=tmp_path, timeout=400)
    x_ref, privacy_ref = flower.run_in_process(overrides)
    np.testing.assert_array_equal(x, x_ref)
    assert privacy == privacy_ref
    assert privacy["epsilon_certified"] <= flower.DEFAULT_CONFIG["epsilon"]
    if "client-clip" in overrides:
        assert privacy["client_level"]["epsilon_certified"] <= overrides["client-epsilon"]
