"""The CLI: exit codes 0 ok / 2 user error / 1 internal, readable output."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgekit.cli", *args], capture_output=True,
                          text=True)


def test_targets_lists_the_boards():
    proc = run("targets")
    assert proc.returncode == 0
    for name in ("rpi4", "rpi5", "rpi3", "rpi-zero2w", "generic-aarch64", "host"):
        assert name in proc.stdout
    assert "cortex-a72" in proc.stdout


def test_verify_fails_on_tampered_test_vectors(digits_onnx_artifact, tmp_path):
    """A consistent tamper (hash updated) passes the load check but fails verification: exit 1
    (a failed check, as a failed test run; 2 is for usage errors)."""
    import hashlib
    import io

    import numpy as np

    bad = tmp_path / "tampered.edgekit"
    with zipfile.ZipFile(digits_onnx_artifact) as zin:
        members = {n: zin.read(n) for n in zin.namelist()}
    with np.load(io.BytesIO(members["test_vectors.npz"])) as npz:
        arrays = {k: npz[k] for k in npz.files}
    key = next(k for k in arrays if k.startswith("out/"))
    arrays[key] = arrays[key] + 1.0
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    members["test_vectors.npz"] = buf.getvalue()
    manifest = json.loads(members["manifest.json"])
    manifest["files"]["test_vectors.npz"] = hashlib.sha256(buf.getvalue()).hexdigest()
    members["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(bad, "w") as zout:
        for name, data in members.items():
            zout.writestr(name, data)
    proc = run("verify", str(bad))
    assert proc.returncode == 1
    assert "FAIL" in proc.stdout


@pytest.mark.parametrize("args", [["inspect", "/no/such.edgekit"], ["verify", "/no/such.edgekit"]])
def test_missing_artifact_exit_2(args):
    proc = run(*args)
    assert proc.returncode == 2 and "no such artifact" in proc.stderr


def test_every_command_in_the_tables_is_a_module_with_that_command():
    import importlib

    from edgekit.commands import DEVICE_COMMANDS, HOST_COMMANDS

    assert set(DEVICE_COMMANDS) == {"run", "bench", "verify", "inspect", "doctor", "targets",
                                    "keygen", "sign", "install", "rollback"}
    assert set(HOST_COMMANDS) == {"build", "bundle", "estimate", "calibrate-host", "emulate",
                                  "matrix", "report"}
    for name, path in DEVICE_COMMANDS.items():
        assert path.startswith("edgekit.commands.") and not path.startswith("edgekit.converters")
        assert importlib.import_module(path).command.name == name
    for name, path in HOST_COMMANDS.items():
        assert path.startswith("edgekit.converters.commands.")
        assert importlib.import_module(path).command.name == name


def test_a_device_command_imports_nothing_of_the_host_side():
    code = ("import sys; from edgekit.cli import main; code = main(['targets']); "
            "host = sorted(m for m in sys.modules if m.startswith('edgekit.converters') "
            "or m.split('.')[0] in ('onnx', 'torch', 'PIL', 'filelock', 'platformdirs')); "
            "print('HOST', host); sys.exit(code)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "HOST []" in proc.stdout, proc.stdout


def test_host_commands_without_the_host_tools_are_user_errors_naming_the_extra(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """As on a device install (the real one: tests/test_device_install.py)."""
    from edgekit import cli as cli_module
    from edgekit.cli import main

    monkeypatch.setattr(cli_module, "host_missing", lambda: ["onnx", "platformdirs"])
    for args in (["build", "m.onnx", "--target", "rpi4", "--calib", "x"], ["estimate", "--help"],
                 ["emulate"], ["calibrate-host", "--show"]):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert f"`edgekit {args[0]}` runs on the host" in err
        assert 'pip install "edgekit-sdk[build]"' in err and "missing: onnx, platformdirs" in err
    assert main(["--help"]) == 0
    listing = capsys.readouterr().out
    build_line = next(line for line in listing.splitlines() if line.strip().startswith("build"))
    assert "host-only" in build_line and "edgekit-sdk[build]" in build_line
    run_line = next(line for line in listing.splitlines() if line.strip().startswith("run "))
    assert "host-only" not in run_line
