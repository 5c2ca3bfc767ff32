#!/usr/bin/env bash
# A scripted newcomer session (issue 19): the README's commands, then each mistake a new user
# makes, in a fresh virtual environment. Prints one line per case with its exit code, the
# code intended, and whether the output said what it should; exits 1 if any line is off.
#
#   bash tools/studies/newcomer.sh                 # fresh venv in a temp folder (about 3-5 minutes)
#   bash tools/studies/newcomer.sh --reuse-venv    # keep and reuse .venv-newcomer in the repository
#   bash tools/studies/newcomer.sh --full-tests    # run the whole suite as `bash tools/test.sh` does
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO="$PWD"
REUSE=0
FULL=0
for arg in "$@"; do
  case "$arg" in
    --reuse-venv) REUSE=1 ;;
    --full-tests) FULL=1 ;;
    *) echo "usage: bash tools/studies/newcomer.sh [--reuse-venv] [--full-tests]" >&2; exit 2 ;;
  esac
done
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
if [ "$REUSE" = 1 ]; then
  export EDGEKIT_VENV="$REPO/.venv-newcomer"
else
  export EDGEKIT_VENV="$WORK/venv"
fi
export EDGEKIT_SYSROOT_CACHE="${EDGEKIT_SYSROOT_CACHE:-$WORK/sysroot}"
EK="$EDGEKIT_VENV/bin/edgekit"
PY="$EDGEKIT_VENV/bin/python"
EX="$REPO/examples/raspberrypi"
ALL="$WORK/all-output.txt"
: >"$ALL"
FAILED=0

# case NAME WANT_CODE NEEDLE COMMAND...: run it, log its output, print one line
case_() {
  local name="$1" want="$2" needle="$3"
  shift 3
  set +e
  "$@" >"$WORK/out" 2>"$WORK/err"
  local code=$?
  set -e
  cat "$WORK/out" "$WORK/err" >>"$ALL"
  local verdict="ok"
  if [ "$code" != "$want" ]; then verdict="UNEXPECTED exit"; fi
  if [ -n "$needle" ] && ! grep -qF -- "$needle" "$WORK/out" "$WORK/err"; then
    verdict="UNEXPECTED output (no \"$needle\")"
  fi
  [ "$verdict" = "ok" ] || FAILED=1
  printf '%-66s exit %-3s (intended %-3s) %s\n' "$name" "$code" "$want" "$verdict"
  if [ "$verdict" != "ok" ]; then sed 's/^/    | /' "$WORK/err" | tail -5; fi
}

# --- the README's commands
case_ "1. bash tools/quickstart.sh (venv created, build, inspect, verify)" 0 "PASS" \
  bash tools/quickstart.sh
if [ "$FULL" = 1 ]; then
  case_ "1. bash tools/test.sh (the whole suite)" 0 "passed" bash tools/test.sh -q
else
  case_ "1. bash tools/test.sh -q tests/edgekit/commands (same venv)" 0 "passed" \
    bash tools/test.sh -q tests/edgekit/commands
fi

# --- data a newcomer brings: RGB photos of digits, a photo of another size, a flat array
"$PY" - "$EX" "$WORK" <<'PYEOF'
import sys
from pathlib import Path

import numpy as np
from PIL import Image

ex, work = Path(sys.argv[1]), Path(sys.argv[2])
for path in sorted((ex / "samples").glob("*.png")):
    folder = work / "photos" / path.name[0]
    folder.mkdir(parents=True, exist_ok=True)
    Image.open(path).convert("RGB").save(folder / path.name)
Image.open(ex / "samples" / "3_0021.png").convert("RGB").resize((32, 32)).save(work / "photo.png")
(work / "unusable").mkdir()
for name in ("a.png", "b.png"):
    Image.new("RGB", (64, 48), (200, 10, 10)).save(work / "unusable" / name)
np.savez(work / "flat.npz", x=np.load(ex / "digits.npz")["x"][:64, 0])
(work / "net.py").write_text("import torch\n\nclass Net(torch.nn.Module):\n"
                             "    def forward(self, x):\n        return x\n")
