#!/usr/bin/env bash
# A scripted newcomer session (issue 19): the README's commands, then each mistake a new user
# makes, in a fresh virtual environment. Prints one line per case with its exit code, the
# code intended, and whether the output said what it should; exits 1 if any line is off.
#
#   bash tools/newcomer.sh                 # fresh venv in a temp folder (about 3-5 minutes)
#   bash tools/newcomer.sh --reuse-venv    # keep and reuse .venv-newcomer in the repository
#   bash tools/newcomer.sh --full-tests    # run the whole suite as `bash tools/test.sh` does
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
REUSE=0
FULL=0
for arg in "$@"; do
  case "$arg" in
    --reuse-venv) REUSE=1 ;;
    --full-tests) FULL=1 ;;
    *) echo "usage: bash tools/newcomer.sh [--reuse-venv] [--full-tests]" >&2; exit 2 ;;
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
# the runtime's line ("INFO: Created TensorFlow Lite XNNPACK delegate for CPU."), not the
# estimator's source citation ("google/XNNPACK README"), which `edgekit estimate` prints
if grep -q "INFO: Created TensorFlow Lite XNNPACK" "$ALL"; then X="UNEXPECTED: found in the output"; FAILED=1; else X=ok; fi
printf '%-66s %s\n' "8. no XNNPACK INFO line in any output above" "$X"
exit "$FAILED"
