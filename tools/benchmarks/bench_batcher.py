"""The batcher against hostile traffic and hostile models (issue 12), printed as counts.

    python tools/benchmarks/bench_batcher.py [--requests 20000] [--threads 16] [--json]

1. poison    N requests from T threads, 2% poison: NaN / inf / wrong shape (refused at
             submit) on an int8 MLP built by ``edgekit build``, then out-of-range indices
             that fail inside onnxruntime (a float Gather model): 0 innocent failures, 0 lost,
             0 mixed (every result compared with ``predict`` on the same input)
2. models    a batch-aggregating model (mean over the batch, output [1, 3], ``edgekit
             build``) and a scalar-output model: every caller gets ``predict`` of its input
3. dead      a worker killed by an injected SystemExit: time until every pending future
             failed (<= 1 s), and ``submit`` raises afterwards
4. close     ``close()`` under a full queue: live worker, dead worker, wedged run (<= 1 s)
5. for-loop  10,000 ``submit`` calls in a plain ``for`` loop with the default options
6. finite    the non-finite input check on ``predict``'s fast path: CPU time per call with
             and without it (digits int8, batch 1), paired blocks
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``

import edgekit  # noqa: E402
from edgekit.artifact.archive import write_artifact  # noqa: E402
from edgekit.errors import BatcherDeadError, InputError  # noqa: E402

FEATURES = 8


# -- models -------------------------------------------------------------------------------
def built(module: Any, out: Path) -> Path:
    """A real ``edgekit build`` (host target, int8 ONNX, dynamic batch)."""
    import torch
    from edgekit.converters import build

    build(module.eval(), torch.randn(1, FEATURES), target="host", calib="synthetic",
          output=out, quiet=True, formats=["onnx"], calib_samples=16, dynamic_batch=True)
    return out


def torch_models() -> dict[str, Any]:
    import torch

    torch.manual_seed(0)

    class MLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Linear(FEATURES, 32), torch.nn.Linear(32, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(torch.relu(self.a(x)))

    class BatchMean(torch.nn.Module):  # legal, and fatal to a batcher that splits by rows
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Linear(FEATURES, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.a(x).mean(dim=0, keepdim=True)

    return {"mlp": MLP(), "batch_mean": BatchMean()}


def onnx_model(kind: str) -> tuple[bytes, list]:
    """Hand-written float ONNX models ``edgekit build`` cannot make: a scalar output (its
    validation refuses one), a Gather that raises on out-of-range input (int8 calibration
    would clip the index), an endless Loop."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", FEATURES])
    inits: list = []
    if kind == "scalar":
        nodes = [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)]
        shape: list = []
    elif kind == "gather":  # y = x[:, 1:4] + table[int(x[:, 0])]
        inits = [numpy_helper.from_array(np.arange(30, dtype=np.float32).reshape(10, 3), "t"),
                 numpy_helper.from_array(np.array([0], np.int64), "c0"),
                 numpy_helper.from_array(np.array([1], np.int64), "c1"),
                 numpy_helper.from_array(np.array([4], np.int64), "c4")]
        nodes = [helper.make_node("Slice", ["x", "c0", "c1", "c1"], ["col"]),
                 helper.make_node("Cast", ["col"], ["i2"], to=TensorProto.INT64),
                 helper.make_node("Squeeze", ["i2", "c1"], ["i"]),
                 helper.make_node("Gather", ["t", "i"], ["g"], axis=0),
                 helper.make_node("Slice", ["x", "c1", "c4", "c1"], ["rest"]),
                 helper.make_node("Add", ["rest", "g"], ["y"])]
        shape = ["N", 3]
    else:  # endless: x[0, 0] trips of a Loop, then y = 2 x
        body = helper.make_graph(
            [helper.make_node("Identity", ["c"], ["c2"]), helper.make_node("Identity", ["v"], ["v2"])],
            "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                     helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                     helper.make_tensor_value_info("v", TensorProto.FLOAT, ["N", FEATURES])],
            [helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
             helper.make_tensor_value_info("v2", TensorProto.FLOAT, ["N", FEATURES])])
        inits = [numpy_helper.from_array(np.array(True), "true")]
        nodes = [helper.make_node("ReduceMax", ["x"], ["top"], keepdims=0),
                 helper.make_node("Cast", ["top"], ["trips"], to=TensorProto.INT64),
                 helper.make_node("Loop", ["trips", "true", "x"], ["v"], body=body),
                 helper.make_node("Add", ["v", "v"], ["y"])]
        shape = ["N", FEATURES]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    model = helper.make_model(helper.make_graph(nodes, kind, [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString(), shape


def packed(kind: str, template: Path, out: Path) -> Path:
    """``onnx_model(kind)`` packed with ``template``'s manifest (its target and metadata)."""
    model, shape = onnx_model(kind)
    manifest = dict(edgekit.load(template, power_root=str(out.parent)).manifest)
    manifest.update(inputs=[{"name": "x", "shape": ["N", FEATURES], "dtype": "float32"}],
                    outputs=[{"name": "y", "shape": shape, "dtype": "float32"}],
                    models=[{"format": "onnx", "path": "model.onnx", "runtime": "onnxruntime",
                             "bytes": len(model)}], validation={})
    manifest.pop("test_vectors", None)
    write_artifact(out, manifest, {"model.onnx": model})
    return out


# -- 1 and 2 ------------------------------------------------------------------------------
def traffic(path: Path, root: Path, requests: int, threads: int, poison: str) -> dict[str, Any]:
    """``requests`` submits from ``threads`` threads, 2% poisoned; every result checked."""
    rng = np.random.default_rng(1)
    xs = [rng.random((1 + (i % 7 == 0), FEATURES), dtype=np.float32) for i in range(requests)]
    if poison == "gather":
        for x in xs:
            x[:, 0] = rng.integers(0, 10, x.shape[0])
    bad = set(rng.choice(requests, requests // 50, replace=False).tolist()) if poison else set()
    for i in bad:
        if poison == "gather":
            xs[i][0, 0] = 1e3  # Gather index out of range: onnxruntime raises
        else:
            xs[i] = [np.full_like(xs[i], np.nan), np.full_like(xs[i], np.inf),
                     xs[i][:, :-1]][i % 3]
    futures: dict[int, Future] = {}
    refused: dict[int, Exception] = {}
    with edgekit.load(path, threads=1, power_root=str(root)) as model:
        def producer(k: int) -> None:
            for i in range(k, requests, threads):
                try:
                    futures[i] = model.submit(xs[i])
                except InputError as exc:
                    refused[i] = exc

        t0 = time.perf_counter()
        workers = [threading.Thread(target=producer, args=(k,)) for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        lost = sum(1 for f in futures.values() if f.exception(timeout=120) is None
                   and not f.done())
        seconds = time.perf_counter() - t0
        innocent, mixed, failed_bad = 0, 0, 0
        for i, f in futures.items():
            error = f.exception()
            if error is not None:
                innocent += i not in bad
                failed_bad += i in bad
                continue
            if i in bad:
                mixed += 1  # a poison request must not succeed
                continue
            want = model.predict(xs[i])
            got = f.result()
            if np.shape(got) != np.shape(want) or not np.allclose(got, want, rtol=1e-5,
                                                                  atol=1e-6):
                mixed += 1
        info = model.stats()["batcher"]
    return {"requests": requests, "threads": threads, "poison": len(bad),
            "refused_at_submit": len(refused), "failed_in_batch": failed_bad,
            "innocent_failures": innocent + sum(i not in bad for i in refused),
            "lost": lost + requests - len(futures) - len(refused), "mixed": mixed,
            "batches": info["batches"], "retried_batches": info["retried_batches"],
            "outputs_per_row": info["outputs_per_row"], "seconds": round(seconds, 2)}


# -- 3 and 4 ------------------------------------------------------------------------------
def dead_worker(path: Path, root: Path) -> dict[str, Any]:
    rng = np.random.default_rng(2)
    with edgekit.load(path, threads=1, power_root=str(root)) as model:
        model.submit(rng.random((1, FEATURES), dtype=np.float32)).result(timeout=30)
        died = threading.Event()
        death: list[float] = []

        def fatal() -> None:
            died.wait(5)  # let requests pile up first
            death.append(time.perf_counter())
            raise SystemExit("injected")

        model.batcher.current_policy = fatal  # type: ignore[method-assign]
        pending = [model.submit(rng.random((1, FEATURES), dtype=np.float32), block=False)
                   for _ in range(500)]
        died.set()
        for f in pending:
            f.exception(timeout=5)
        failed_after = time.perf_counter() - death[0]
        typed = sum(isinstance(f.exception(), BatcherDeadError) for f in pending)
        try:
            model.submit(rng.random((1, FEATURES), dtype=np.float32))
            raises = False
        except BatcherDeadError:
            raises = True
        t0 = time.perf_counter()
        model.close()
        close_s = time.perf_counter() - t0
    return {"pending": len(pending), "failed_typed": typed, "all_failed_within_s":
            round(failed_after, 4), "submit_raises": raises, "close_s": round(close_s, 4)}


def close_full(mlp: Path, endless: Path, root: Path) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    x = rng.random((1, FEATURES), dtype=np.float32)
    result = {}
    model = edgekit.load(mlp, threads=1, power_root=str(root))  # live worker, queue full
    futures = []
    while True:
        try:
            futures.append(model.submit(x, block=False))
        except edgekit.errors.QueueFullError:
            break
    t0 = time.perf_counter()
    model.close()
    result["live_worker_full_queue_s"] = round(time.perf_counter() - t0, 4)
    result["live_worker_all_ran"] = all(f.done() and f.exception() is None for f in futures)
    model = edgekit.load(endless, threads=1, queue_size=1024, max_batch=1,
                         power_root=str(root))
    wedge = np.full((1, FEATURES), 1e12, np.float32)
    model.submit(wedge)
    queued = [model.submit(x, block=False) for _ in range(1024)]
    t0 = time.perf_counter()
    model.batcher.close(timeout=0.5)  # the run never ends: queued requests fail instead
    result["wedged_run_full_queue_s"] = round(time.perf_counter() - t0, 4)
    result["wedged_queued_failed"] = sum(f.exception(timeout=1) is not None for f in queued)
    model.backend.terminate()
    model.close()
    return result


# -- 5 and 6 ------------------------------------------------------------------------------
def for_loop(path: Path, root: Path, n: int = 10_000) -> dict[str, Any]:
    x = np.random.default_rng(4).random((1, FEATURES), dtype=np.float32)
    with edgekit.load(path, power_root=str(root)) as model:
        t0 = time.perf_counter()
        futures = [model.submit(x) for _ in range(n)]
        ok = sum(f.exception(timeout=120) is None for f in futures)
        return {"submits": n, "completed": ok, "seconds": round(time.perf_counter() - t0, 2)}


def finite_cost(root: Path, rounds: int = 20) -> dict[str, Any]:
    from edgekit.converters import build

    out = root / "digits.edgekit"
    build(str(REPO / "examples/raspberrypi/digits_cnn.onnx"), target="rpi4",
          calib=str(REPO / "examples/raspberrypi/digits.npz"), output=out, quiet=True,
          formats=["onnx"])
    # one model, the check switched on and off between blocks: two sessions of the same
    # model differ by more than the check costs
    model = edgekit.load(out, threads=1, power_root=str(root))
    x = np.random.default_rng(5).random((1, 1, 8, 8), dtype=np.float32)
    cpu: dict[str, list[float]] = {"checked": [], "unchecked": []}
    for _ in range(600):
        model.predict(x)
    for r in range(rounds):
        order = [("checked", True), ("unchecked", False)]
        for key, check in order if r % 2 == 0 else order[::-1]:
            model._check_finite = check
            c = time.thread_time()
            for _ in range(500):
                model.predict(x)
            cpu[key].append((time.thread_time() - c) / 500)
    model.close()
    ratio = np.median(np.array(cpu["checked"]) / np.array(cpu["unchecked"]))
    return {"checked_us": round(float(np.median(cpu["checked"])) * 1e6, 2),
            "unchecked_us": round(float(np.median(cpu["unchecked"])) * 1e6, 2),
            "cost": round(float(ratio) - 1.0, 4), "blocks": rounds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        nets = torch_models()
        mlp = built(nets["mlp"], root / "mlp.edgekit")
        mean = built(nets["batch_mean"], root / "batch_mean.edgekit")
        gather = packed("gather", mlp, root / "gather.edgekit")
        scalar = packed("scalar", mlp, root / "scalar.edgekit")
        endless = packed("endless", mlp, root / "endless.edgekit")
        r = {
            "poison_refused": traffic(mlp, root, args.requests, args.threads, "input"),
            "poison_in_batch": traffic(gather, root, args.requests, args.threads, "gather"),
            "batch_mean": traffic(mean, root, 2000, 8, ""),
            "scalar": traffic(scalar, root, 2000, 8, ""),
            "dead_worker": dead_worker(mlp, root),
            "close": close_full(mlp, endless, root),
            "for_loop": for_loop(mlp, root),
            "finite_check": finite_cost(root),
        }
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        for name, values in r.items():
            print(f"{name:16s} " + ", ".join(f"{k}={v}" for k, v in values.items()))
    failures = [k for k in ("poison_refused", "poison_in_batch", "batch_mean", "scalar")
                if r[k]["innocent_failures"] or r[k]["lost"] or r[k]["mixed"]]
    slow = (r["dead_worker"]["all_failed_within_s"] > 1 or r["close"]["wedged_run_full_queue_s"] > 1
            or r["for_loop"]["completed"] != r["for_loop"]["submits"])
    print("PASS" if not failures and not slow else f"FAIL {failures} slow={slow}")
    return 0 if not failures and not slow else 1


if __name__ == "__main__":
    raise SystemExit(main())
