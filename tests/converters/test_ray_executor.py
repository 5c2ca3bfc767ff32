"""--executor ray on a real local Ray cluster (127.0.0.1, started once for this module): the
search's candidate builds as tasks give the local executor's artifact, also with a worker
killed mid-build; a killed worker's task is retried; calibration merged from shards equals
one process's; errors keep their type."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import signal
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from edgekit.converters.context import Dataset
from edgekit.converters.executor import ExecutorError, parse_executor
from edgekit.converters.executor.shards import run_dataset_on, shard_bounds

from edgekit.errors import UserError

from ..conftest import DIGITS_NPZ, DIGITS_ONNX

# found, not imported: Ray is imported by the cluster fixture only, not at collection
pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason="the [ray] extra (tools/test.sh installs it)")


@pytest.fixture(scope="module")
def cluster():
    """One local Ray cluster with two workers for every test here."""
    import cloudpickle
    from edgekit.converters.executor.ray_executor import RayExecutor

    # this module is not importable by the workers: ship its functions by value
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    executor = RayExecutor(None, num_cpus=2)
    yield executor
    executor.close()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def test_shards_are_aligned_even_and_cover_every_sample():
    assert shard_bounds(284, 4) == [(0, 96), (96, 160), (160, 224), (224, 284)]
    assert shard_bounds(20, 4) == [(0, 20)]  # fewer samples than one aligned block
    assert shard_bounds(0, 4) == []


def test_a_missing_ray_is_a_typed_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ExecutorError, match=r"\[ray\]"):
        parse_executor("ray")
    with pytest.raises(ExecutorError, match="local, ray, ray:ADDRESS"):
        parse_executor("dask")


class Refused(UserError):
    pass


def _refuse_three(item: int) -> int:
    if item == 3:
        raise Refused(f"item {item} refused")
    return item


def test_a_task_error_comes_back_with_its_own_type(cluster):
    # repeated: a map that stops at an error leaves its running tasks to finish unwatched,
    # never cancelled (ray.cancel raced a reply and aborted the driver in CI, Ray 2.60)
    for _ in range(5):
        with pytest.raises(Refused, match="item 3 refused"):
            cluster.map(_refuse_three, list(range(6)), label="refusing", quiet=True)
    assert cluster.map(_refuse_three, [0, 1, 2], label="refusing", quiet=True) == [0, 1, 2]


def test_local_imap_builds_only_what_is_taken():
    """The search stops at the first candidate that fits: locally, the rest is never built."""
    from edgekit.converters.executor.local import LocalExecutor

    seen: list[int] = []

    def square(item: int) -> int:
        seen.append(item)
        return item * item

    results = LocalExecutor().imap(square, list(range(6)), label="squares", quiet=True)
    assert [next(results), next(results)] == [0, 1]
    results.close()
    assert seen == [0, 1]


def _square(item: int) -> int:
    return item * item


def test_ray_imap_gives_results_in_order_and_closes_early(cluster):
    results = cluster.imap(_square, list(range(6)), label="squares", quiet=True)
    assert [next(results), next(results), next(results)] == [0, 1, 4]
    results.close()  # no more start; the cluster takes more work after
    assert list(cluster.imap(_square, [7, 8], label="squares", quiet=True)) == [49, 64]


def _kill_own_worker_once(item: tuple[str, int]) -> tuple[int, int]:
    marker, value = item
    if value == 2 and not os.path.exists(marker):
        Path(marker).write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)  # the worker process dies mid-task
    return value * value, os.getpid()


def test_a_killed_worker_task_is_retried_and_the_map_completes(cluster, tmp_path):
    marker = str(tmp_path / "killed-once")
    results = cluster.map(_kill_own_worker_once, [(marker, v) for v in range(6)],
                          label="killing", quiet=True)
    assert [r[0] for r in results] == [0, 1, 4, 9, 16, 25]  # in order, nothing lost
    killed = int(Path(marker).read_text())
    assert results[2][1] != killed  # the retry ran in another (new) worker process


def test_validation_in_shards_equals_one_process(cluster, digits_data):
    from edgekit.converters.core.runner import run_dataset

    data = Dataset({"image": digits_data[0][:200]})
    assert len(shard_bounds(len(data), 4)) == 4
    got = run_dataset_on(cluster, DIGITS_ONNX, data, shards=4, quiet=True)
    want = run_dataset(DIGITS_ONNX, data)
    assert len(got) == len(want) and all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


def test_calibration_merged_from_shards_equals_one_process(cluster, digits_data, tmp_path):
    """The same ranges as onnxruntime's calibrators fed chunk by chunk in one process, for
    minmax, percentile (both histogram collectors: signed, and |x| when symmetric) and
    entropy. The scaled samples widen the histograms mid-stream, where a naive merge of
    per-shard histograms differs. (Entropy with few bins: its threshold search is quadratic.)"""
    import json

    from edgekit.converters.inputs.sharded import Recipe, calibrate_sharded, optimized_session
    from edgekit.converters.stages.calibrate import PERCENTILE_OPTIONS, _ListReader, feeds
    from onnxruntime.quantization import CalibrationMethod
    from onnxruntime.quantization.calibrate import create_calibrator, save_tensors_data

    scale = np.linspace(0.5, 2.0, 96, dtype=np.float32)[:, None, None, None]
    data = Dataset({"image": digits_data[0][:96] * scale})
    cases = {("minmax", False): {"symmetric": False},
             ("percentile", False): {**PERCENTILE_OPTIONS, "symmetric": False},
             ("percentile", True): {**PERCENTILE_OPTIONS, "symmetric": True},
             ("entropy", False): {"num_bins": 64, "num_quantized_bins": 16, "symmetric": False}}
    enums = {"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
             "entropy": CalibrationMethod.Entropy}

    def as_json(ranges) -> dict:
        # tensor order follows a set's iteration (hash-seeded per process): compare by name
        save_tensors_data(ranges, tmp_path / "ranges.json")
        return json.loads((tmp_path / "ranges.json").read_text())

    for (method, symmetric), extra in cases.items():
        merged = calibrate_sharded(cluster, Recipe(DIGITS_ONNX.read_bytes(), False, 8,
                                                   {method: extra}),
                                   data, [method], shards=3, quiet=True)[method]
        with contextlib.redirect_stdout(io.StringIO()):
            one = create_calibrator(DIGITS_ONNX, None, calibrate_method=enums[method],
                                    augmented_model_path=str(tmp_path / "aug.onnx"),
                                    extra_options=extra)
            one.infer_session = optimized_session(one)  # as the calibrate stage runs it
            for start in range(0, len(data), 8):
                one.collect_data(_ListReader(feeds(data, False, start, start + 8)))
            want = as_json(one.compute_data())
        assert as_json(merged) == want, (method, symmetric)


def _kill_a_candidate_task(stop: threading.Event, killed: list[int]) -> None:
    """SIGKILL the first worker process seen running a candidate build: Ray titles a worker
    ``ray::<task name>`` while it runs a task, and the search names its tasks ``candidates``."""
    import psutil

    me = psutil.Process()
    while not stop.is_set():
        for proc in me.children(recursive=True):  # raylet -> its workers
            with contextlib.suppress(psutil.Error):
                if " ".join(proc.cmdline()).startswith("ray::candidates"):
                    proc.send_signal(signal.SIGKILL)
                    killed.append(proc.pid)
                    return
        stop.wait(0.02)


def test_search_on_ray_with_a_worker_killed_mid_build_gives_the_local_artifact(
        cluster, tmp_path, monkeypatch):
    """Candidate builds as Ray tasks: two calibration methods per prune ratio (minmax and
    percentile: the cheap ones) over four ratios, every ratio missing storage until the last,
    so at least seven candidates; the reference validation in four shards. One worker is
    SIGKILLed while it builds a candidate; its task runs again elsewhere and the artifact is
    the local executor's, byte for byte."""
    from edgekit.converters import build
    from edgekit.converters.search import search

    monkeypatch.setattr(search, "CALIBRATION_METHODS", ("minmax", "percentile"))

    def run(executor: str):
        return build(str(DIGITS_ONNX), target="host", calib=str(DIGITS_NPZ), quiet=True,
                     output=tmp_path / f"{executor}.edgekit", formats=["onnx"], method="auto",
                     # 0.75 fits (0.062 MB with 8-bit weights on a VNNI host, less with 7-bit
                     # ones without VNNI), 0.5 does not (0.093 MB): the ratios' sizes, not the CPU's
                     budgets={"storage_mb": 0.07, "accuracy_drop": 8.0}, calib_samples=64,
                     val_samples=128, prune_ratios=[0.0, 0.25, 0.5, 0.75], executor=executor)

    local_result = run("local")
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_a_candidate_task, args=(stop, killed), daemon=True)
    killer.start()
    try:
        remote_result = run("ray")
    finally:
        stop.set()
        killer.join()
    assert killed, "no worker was seen building a candidate"
    # deterministic builds: the whole artifact, manifest and content key included
    assert remote_result.path.read_bytes() == local_result.path.read_bytes()
    local, remote = local_result.manifest, remote_result.manifest
    assert len(remote["search"]["candidates"]) >= 7
    assert {c["method"] for c in remote["search"]["candidates"]} == {"minmax", "percentile"}
    assert remote["validation"]["samples"] >= 4 * 32  # four aligned shards

    def table(manifest):
        return [{k: v for k, v in c.items() if k != "seconds"}
                for c in manifest["search"]["candidates"]]

    assert table(remote) == table(local)
    assert remote["validation"] == local["validation"]


def test_a_bad_executor_flag_exits_2_naming_the_forms(capsys):
    from edgekit.cli import main

    code = main(["build", "-t", "host", str(DIGITS_ONNX), "--calib", str(DIGITS_NPZ),
                 "--executor", "dask"])
    assert code == 2
    assert "expected local, ray or ray:HOST:PORT; got 'dask'" in capsys.readouterr().err
