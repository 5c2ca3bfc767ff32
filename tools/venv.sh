# Sourced by tools/quickstart.sh and tools/test.sh: create (once) and use the project's venv.
#
# Debian 12 / Ubuntu 23.04+ refuse `pip install` into the system Python
# (externally-managed-environment, PEP 668), so everything goes into .venv in the repository.
# --system-site-packages: a machine that already has torch, onnxruntime... installed reuses
# them (pip then sees them satisfied); on a fresh machine the venv is as good as empty.
# Set EDGEKIT_VENV to use another folder.

EDGEKIT_VENV="${EDGEKIT_VENV:-.venv}"

edgekit_as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

edgekit_venv() {
  if [ ! -x "$EDGEKIT_VENV/bin/python" ] || ! "$EDGEKIT_VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    rm -rf "$EDGEKIT_VENV"
    if ! python3 -m venv --system-site-packages "$EDGEKIT_VENV" >/dev/null 2>&1; then
      rm -rf "$EDGEKIT_VENV"
      # Debian/Ubuntu ship venv's ensurepip separately
      if command -v apt-get >/dev/null 2>&1; then
        echo "python3 -m venv failed: installing python3-venv with apt" >&2
        edgekit_as_root apt-get update -qq
        DEBIAN_FRONTEND=noninteractive edgekit_as_root apt-get install -y -qq python3-venv >/dev/null
      fi
      python3 -m venv --system-site-packages "$EDGEKIT_VENV"
    fi
    echo "created the virtual environment $EDGEKIT_VENV (activate it: source $EDGEKIT_VENV/bin/activate)" >&2
  fi
  VIRTUAL_ENV="$(cd "$EDGEKIT_VENV" && pwd)"
  export VIRTUAL_ENV
  export PATH="$VIRTUAL_ENV/bin:$PATH"
  hash -r
}