PYEOF
ONNX="$EX/digits_cnn.onnx"
NPZ="$EX/digits.npz"
A="$WORK/digits.edgekit"
"$EK" build -t rpi4 "$ONNX" --calib "$NPZ" -o "$A" -q >>"$ALL" 2>&1

case_ "2. build: RGB photo folder, 1-channel model (converted to gray)" 0 "" \
  "$EK" build -t rpi4 "$ONNX" --calib "$WORK/photos" -o "$WORK/img.edgekit" -q
case_ "2. build: same with --color gray" 0 "" \
  "$EK" build -t rpi4 "$ONNX" --calib "$WORK/photos" --color gray -o "$WORK/img.edgekit" -q
case_ "2. build: --color rgb for a 1-channel model (says: --color gray)" 2 "--color gray" \
  "$EK" build -t rpi4 "$ONNX" --calib "$WORK/photos" --color rgb -q
case_ "3. run: a 32x32 photo, no --resize (advice: --resize)" 2 "--resize stretch" \
  "$EK" run "$A" "$WORK/photo.png"
case_ "3. run: the same photo with --resize stretch (the advice works)" 0 "1. 3" \
  "$EK" run "$A" "$WORK/photo.png" --resize stretch --top-k 1
case_ "3. run: a folder of images" 0 "9_0019.png" "$EK" run "$A" "$EX/samples" --top-k 1
case_ "3. predict_image(photo, resize='center-crop')" 0 "class 3" "$PY" -c "
import edgekit, numpy as np
with edgekit.load('$A') as m:
    print('class', int(np.argmax(m.predict_image('$WORK/photo.png', resize='center-crop'))))"
case_ "4. estimate on a tflite-only artifact (reads the .tflite)" 0 "(stored as int8)" \
  "$EK" estimate --target rpi4 "$A"
case_ "5. converters.build(..., calib=numpy array)" 0 "built" "$PY" -c "
import numpy as np, edgekit.converters as c
x = np.load('$NPZ')['x'][:128]
print(c.build('$ONNX', target='host', calib=x, output='$WORK/api.edgekit', quiet=True).summary())"
case_ "6. classify_service --once, no frame classified" 1 "no frame was classified" \
  "$PY" "$EX/classify_service.py" --model "$A" --images "$WORK/unusable" --once --fps 0
case_ "7. a 3-D calibration array (64, 8, 8): the user's shape" 2 "[64, 8, 8] (3-D)" \
  "$EK" build -t rpi4 "$ONNX" --calib "$WORK/flat.npz" -q
case_ "8. build -q: the artifact path only" 0 "$WORK/quiet.edgekit" \
  "$EK" build -t rpi4 "$ONNX" --calib "$NPZ" -o "$WORK/quiet.edgekit" -q
QUIET_LINES=$(wc -l <"$WORK/out"); QUIET_ERR=$(wc -c <"$WORK/err")
if [ "$QUIET_LINES" = 1 ] && [ "$QUIET_ERR" = 0 ]; then Q=ok; else Q="UNEXPECTED: $QUIET_LINES lines, $QUIET_ERR bytes on stderr"; FAILED=1; fi
printf '%-66s %s\n' "8. build -q printed one line, nothing on stderr" "$Q"
case_ "8. build summary: max|err| with its unit, sizes explained" 0 "int8 steps of" \
  "$EK" build -t rpi4 "$ONNX" --calib "$NPZ" -o "$WORK/loud.edgekit"
if grep -q "0%|" "$WORK/err"; then B="UNEXPECTED: a progress bar in a piped log"; FAILED=1; else B=ok; fi
printf '%-66s %s\n' "8. piped build log has no progress bar" "$B"
case_ "9. stats(): executions / total_executions after 5 predicts" 0 "5 5" "$PY" -c "
import edgekit, numpy as np
with edgekit.load('$A') as m:
    for _ in range(5): m.predict(np.zeros((1, 1, 8, 8), np.float32))
    s = m.stats(); print(s['executions'], s['total_executions'], s['timed_executions'])"
