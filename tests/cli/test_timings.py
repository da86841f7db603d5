"""The CPU times `rfed list` / `rfed show` print come from the timings file a command writes, and
a long run prints its estimated total time after its first algorithm run."""

import hashlib
import json
import re
import sys

import pytest

import rfed.experiments.timings as timings
from rfed.cli import main
from rfed.experiments import list_experiments, run_experiment


def _write(path, experiments):
    path.write_text(json.dumps({"format": 1, "experiments": experiments}))
    return path


@pytest.fixture
def timings_file(tmp_path, monkeypatch):
    path = _write(tmp_path / "timings.json", {
        "dpdgt-ieee14": {"quick": {"cpu_seconds": 4321.0, "date": "2026-01-02",
                                   "commit": "abc123", "algorithm_runs": 3}},
        "doadp-logreg": {"quick": {"cpu_seconds": 12.0}, "paper": {"cpu_seconds": 7.5e3}},
        "dpdl-digits": {"paper-ring": {"cpu_seconds": 1234.0, "date": "2026-03-04",
                                       "commit": "def456"}}})
    monkeypatch.setattr(timings, "TIMINGS", path)
    return path


def test_list_prints_the_files_times_and_not_measured_elsewhere(timings_file, capsys):
    assert main(["list"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line}
    assert lines["dpdgt-ieee14"].endswith("(CPU 72 min; paper scale not measured)")  # 4321 s
    assert lines["doadp-logreg"].endswith("(CPU 12 s; paper scale 2.1 h)")
    assert lines["dpdda-svm"].endswith("(CPU not measured; paper scale not measured)")
    assert lines["utility-spd"].endswith("(CPU not measured)")     # no paper scale
    assert lines["doadp-digits"].endswith("(CPU not measured; paper scale not measured)")
    # a named scale other than 'paper' is listed under its name
    assert lines["dpdl-digits"].endswith(
        "(CPU not measured; paper scale not measured; scale=paper-ring 21 min)")   # 1234 s
    assert main(["show", "dpdgt-ieee14"]) == 0
    assert "defaults: 72 min of CPU (4321 s; measured 2026-01-02 at commit abc123)" in \
        capsys.readouterr().out
    assert main(["show", "dpdl-digits"]) == 0
    shown = capsys.readouterr().out
    assert "scale=paper-ring: 21 min of CPU (1234 s; measured 2026-03-04 at commit def456)" \
        in shown
    assert "scale=paper: not measured" in shown
    timings_file.write_text("{not json")       # an unreadable file: nothing is measured
    assert main(["list"]) == 0
    assert "(CPU 72 min" not in capsys.readouterr().out


def test_the_shipped_timings_file_is_what_list_prints(capsys):
    """Every time `rfed list` prints is the shipped file's (written by
    benchmarks/bench_experiments.py --record, with its command), and only those."""
    shipped = timings.read_timings()
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for exp in list_experiments():
        (line,) = [x for x in out.splitlines() if x.startswith(exp.name + " ")]
        scales = ("quick", *exp.scales)
        cells = re.search(r"\(([^()]*)\)$", line).group(1).split("; ")
        for scale, cell in zip(scales, cells, strict=True):
            entry = shipped.get(exp.name, {}).get(scale)
            if entry is None:
                assert cell.endswith("not measured"), line
            else:
                assert cell.endswith(timings.duration(entry["cpu_seconds"])), line
                assert entry["command"].startswith("python benchmarks/bench_experiments.py "
                                                   "--record"), entry
                assert exp.name in entry["command"]


def test_estimate_line_from_the_recorded_number_of_runs(monkeypatch, capsys):
    clock = iter([10.0, 14.0])
    monkeypatch.setattr(timings.time, "perf_counter", lambda: next(clock))
    est = timings.TimeEstimate(runs=30, min_seconds=60)
    est.run_started(0)
    line = est.run_finished(0)
    # 4 s for the first of 30 runs: about 120 s in all
    assert line == ("rfed: the first of 30 algorithm runs took 4 s; estimated total about "
                    "2 min of wall time (the runs differ in cost: a guide)")
    assert line in capsys.readouterr().err
    assert est.run_finished(1) is None           # one line per run
    clock = iter([0.0, 1.0])
    short = timings.TimeEstimate(runs=30, min_seconds=60)
    short.run_started(0)
    assert short.run_finished(0) is None         # 30 s in all: not a long run


def test_recorded_runs_only_for_the_recorded_settings(timings_file):
    data = json.loads(timings_file.read_text())
    data["experiments"]["dpdgt-ieee14"]["quick"]["config_sha256"] = \
        timings.settings_digest({"a": 1, "b": [1.0, None]})
    timings_file.write_text(json.dumps(data))
    assert timings.recorded_runs("dpdgt-ieee14", {"b": (1.0, None), "a": 1}, "quick") == 3
    assert timings.recorded_runs("dpdgt-ieee14", {"a": 2, "b": [1.0, None]}, "quick") is None
    assert timings.recorded_runs("doadp-logreg", {}, "quick") is None   # count not recorded


def test_a_run_prints_its_first_runs_time(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(timings, "LONG_RUN_SECONDS", 0.0)
    monkeypatch.setattr(timings, "TIMINGS", tmp_path / "none.json")
    overrides = {"rounds": 2, "repetitions": 2, "eval_every": 1}
    summary, ctx = run_experiment("pca-synthetic", overrides=overrides, out_dir=tmp_path / "a")
    err = capsys.readouterr().err
    # settings never recorded: the first run's time only
    assert err.count("rfed: the first algorithm run took") == 1
    assert "never recorded" in err
    # what benchmarks/bench_experiments.py --record hashes (the summary's settings) is what a
    # run of the same settings looks up
    saved = json.loads((tmp_path / "a" / "summary.json").read_text())
    digest = hashlib.sha256(json.dumps(saved["config"], sort_keys=True).encode()).hexdigest()
    assert digest == timings.settings_digest(ctx.config)
    _write(timings.TIMINGS, {"pca-synthetic": {"quick": {
        "cpu_seconds": 1.0, "algorithm_runs": saved["algorithm_runs"], "config_sha256": digest}}})
    run_experiment("pca-synthetic", overrides=overrides)
    assert f"rfed: the first of {saved['algorithm_runs']} algorithm runs took" in \
        capsys.readouterr().err


def test_record_files_a_named_scale_under_its_name(tmp_path, monkeypatch, capsys,
                                                    load_benchmark):
    """`bench_experiments.py --record --set scale=paper-ring` files the run under 'paper-ring'
    (with the command that reproduces it), which `rfed list` / `show` then print; any other
    override, or two scales, is refused."""
    bench = load_benchmark("bench_experiments")
    assert bench.scale_of([]) == "quick"
    assert bench.scale_of(["scale=paper"]) == "paper"
    assert bench.scale_of(["scale = paper-ring"]) == "paper-ring"
    for bad in (["rounds=3"], ["scale=paper", "rounds=3"], ["scale=paper", "scale=quick"],
                ["scale="]):
        with pytest.raises(SystemExit, match="one scale=NAME"):
            bench.scale_of(bad)
    path = tmp_path / "timings.json"
    bench.record_timing(path, "dpdl-digits", "paper-ring", 1234.0, 700.0, 512.0, tmp_path,
                        runs=(9, "ab" * 32))
    bench.record_timing(path, "dpdl-digits", "quick", 30.0, 31.0, 300.0, tmp_path)
    entry = json.loads(path.read_text())["experiments"]["dpdl-digits"]
    assert entry["paper-ring"]["command"] == ("python benchmarks/bench_experiments.py --record "
                                              "--set scale=paper-ring dpdl-digits")
    assert entry["quick"]["command"] == "python benchmarks/bench_experiments.py --record " \
                                        "dpdl-digits"
    assert entry["paper-ring"]["algorithm_runs"] == 9
    monkeypatch.setattr(timings, "TIMINGS", path)
    assert main(["list"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("dpdl-digits ")]
    assert line.endswith("(CPU 30 s; paper scale not measured; scale=paper-ring 21 min)")


def test_compare_pairs_alternate_the_order_and_report_median_and_range(tmp_path, monkeypatch,
                                                                         capsys, load_benchmark):
    """`bench_experiments.py --compare BASE --pairs 3`: each experiment's pair runs three times,
    the base first in the first and third and the measured version first in the second (its
    --this-set overrides always on the measured version's run), and the ratios' median and
    range are those of the CPU times the runs reported, per experiment and for the totals."""
    bench = load_benchmark("bench_experiments")
    base, this = tmp_path / "base", tmp_path / "this"
    cpu = {("expA", base): [10.0, 12.0, 11.0], ("expA", this): [11.0, 12.0, 13.2],
           ("expB", base): [20.0, 20.0, 20.0], ("expB", this): [20.0, 20.0, 20.0]}
    calls = []

    def fake_run_versions(name, overrides, rfed_dirs, rdp_cache="", checkpoints=False,
                          concurrent=False, keep=None, this_overrides=(), measured=-1):
        calls.append((name, list(rfed_dirs), rfed_dirs[measured], list(this_overrides)))
        rep = sum(1 for c in calls if c[0] == name) - 1
        return [(cpu[name, d][rep], 1.0, 100.0, None, None, {}) for d in rfed_dirs]

    monkeypatch.setattr(bench, "run_versions", fake_run_versions)
    monkeypatch.setattr(sys, "argv", ["bench_experiments.py", "--compare", str(base), "--rfed",
                                      str(this), "--pairs", "3", "--this-set", "k=v",
                                      "expA", "expB"])
    bench.main()
    assert [c[1] for c in calls[:3]] == [[base, this], [this, base], [base, this]]
    assert all(c[2] == this and c[3] == ["k=v"] for c in calls)
    out = capsys.readouterr().out

    def line(pattern: str) -> bool:
        return re.search(f"^{pattern}$", out, flags=re.M) is not None

    assert line(r"expA this/base #2 +1\.000")
    assert line(r"expA this/base +1\.100 median of 3 pairs, range 1\.000-1\.200")
    assert line(r"expB this/base +1\.000 median of 3 pairs, range 1\.000-1\.000")
    # totals: 31/30, 32/32, 33.2/31
    assert line(r"total this/base #3 +1\.071")
    assert out.splitlines()[-1].split() == ["total", "this/base", "1.033", "median", "of", "3",
                                            "pairs,", "range", "1.000-1.071"]
    for bad, message in ((["--pairs", "0"], "--pairs must be an int >= 1"),
                         (["--pairs", "2"], "--pairs needs --compare")):
        monkeypatch.setattr(sys, "argv", ["bench_experiments.py", *bad, "expA"])
        with pytest.raises(SystemExit):
            bench.main()
        assert message in capsys.readouterr().err
