#!/usr/bin/env python3
"""Classify camera frames (or image files) on a Raspberry Pi with an edgekit artifact.

    python classify_service.py                           # Pi camera / USB webcam
    python classify_service.py --images samples --once   # the bundled digits, one pass
    python classify_service.py --model my.rpi4.edgekit --labels labels.txt

See README.md next to this file for installation, the systemd unit and the log lines.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
# ``app`` lives next to this script; put it first even under ``python -I`` (which leaves
# the script's folder off sys.path).
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

DEFAULT_MODEL = HERE / "digits.rpi4.edgekit"
log = logging.getLogger("classify")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default=str(DEFAULT_MODEL), help="the .edgekit artifact")
    p.add_argument("--source", default="auto", choices=("auto", "picamera2", "v4l2", "images"),
                   help="auto: Pi camera, then a V4L2 camera, then --images")
    p.add_argument("--images", nargs="+", metavar="PATH", help="image files or folders")
    p.add_argument("--camera", type=int, default=0, help="picamera2 camera number")
    p.add_argument("--device", help="V4L2 device for OpenCV (default: the first that works)")
    p.add_argument("--capture-size", default="640x480", help="camera frame size WxH")
    p.add_argument("--resize", choices=("none", "stretch", "center-crop"),
                   help="fit images of another size to the model (default: the manifest's; "
                   "camera frames: center-crop)")
    p.add_argument("--fps", type=float, default=10.0,
                   help="frames per second at normal power (0: as fast as the model runs); "
                   "halved when hot or on battery, quartered when throttled")
    p.add_argument("--once", action="store_true",
                   help="one pass over the images (one frame from a camera), then exit")
    p.add_argument("--max-frames", type=int, help="stop after this many frames")
    p.add_argument("--stats-interval", type=float, default=60.0,
                   help="seconds between stats lines (0: only the final one)")
    p.add_argument("--threads", default="auto", help="'auto' (tuned) or a fixed count")
    p.add_argument("--policy", default="balanced", choices=("balanced", "latency", "efficiency"),
                   help="what the thread tuner optimises")
    p.add_argument("--backend", help="force a runtime: litert, onnxruntime, tflite-runtime")
    p.add_argument("--max-batch", type=int, default=4, help="batch size at normal power")
    p.add_argument("--max-inflight", type=int, default=16, help="frames waiting at most")
    p.add_argument("--labels", help="text file, one class name per line")
    p.add_argument("--output", help="write one JSON line per result here ('-': stdout)")
    p.add_argument("--log-results", default="changes", choices=("all", "changes", "none"),
                   help="log every result, only when the class changes, or none")
    p.add_argument("--monitor-interval", type=float, default=2.0,
                   help="seconds between power/thermal sensor reads")
    p.add_argument("--drift-threshold", type=float, default=0.01,
                   help="warn when an input channel has this share more of its values outside "
                   "the calibrated range (int8 clips them) than at build")
    p.add_argument("--root", default="/",
                   help="filesystem root for board, camera and sensor detection (tests)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return p.parse_args(argv)


def setup_logging(verbose: bool) -> None:
    # under systemd the journal stamps every line already
    fmt = "%(levelname)s %(message)s" if os.environ.get("JOURNAL_STREAM") else \
        "%(asctime)s %(levelname)s %(message)s"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(fmt))
    log.handlers[:] = [handler]
    log.setLevel(logging.DEBUG if verbose else logging.INFO)
    log.propagate = False


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM (systemctl stop) and SIGINT (Ctrl-C) finish the frames in flight, log the
    final stats and exit 0; the previous handlers come back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def handler(signum: int, _frame: object) -> None:
        log.info("%s: finishing the frames in flight", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def read_labels(path: str | None, manifest: dict) -> list[str] | None:
    if path:
        with open(path, encoding="utf-8") as handle:
            return [line.strip() for line in handle if line.strip()]
    return (manifest.get("outputs") or [{}])[0].get("labels") or manifest.get("labels")


def run(args: argparse.Namespace) -> int:
    from app.board import detect_board, target_warning
    from app.frames import HAVE_PILLOW, Preprocessor, input_spec
    from app.service import Service
    from app.sources import open_source

    import edgekit
    from edgekit.errors import UserError

    if not os.path.isfile(args.model):
        raise UserError(f"--model {args.model}: no such file (expected a .edgekit artifact; "
                        "build one with: edgekit build --target rpi4 model.onnx)")
    board = detect_board(args.root)
    try:
        width, height = (int(v) for v in args.capture_size.lower().split("x"))
    except ValueError:
        raise UserError(f"--capture-size expects WxH such as 640x480; got "
                        f"{args.capture_size!r}") from None
    if args.threads != "auto" and not args.threads.isdigit():
        raise UserError(f"--threads expects 'auto' or a count >= 0; got {args.threads!r}")
    threads = args.threads if args.threads == "auto" else int(args.threads)
    # the source first: without frames there is no point loading (and tuning) the model
    source = open_source(args.source, args.images, loop=not args.once, size=(width, height),
                         camera=args.camera, device=args.device, root=args.root)
    model = None
    try:
        model = edgekit.load(args.model, backend=args.backend, threads=threads,
                             policy=args.policy, power_root=args.root, max_batch=args.max_batch,
                             monitor_interval_s=args.monitor_interval,
                             drift_threshold=args.drift_threshold)
        built = model.manifest["target"]["name"]
        log.info("model %s: target %s, runtime %s, %s threads (%s, policy %s)", args.model,
                 built, model.runtime, model.threads or "default", args.threads, args.policy)
        log.info("board: %s%s", board.describe(), f" from {board.source}" if board.source else "")
        warning = target_warning(board, model.manifest, os.path.basename(args.model))
        if warning:
            log.warning("%s", warning)
        log.info("source: %s (%s)%s", source.name, source.kind,
                 "" if HAVE_PILLOW else "; Pillow not installed: stdlib PNG/PGM/PPM reader")
        max_frames = args.max_frames
        if args.once and source.kind != "images":
            max_frames = 1 if max_frames is None else min(max_frames, 1)
        output = None
        if args.output:
            output = sys.stdout if args.output == "-" else open(args.output, "w")  # noqa: SIM115
        service = Service(model, source, Preprocessor(input_spec(model, args.resize)),
                          fps=args.fps, max_frames=max_frames,
                          stats_interval=args.stats_interval, max_inflight=args.max_inflight,
                          labels=read_labels(args.labels, model.manifest), output=output,
                          log_results=args.log_results)
        try:
            with stop_on_signals(service.stop_event):
                summary = service.run()
        finally:
            if output is not None and output is not sys.stdout:
                output.close()
        log.info("done: %d frames%s", summary.frames,
                 f", {summary.skipped} skipped" if summary.skipped else "")
        if summary.frames == 0 and not service.stop_event.is_set():
            # a run that classified nothing failed, whatever the reason (a script must see it)
            log.error("no frame was classified%s; exit 1",
                      f" ({summary.skipped} skipped: see the warnings above)"
                      if summary.skipped else " (the source gave no frames)")
            return 1
        return 0
    finally:
        source.close()
        if model is not None:
            model.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging(args.verbose)
    try:
        from edgekit.errors import EdgekitError
    except ImportError:
        print("error: edgekit is not installed in this Python (pip install 'edgekit-sdk[litert]')",
              file=sys.stderr)
        return 2
    try:
        return run(args)
    except EdgekitError as exc:
        log.error("%s", exc)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
