#!/bin/sh
# Install this edgekit bundle (target @TARGET@: CPython @PYTHON_VERSION@, @MACHINE@) with no network:
# a venv, every wheel from wheels/ checked against requirements.txt's sha256, then each
# artifact through `edgekit install` (verified here first; the running one stays if it fails).
#
#   sh install.sh [--prefix DIR] [--system-site-packages] [--no-service]
#
# --prefix DIR              where the venv and the artifacts go (default: $HOME/edgekit)
# --system-site-packages    let the venv see apt's Python packages (picamera2, OpenCV)
# --no-service              do not install or start the systemd units
# Environment: PYTHON (default python3); EDGEKIT_LAUNCHER, a command put before every run of
# the device's Python (empty on a board; CI runs this script under qemu-aarch64 with it).
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
PREFIX="${HOME:-/root}/edgekit"
SERVICE=1
VENV_FLAGS=""
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) PREFIX="$2"; shift 2 ;;
        --system-site-packages) VENV_FLAGS="--system-site-packages"; shift ;;
        --no-service) SERVICE=0; shift ;;
        *) echo "install.sh: unknown option $1 (expected --prefix DIR, --system-site-packages, --no-service)" >&2; exit 2 ;;
    esac
done
PYTHON="${PYTHON:-python3}"
RUN="${EDGEKIT_LAUNCHER:-}"
VENV="$PREFIX/venv"
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1  # offline: never ask an index

cd "$HERE"
echo "checking the bundle's files against BUNDLE.sha256"
sha256sum --quiet --strict -c BUNDLE.sha256

$RUN "$PYTHON" -c "
import platform, sys
want, got = ('@PYTHON_VERSION@', '@MACHINE@'), ('%d.%d' % sys.version_info[:2], platform.machine())
if want != got:
    sys.exit('install.sh: this bundle is for Python %s on %s; %s is Python %s on %s' % (*want, sys.executable, *got))
"

mkdir -p "$PREFIX"
if [ ! -e "$VENV/bin/python" ]; then
    echo "creating the venv $VENV"
    # --without-pip: the bundle brings pip as a wheel (no ensurepip / python3-venv needed)
    $RUN "$PYTHON" -m venv --without-pip $VENV_FLAGS "$VENV"
fi
echo "installing $(grep -c -- '--hash=' requirements.txt) wheels offline (pip --no-index --require-hashes)"
$RUN "$VENV/bin/python" "$HERE/wheels/@PIP_WHEEL@/pip" install --no-index \
    --find-links "$HERE/wheels" --require-hashes -r "$HERE/requirements.txt" \
    --quiet --no-warn-script-location

# the example service's code, replaced as a whole
rm -rf "$PREFIX/.service.new" && cp -R "$HERE/service" "$PREFIX/.service.new"
rm -rf "$PREFIX/service" && mv "$PREFIX/.service.new" "$PREFIX/service"

SYSTEMD=0
if [ "$SERVICE" = 1 ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    SYSTEMD=1
fi
SUDO=""
if [ "$SYSTEMD" = 1 ] && [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

for NAME in @NAMES@; do
    UNIT="edgekit-$NAME"
    # verify on this device, switch $PREFIX/$NAME/current, restart $UNIT if it runs
    $RUN "$VENV/bin/python" -m edgekit install "$HERE/artifacts/$NAME.edgekit" \
        --root "$PREFIX" --name "$NAME" --service "$UNIT"
    if [ "$SYSTEMD" = 1 ]; then
        sed -e "s#@PREFIX@#$PREFIX#g" -e "s#@USER@#$(id -un)#g" "$HERE/$UNIT.service" \
            | $SUDO tee "/etc/systemd/system/$UNIT.service" >/dev/null
        $SUDO systemctl daemon-reload
        $SUDO systemctl enable --now "$UNIT"
        echo "service $UNIT enabled (journalctl -u $UNIT -f)"
    fi
done
echo "done: $VENV/bin/edgekit verify $PREFIX/<name>/current; roll back with $VENV/bin/edgekit rollback <name> --root $PREFIX"
