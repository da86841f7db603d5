"""A Flower federation on this machine: a SuperLink with SuperNodes on loopback, or Flower's
simulation engine, kept up for any number of runs of the rfed Flower app.

:class:`LoopbackFederation` starts, as a real federation runs them on separate machines:

* ``flower-superlink`` with TLS (a certificate authority and a server certificate for
  ``127.0.0.1`` / ``localhost`` made for the federation, :func:`make_loopback_certificates`)
  and SuperNode authentication (``--enable-supernode-auth``: only registered public keys may
  connect);
* ``n_supernodes`` ``flower-supernode`` processes, each with its own EC key pair (registered with
  ``flwr supernode register`` before it starts), the CA as its root certificate, and its own
  data directory named in its node config (``data-dir``), into which :meth:`LoopbackFederation.run`
  writes the rows of that node's agents (each node a contiguous block);
* or, with ``simulation=True``, ``flower-superlink --simulation``, whose virtual SuperNodes run
  the ClientApps in Ray actors, with the node settings of ``RFED_FLOWER_SIM_NODE_CONFIG``
  (:func:`rfed.engines.flower.node_settings`): data in ``nodes/node-<partition-id>``.

``insecure=True`` is a local-test switch only (plain HTTP, no SuperNode authentication). Runtime
dependency installation is off (offline). Every process started is stopped (its process group)
when the federation closes. The ServerApp's files go to ``RFED_FLOWER_DIR`` = ``workdir/server``.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rfed.engines.flower import (
    APP_DIR,
    DEFAULT_CONFIG,
    FederatedTrace,
    _check_facts,
    _config,
    owned_agents,
)
from rfed.engines.flower_config import problem_facts, write_node_shards
from rfed.problems.base import Problem

__all__ = ["FlowerResult", "LoopbackFederation", "make_loopback_certificates",
           "make_node_key"]


# ----------------------------------------------------------------------------- certificates
def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def make_loopback_certificates(directory: str | Path, days: int = 7) -> dict[str, Path]:
    """A certificate authority and a server certificate for ``127.0.0.1`` and ``localhost``.

    Parameters
    ----------
    directory : path
        Created if absent; receives ``ca.crt``, ``server.crt`` and ``server.key`` (mode 0600).
    days : int
        Validity.

    Returns
    -------
    dict
        ``{"ca": ..., "cert": ..., "key": ...}`` paths. ECDSA P-256 keys, SHA-256 signatures.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rfed loopback CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = {"ca": directory / "ca.crt", "cert": directory / "server.crt",
             "key": directory / "server.key"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_private(paths["key"], key.private_bytes(serialization.Encoding.PEM,
                                                   serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()))
    return paths


def make_node_key(directory: str | Path, name: str = "node") -> tuple[Path, Path]:
    """A SuperNode's authentication key pair (ECDSA P-384, OpenSSH format, as Flower reads it).

    Parameters
    ----------
    directory : str or Path
    name : str

    Returns
    -------
    private, public : paths ``NAME`` (mode 0600) and ``NAME.pub`` in ``directory``.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP384R1())
    private, public = directory / name, directory / f"{name}.pub"
    _write_private(private, key.private_bytes(serialization.Encoding.PEM,
                                              serialization.PrivateFormat.OpenSSH,
                                              serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                     serialization.PublicFormat.OpenSSH))
    return private, public


# ----------------------------------------------------------------------------- federation
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, int) else json.dumps(float(value))
    return json.dumps(str(value))   # a JSON string is a TOML basic string


@dataclass(frozen=True)
class FlowerResult:
    """What the ServerApp wrote: the final point, the privacy report (with its
    ``federation`` section), the trace of the rounds and the number of SuperNodes used.

    Parameters
    ----------
    x : ndarray, shape ``point_shape``
    privacy : dict
    trace : FederatedTrace
    n_nodes : int
    run_id : str
    """

    x: np.ndarray
    privacy: dict[str, Any]
    trace: FederatedTrace
    n_nodes: int
    run_id: str


class LoopbackFederation:
    """A SuperLink and SuperNodes on loopback, or the simulation engine (module docstring).

    Parameters
    ----------
    n_supernodes : int
        SuperNodes (virtual ones in the simulation).
    workdir : path
        Holds ``FLWR_HOME``, the certificates, the keys, the nodes' data directories
        (``nodes/node-<i>``), the server directory, the SuperLink database and the logs.
    simulation : bool
        Flower's simulation engine (needs Ray: ``rfed[flower-sim]``).
    insecure : bool
        Local test switch: no TLS, no SuperNode authentication.
    timeout : float
        Seconds allowed for each run (and for the federation to start).
    port : int, optional
        The SuperLink's port (default: a free one).
    node_config : dict, optional
        ``{i: {key: value}}`` added to SuperNode ``i``'s node config.
    node_env : dict, optional
        ``{i: {name: value}}`` added to SuperNode ``i``'s environment (a value containing
        ``{PYTHONPATH}`` has it replaced by the federation's own ``PYTHONPATH``).
    local_randomness : {'run-seed', 'node-secret'}
        The SuperNodes' node-config ``local-randomness``: ``'run-seed'`` (default here) gives
        the results of a run in one process; ``'node-secret'`` noise the server cannot replay.
    validate : dict, optional
        A run config checked before anything starts.
    """

    def __init__(self, n_supernodes: int = 2, *, workdir: str | Path, simulation: bool = False,
                 insecure: bool = False, timeout: float = 300.0, port: int | None = None,
                 node_config: dict[int, dict[str, Any]] | None = None,
                 node_env: dict[int, dict[str, str]] | None = None,
                 local_randomness: str = "run-seed", validate: dict[str, Any] | None = None):
        if isinstance(n_supernodes, bool) or not isinstance(n_supernodes, (int, np.integer)) \
                or n_supernodes < 1:
            raise ValueError(f"n_supernodes must be a positive integer, got {n_supernodes!r}")
        if local_randomness not in ("run-seed", "node-secret"):
            raise ValueError(f"argument 'local_randomness' must be 'run-seed' or 'node-secret', "
                             f"got {local_randomness!r}")
        if validate is not None:
            _config(validate)   # unknown keys fail here, not after the processes have started
        if simulation:
            try:
                import ray  # noqa: F401
            except ImportError as exc:  # pragma: no cover - exercised where Ray is absent
                raise ImportError("Flower's simulation engine needs Ray: pip install "
                                  "'rfed[flower-sim]' (flwr[simulation])") from exc
        self.n_supernodes = int(n_supernodes)
        self.workdir = Path(workdir).resolve()  # subprocesses run with cwd=workdir
        self.simulation = bool(simulation)
        self.insecure = bool(insecure)
        self.timeout = float(timeout)
        self.port = port
        self.node_config = node_config or {}
        self.node_env = node_env or {}
        self.local_randomness = local_randomness
        self._procs: list[subprocess.Popen] = []
        self._runs = 0
        self.tls: dict[str, Path] = {}
        self.env: dict[str, str] = {}

    # ------------------------------------------------------------------ paths
    def node_dir(self, i: int) -> Path:
        """SuperNode ``i``'s own data directory.

        Parameters
        ----------
        i : int

        Returns
        -------
        Path
        """
        return self.workdir / "nodes" / f"node-{i}"

    @property
    def server_dir(self) -> Path:
        """``RFED_FLOWER_DIR`` of the ServerApp (where ``out`` and ``checkpoint`` go)."""
        return self.workdir / "server"

    @property
    def address(self) -> str:
        """The SuperLink's ``host:port`` on loopback."""
        return f"127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ start / stop
    def __enter__(self) -> LoopbackFederation:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _start(self, args: list[str], log: str, env: dict[str, str] | None = None) -> None:
        with open(self.workdir / log, "w") as fh:
            self._procs.append(subprocess.Popen(args, env=env or self.env, stdout=fh,
                                                stderr=subprocess.STDOUT,
                                                start_new_session=True, cwd=self.workdir))

    def _flwr(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
        return subprocess.run([f"{self.bindir}/flwr", *args], env=self.env, cwd=self.workdir,
                              capture_output=True, text=True, timeout=timeout)

    def start(self) -> None:
        """Start the SuperLink and (deployment) register and start the SuperNodes.

        Makes the certificates and keys (unless ``insecure``), writes the ``flwr`` connection
        ``loopback`` into ``FLWR_HOME/config.toml``, and returns once every SuperNode process is
        started (they connect at their own pace; a run waits for ``min-nodes``).
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = int(self.port or _free_port())
        self.bindir = str(Path(sys.executable).parent)
        root = str(Path(__file__).resolve().parents[2])
        home = self.workdir / "flwr-home"
        home.mkdir(exist_ok=True)
        self.server_dir.mkdir(exist_ok=True)
        self.env = dict(os.environ, FLWR_HOME=str(home),
                        FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1",
                        PATH=self.bindir + os.pathsep + os.environ.get("PATH", ""),
                        PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
                        RFED_FLOWER_DIR=str(self.server_dir))
        if self.simulation:
            self.env["RFED_FLOWER_SIM_NODE_CONFIG"] = json.dumps({
                "data-dir": str(self.workdir / "nodes" / "node-{partition-id}"),
                "local-randomness": self.local_randomness})
        connection = f'address = "{self.address}"\n'
        security: list[str] = ["--insecure"]
        if not self.insecure:
            self.tls = make_loopback_certificates(self.workdir / "tls")
            connection += f'root-certificates = "{self.tls["ca"]}"\n'
            security = ["--ssl-ca-certfile", str(self.tls["ca"]), "--ssl-certfile",
                        str(self.tls["cert"]), "--ssl-keyfile", str(self.tls["key"])]
            if not self.simulation:
                security.append("--enable-supernode-auth")
        else:
            connection += "insecure = true\n"
        (home / "config.toml").write_text(
            f'[superlink]\ndefault = "loopback"\n\n[superlink.loopback]\n{connection}')
        self._start([f"{self.bindir}/flower-superlink", *security,
                     "--disable-runtime-dependency-installation", "--port", str(self.port),
                     "--database", str(self.workdir / "state.db")]
                    + (["--simulation"] if self.simulation else []), "superlink.log")
        if self.simulation:
            return
        deadline = time.monotonic() + self.timeout
        for i in range(self.n_supernodes):
            self.node_dir(i).mkdir(parents=True, exist_ok=True)
            auth: list[str] = ["--insecure"]
            if not self.insecure:
                private, public = make_node_key(self.workdir / "keys", f"node-{i}")
                self._register(public, deadline)
                auth = ["--root-certificates", str(self.tls["ca"]),
                        "--auth-supernode-private-key", str(private)]
            config = {"data-dir": str(self.node_dir(i)), "partition-id": i,
                      "local-randomness": self.local_randomness, **self.node_config.get(i, {})}
            env = dict(self.env)
            for name, value in self.node_env.get(i, {}).items():
                env[name] = value.replace("{PYTHONPATH}", self.env["PYTHONPATH"])
            self._start([f"{self.bindir}/flower-supernode", *auth, "--superlink", self.address,
                         "--port", str(_free_port()), "--node-config",
                         " ".join(f"{k}={_toml_value(v)}" for k, v in config.items())],
                        f"supernode-{i}.log", env)

    def _register(self, public_key: Path, deadline: float) -> None:
        """``flwr supernode register`` once the SuperLink answers."""
        while True:
            reg = self._flwr("supernode", "register", str(public_key), "loopback")
            if reg.returncode == 0 and "registered" in reg.stdout + reg.stderr:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"flwr supernode register failed: {reg.stdout}{reg.stderr}")
            time.sleep(0.5)

    def stop(self) -> None:
        """Stop every process started (their process groups)."""
        for p in self._procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self._procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        self._procs.clear()

    # ------------------------------------------------------------------ runs
    def write_data(self, data: Problem, dataset: str | None = None) -> dict[str, Any]:
        """Write each SuperNode's file of ``data``.

        Parameters
        ----------
        data : Problem
            The whole problem; node ``i`` gets the ``i``-th contiguous block of agents
            (:func:`rfed.engines.flower.owned_agents`).
        dataset : str, optional
            The file's name stem (default: a digest of the problem's facts and rows, so a
            problem is written once).

        Returns
        -------
        dict
            The run-config entries of its public facts and ``dataset``.
        """
        facts = problem_facts(data)
        if dataset is None:
            h = hashlib.sha256(json.dumps(facts, sort_keys=True).encode())
            for v in data.data.values():
                h.update(np.ascontiguousarray(v).tobytes())
            dataset = "d" + h.hexdigest()[:20]
        nodes = list(range(self.n_supernodes))
        blocks = owned_agents(data.n_agents, nodes)
        paths = [self.node_dir(i) / f"{dataset}.npz" for i in nodes]
        todo = [(b, p) for b, p in zip(blocks.values(), paths, strict=True)
                if b.size and not p.exists()]
        if todo:
            write_node_shards(data, [b for b, _ in todo], [p for _, p in todo])
        return {**facts, "dataset": dataset}

    def run(self, run_config: dict[str, Any], data: Problem | None = None) -> FlowerResult:
        """Submit one run of the app, wait for its result.

        Parameters
        ----------
        run_config : dict
            Overrides of :data:`rfed.engines.flower.DEFAULT_CONFIG`; ``min-nodes`` and ``out``
            are set here.
        data : Problem, optional
            The whole problem: its shards are written to the nodes first (:meth:`write_data`)
            and its public facts and ``dataset`` set in the run config. Without it, the run
            config names the problem and ``dataset``, whose files the nodes already hold
            (each node's agents are then what its file says).

        Returns
        -------
        FlowerResult
            Read from the ServerApp's result file; ``RuntimeError`` with the run's log if the
            SuperLink reports the run failed, ``TimeoutError`` after ``timeout`` seconds.
        """
        entries = {} if data is None else self.write_data(data)
        n_nodes = self.n_supernodes if data is None else min(self.n_supernodes, data.n_agents)
        self._runs += 1
        out = f"result-{self._runs}.json"
        config = _config({**run_config, **entries, "min-nodes": n_nodes, "out": out})
        if data is not None:
            _check_facts(data, config)
        cfg_file = self.workdir / f"run-{self._runs}.toml"
        cfg_file.write_text("".join(f"{k} = {_toml_value(v)}\n" for k, v in config.items()
                                    if v != DEFAULT_CONFIG[k] or k in entries))
        result = self.server_dir / out
        deadline = time.monotonic() + self.timeout
        federation = (["--federation-config", f"num-supernodes={n_nodes}"]
                      if self.simulation else [])
        while True:  # until the SuperLink accepts the run (it takes a few seconds to start)
            sub = self._flwr("run", str(APP_DIR), "loopback", "--run-config", str(cfg_file),
                             *federation, timeout=max(1.0, deadline - time.monotonic()))
            (self.workdir / f"flwr-run-{self._runs}.log").write_text(sub.stdout + sub.stderr)
            if sub.returncode == 0 and "Successfully" in sub.stdout + sub.stderr:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"flwr run was not accepted: {sub.stdout}{sub.stderr}")
            time.sleep(1.0)
        found = re.search(r"Successfully started run (\d+)", sub.stdout + sub.stderr)
        run_id = found.group(1) if found else "?"
        next_status_check = time.monotonic() + 3.0
        while not result.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no result after {self.timeout} s; logs in {self.workdir}")
            if time.monotonic() > next_status_check:
                self._raise_if_failed(run_id)
                next_status_check = time.monotonic() + 3.0
            time.sleep(0.2)
        data_out = json.loads(result.read_text())
        return FlowerResult(np.array(data_out["x"], dtype=float), data_out["privacy"],
                            FederatedTrace.from_dict(data_out["trace"]),
                            int(data_out["n_nodes"]), run_id)

    def log_of(self, run_id: str) -> str:
        """The run's log as the SuperLink keeps it.

        Parameters
        ----------
        run_id : str
            :attr:`FlowerResult.run_id`.

        Returns
        -------
        str
            ``flwr log RUN_ID loopback --show``'s output (the ServerApp's warnings included).
        """
        out = self._flwr("log", run_id, "loopback", "--show")
        return out.stdout + out.stderr

    def _raise_if_failed(self, run_id: str) -> None:
        """Raise with the run's log if the SuperLink says the run ended without success."""
        ls = self._flwr("ls", "loopback", "--run-id", run_id, "--format", "json")
        try:
            runs = json.loads(ls.stdout).get("runs", [])
        except json.JSONDecodeError:
            return  # the SuperLink did not answer this time; the overall timeout still holds
        status = str(runs[0].get("status", "")) if runs else ""
        if status.startswith("finished") and not status.endswith("completed"):
            log = self.log_of(run_id)
            path = self.workdir / "run.log"
            path.write_text(log)
            raise RuntimeError(f"Flower run {run_id} ended with status {status!r}; its log is in "
                               f"{path}:\n{log[-3000:]}")