case_ "10. inspect shows the labels" 0 "labels" "$EK" inspect "$WORK/img.edgekit"
"$PY" - "$A" "$WORK/tampered.edgekit" <<'PYEOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    members = {n: z.read(n) for n in z.namelist()}
members["model.tflite"] = members["model.tflite"][:-8] + b"tampered"
with zipfile.ZipFile(sys.argv[2], "w") as z:
    for name, data in members.items():
        z.writestr(name, data)
PYEOF
case_ "10. inspect a tampered file: shown, HASH MISMATCH" 2 "HASH MISMATCH" \
  "$EK" inspect "$WORK/tampered.edgekit"
case_ "11. search on ONNX, latency budget: prune ratios skipped" 3 "skipping prune ratios" \
  "$EK" build -t rpi4 "$ONNX" --calib "$NPZ" -o "$WORK/s.edgekit" --max-latency-ms 0.01
case_ "12. edgekit (no arguments): help" 0 "Usage: edgekit" "$EK"
case_ "12. --target RPI4" 0 "" "$EK" build --target RPI4 "$ONNX" --calib "$NPZ" -o "$WORK/u.edgekit" -q
case_ "12. file.py:Nett names the classes" 2 "did you mean 'Net'" \
  bash -c "cd '$WORK' && '$EK' build -t host net.py:Nett --input-shape 1x4 --calib synthetic"
case_ "12. -o into a missing folder: created, and said" 0 "created the output folder" \
  "$EK" build -t rpi4 "$ONNX" --calib "$NPZ" -o "$WORK/new/dir/d.edgekit"
"$PY" - "$WORK/api.edgekit" "$WORK/badvectors.edgekit" <<'PYEOF'
import hashlib, io, json, sys, zipfile
import numpy as np
with zipfile.ZipFile(sys.argv[1]) as z:
    members = {n: z.read(n) for n in z.namelist()}
with np.load(io.BytesIO(members["test_vectors.npz"])) as npz:
    arrays = {k: npz[k] for k in npz.files}
key = next(k for k in arrays if k.startswith("out/"))
arrays[key] = arrays[key] + 1.0
buf = io.BytesIO(); np.savez(buf, **arrays)
members["test_vectors.npz"] = buf.getvalue()
manifest = json.loads(members["manifest.json"])
manifest["files"]["test_vectors.npz"] = hashlib.sha256(buf.getvalue()).hexdigest()
members["manifest.json"] = json.dumps(manifest).encode()
with zipfile.ZipFile(sys.argv[2], "w") as z:
    for name, data in members.items():
        z.writestr(name, data)
PYEOF
case_ "12. verify: test vectors not reproduced" 1 "FAIL" "$EK" verify "$WORK/badvectors.edgekit"
case_ "12. a usage error keeps click's code" 2 "No such option" "$EK" build --no-such-flag
case_ "13. build --help: options in groups" 0 "Calibration options:" "$EK" build --help
case_ "13. build --save-config" 0 "" "$EK" build -t host "$ONNX" --calib "$NPZ" --format onnx \
  -o "$WORK/c1.edgekit" -q --save-config "$WORK/build.toml"
case_ "13. build --config build.toml (-o on the command line wins)" 0 "$WORK/c2.edgekit" \
  "$EK" build --config "$WORK/build.toml" -o "$WORK/c2.edgekit" -q
# --- issue 35: mistakes that still built wrong artifacts, unwritable outputs, -q, Ctrl-C
"$PY" - "$NPZ" "$WORK" <<'PYEOF'
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

npz, work = sys.argv[1], Path(sys.argv[2])
with np.load(npz) as data:
    x, y = data["x"], data["y"]
