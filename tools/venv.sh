# Sourced by tools/quickstart.sh and tools/test.sh: create (once) and use the project's venv,
# and install Debian packages only after asking.
#
# Debian 12 / Ubuntu 23.04+ refuse `pip install` into the system Python
# (externally-managed-environment, PEP 668), so everything goes into .venv in the repository.
# The venv is isolated (no --system-site-packages): packages of the host's Python never leak
# in, so what the tests import is what setup.py and these scripts install. A .venv made by an
# older version of this file with the host's packages is kept, with a note on how to rebuild
# it. Set EDGEKIT_VENV to use another folder.
#
# System packages (apt-get, as root: sudo) are installed only when the user says yes at a
# prompt, or without asking where nobody is there to ask and that is intended: CI=true (.ci/run)
# or EDGEKIT_ASSUME_YES=1. Otherwise the script stops and names what is missing.

EDGEKIT_VENV="${EDGEKIT_VENV:-.venv}"

edgekit_as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# edgekit_apt_install WHY PACKAGE...: install the packages with apt-get after asking (returns 1,
# having said what is missing, when the answer is no or nobody can be asked)
edgekit_apt_install() {
  local why="$1"
  shift
  [ "$#" -gt 0 ] || return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "missing: $* ($why); install them with this system's package manager" >&2
    return 1
  fi
  if [ "${CI:-}" = true ] || [ "${EDGEKIT_ASSUME_YES:-}" = 1 ]; then
    echo "installing $* with apt-get ($why)" >&2
  elif [ -t 0 ]; then
    local answer
    read -r -p "Install $* with apt-get ($why)$([ "$(id -u)" = 0 ] || echo ', using sudo')? [Y/n] " answer
    case "$answer" in
      ""|[yY]*) ;;
      *) echo "not installed: $* ($why); install them yourself and run this again" >&2; return 1 ;;
    esac
  else
    echo "missing: $* ($why); not installing system packages without asking: run this in a" \
      "terminal to be asked, or set EDGEKIT_ASSUME_YES=1 to install them" >&2
    return 1
  fi
  edgekit_as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive edgekit_as_root apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

edgekit_venv() {
  if [ ! -x "$EDGEKIT_VENV/bin/python" ] || ! "$EDGEKIT_VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    rm -rf "$EDGEKIT_VENV"
    if ! python3 -m venv "$EDGEKIT_VENV" >/dev/null 2>&1; then
      rm -rf "$EDGEKIT_VENV"
      # Debian/Ubuntu ship venv's ensurepip separately
      edgekit_apt_install "python3 -m venv failed: Debian ships venv's pip separately" python3-venv
      python3 -m venv "$EDGEKIT_VENV"
    fi
    echo "created the virtual environment $EDGEKIT_VENV (activate it: source $EDGEKIT_VENV/bin/activate)" >&2
  elif grep -qs "^include-system-site-packages = true" "$EDGEKIT_VENV/pyvenv.cfg"; then
    echo "note: $EDGEKIT_VENV also sees the host Python's packages (made by an older tools/venv.sh);" \
      "rm -rf $EDGEKIT_VENV and run this again for an isolated one" >&2
  fi
  VIRTUAL_ENV="$(cd "$EDGEKIT_VENV" && pwd)"
  export VIRTUAL_ENV
  export PATH="$VIRTUAL_ENV/bin:$PATH"
  hash -r
}