np.savez(work / "unlabelled.npz", x=x[:200])
np.savez(work / "pixels_fraction.npz", x=x * 255.0, y=y)  # a float resize of 8-bit pictures
# a feature matrix: 64 whole-number counts 0..16 per sample, and a model taking it
np.savez(work / "tabular.npz", features=np.round(x.reshape(len(x), 64) * 16), y=y)
w = numpy_helper.from_array(np.random.default_rng(0).normal(0, 0.1, (64, 10)).astype(np.float32), "w")
graph = helper.make_graph([helper.make_node("MatMul", ["features", "w"], ["scores"])], "tabular",
                          [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["n", 64])],
                          [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n", 10])], [w])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), work / "tabular.onnx")
(work / "linear.py").write_text("import torch\n\nclass Linear(torch.nn.Module):\n"
                                "    def __init__(self):\n        super().__init__()\n"
                                "        self.fc = torch.nn.Linear(64, 10)\n\n"
                                "    def forward(self, x):\n        return self.fc(x.flatten(1))\n")
PYEOF
"$PY" -c "
import sys, torch; sys.path.insert(0, '$WORK'); from linear import Linear
torch.manual_seed(1); torch.save(Linear().state_dict(), '$WORK/fresh.pth')"
LIN=(build -t host "$WORK/linear.py:Linear" --input-shape 1x1x8x8 --format onnx)
case_ "14. --weights fresh.pth (untrained), labelled data: stopped" 2 "look untrained" \
  "$EK" "${LIN[@]}" --weights "$WORK/fresh.pth" --calib "$NPZ" -o "$WORK/fresh.edgekit"
case_ "14. the same with --random-weights: built on purpose" 0 "" \
  "$EK" "${LIN[@]}" --weights "$WORK/fresh.pth" --calib "$NPZ" --random-weights \
  -o "$WORK/fresh.edgekit" -q
case_ "14. --weights fresh.pth, unlabelled data: built, with a warning" 0 "as an untrained net does" \
  "$EK" "${LIN[@]}" --weights "$WORK/fresh.pth" --calib "$WORK/unlabelled.npz" -o "$WORK/fresh2.edgekit"
case_ "15. calibration 0..255 with fractions (float resize): stopped" 2 "divide the arrays by 255" \
  "$EK" build -t rpi4 "$ONNX" --calib "$WORK/pixels_fraction.npz" -q
case_ "15. a 0..16 feature matrix: built, no pixel advice" 0 "" \
  "$EK" build -t host "$WORK/tabular.onnx" --calib "$WORK/tabular.npz" --format onnx \
  --accept-accuracy-drop --guard-time 0 -o "$WORK/tabular.edgekit" -q
if grep -q "8-bit pixels" "$WORK/err"; then T="UNEXPECTED: pixel advice for tabular data"; FAILED=1; else T=ok; fi
printf '%-66s %s\n' "15. ... and said nothing of 8-bit pixels" "$T"
RO="$WORK/read-only"
mkdir -p "$RO"
if [ "$(id -u)" = 0 ]; then chattr +i "$RO" 2>/dev/null || RO=""; else chmod 555 "$RO"; fi
if [ -n "$RO" ]; then
  case_ "16. build -o into a read-only folder: user error, before any work" 2 "is not writable" \
    "$EK" build -t rpi4 "$ONNX" --calib "$NPZ" -o "$RO/x.edgekit"
  case_ "16. report -o into a read-only folder" 2 "is not writable" "$EK" report "$A" -o "$RO/r.html"
  case_ "16. keygen into a read-only folder" 2 "is not writable" "$EK" keygen "$RO/k.pem"
  case_ "16. bundle -o into a read-only folder" 2 "is not writable" \
    "$EK" bundle "$A" -t rpi4 -o "$RO/bundle" -q
  if [ "$(id -u)" = 0 ]; then chattr -i "$RO"; else chmod 755 "$RO"; fi
else
  printf '%-66s %s\n' "16. read-only folder cases" "skipped: root without chattr +i"
fi
case_ "17. -q on every command (each --help lists it)" 0 "17 of 17" "$PY" -c "
import click
from edgekit.cli import cli
names = cli.list_commands(click.Context(cli))
have = [n for n in names if any(p.name == 'quiet' for p in cli.get_command(click.Context(cli), n).params)]
print(len(have), 'of', len(names), 'commands take -q; missing:', sorted(set(names) - set(have)))"
for args in "verify $A" "inspect $A" "bench $A --duration 0.2 --threads 1" "run $A $EX/samples/3_0021.png --top-k 1" "targets" "estimate -t rpi4 $A"; do
  set -- $args
  case_ "17. $1 -q: its result, nothing on stderr" 0 "" "$EK" "$1" -q "${@:2}"
  if [ -s "$WORK/err" ] || [ ! -s "$WORK/out" ]; then printf '%-66s %s\n' "    ...stdout/stderr" "UNEXPECTED"; FAILED=1; fi
done
case_ "17. edgekit -q build (the group's -q): the path alone" 0 "$WORK/gq.edgekit" \
  "$EK" -q build -t rpi4 "$ONNX" --calib "$NPZ" -o "$WORK/gq.edgekit"
case_ "18. Ctrl-C in calibrate: exit 130 within a second, no artifact" 0 "within a second" "$PY" - "$REPO" "$WORK" <<'PYEOF'
import signal, subprocess, sys, threading, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tests.converters.test_interrupt_latency import interrupt_during, slow_model
work = Path(sys.argv[2])
slow_model(work / "slow.onnx")
latency, code, err = interrupt_during("calibrate", ["build", "-t", "host", str(work / "slow.onnx"),
                                      "--calib", "synthetic", "--format", "onnx", "-o", str(work / "slow.edgekit")])
left = "no artifact written" in err and not (work / "slow.edgekit").exists()
print(f"exit {code} after {latency:.2f} s, {'no artifact written' if left else 'ARTIFACT LEFT'}")
if code == 130 and latency < 1.0 and left:
    print("within a second")
PYEOF
case_ "19. --target pi4: did you mean 'rpi4'" 2 "did you mean 'rpi4'" \
  "$EK" build --target pi4 "$ONNX" --calib "$NPZ"
case_ "19. --input-shape hint from the calibration data" 2 "--input-shape 1x1x8x8" \
  "$EK" build -t host "$WORK/linear.py:Linear" --calib "$NPZ" --random-weights
case_ "19. folder of <label>_<i>.png: labelled" 0 "accuracy 100.00% float" \
  "$EK" build -t host "$ONNX" --calib "$EX/samples" --format onnx -o "$WORK/samples.edgekit"
case_ "19. stats(): 50 submits are 50 samples, plain floats" 0 "50 50 float" "$PY" -c "
import edgekit, numpy as np
with edgekit.load('$A') as m:
    for f in [m.submit(np.zeros((1, 1, 8, 8), np.float32)) for _ in range(50)]: f.result()
    s = m.stats(); print(s['samples'], s['total_samples'], type(s['latency_ms']['p50']).__name__)"
case_ "19. inspect: the builder's version and commit" 0 "(commit " "$EK" inspect "$A"
case_ "19. verify's steps name their pair" 0 "vs stored int8 outputs" "$EK" verify "$A"
case_ "19. LICENSE: Apache-2.0" 0 "Apache License" head -3 "$REPO/LICENSE"
# the CLI's own line ("internal error: ..." / "internal error (a bug in edgekit ..."), not test logs
INTERNAL=$(grep -c "^internal error" "$ALL" || true)
if [ "$INTERNAL" = 0 ]; then I=ok; else I="UNEXPECTED: $INTERNAL"; FAILED=1; fi
printf '%-66s %s\n' "internal errors in all the output above: $INTERNAL" "$I"

# the runtime's line ("INFO: Created TensorFlow Lite XNNPACK delegate for CPU."), not the
# estimator's source citation ("google/XNNPACK README"), which `edgekit estimate` prints
if grep -q "INFO: Created TensorFlow Lite XNNPACK" "$ALL"; then X="UNEXPECTED: found in the output"; FAILED=1; else X=ok; fi
printf '%-66s %s\n' "8. no XNNPACK INFO line in any output above" "$X"
exit "$FAILED"
