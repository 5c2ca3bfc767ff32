"""``edgekit install`` / ``edgekit rollback`` on this machine's runtimes: verify before the
switch, atomic ``current`` link, the previous release kept, refusals leave ``current`` alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edgekit.artifact.archive import read_artifact, write_artifact
from edgekit.cli import main
from edgekit.ops.deploy import link_target
from tests.converters.emulation.test_emulate import tamper

from ...conftest import EXAMPLE

SHIPPED = EXAMPLE / "digits.rpi4.edgekit"


def variant(src: Path, dst: Path, note: str) -> Path:
    """A valid artifact with different bytes (one extra manifest field): a new release."""
    artifact = read_artifact(src)
    members = {n: artifact.read(n) for n in artifact.members if n != "manifest.json"}
    manifest = {k: v for k, v in artifact.manifest.items() if k != "files"}
    manifest["release_note"] = note
    write_artifact(dst, manifest, members)
    return dst


def install(root: Path, artifact: Path, *extra: str) -> int:
    return main(["install", str(artifact), "--root", str(root), "--name", "digits",
                 "--backend", "onnxruntime", *extra])


@pytest.fixture
def no_trusted_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("EDGEKIT_TRUSTED_KEYS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def test_install_switch_refuse_and_rollback(tmp_path: Path, no_trusted_keys: None,
                                            capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "edgekit"
    slot = root / "digits"
    assert install(root, SHIPPED) == 0
    first = link_target(slot / "current")
    assert first is not None and first.parent == slot / "releases" and first.is_file()
    assert os.readlink(slot / "current").startswith("releases/")  # relative: the root can move
    assert "PASS" in capsys.readouterr().out

    broken = tmp_path / "broken.edgekit"  # valid hashes, test vectors off by 10 steps
    tamper(SHIPPED, broken)
    assert install(root, broken) == 1  # VerificationError: a failed check, exit 1
    assert "did not reproduce" in capsys.readouterr().err
    assert link_target(slot / "current") == first
    assert sorted(p.name for p in (slot / "releases").iterdir()) == [first.name]  # not kept

    corrupt = tmp_path / "corrupt.edgekit"
    corrupt.write_bytes(SHIPPED.read_bytes()[:-100])
    assert install(root, corrupt) == 2 and link_target(slot / "current") == first

    second = variant(SHIPPED, tmp_path / "digits-v2.edgekit", "v2")
    assert install(root, second) == 0
    now = link_target(slot / "current")
    assert now != first and link_target(slot / "previous") == first
    assert main(["rollback", "digits", "--root", str(root)]) == 0
    assert link_target(slot / "current") == first and link_target(slot / "previous") == now

    third = variant(SHIPPED, tmp_path / "digits-v3.edgekit", "v3")
    assert install(root, third) == 0  # keeps current + previous only
    assert len(list((slot / "releases").iterdir())) == 2
    assert not [p for p in slot.iterdir() if p.name.startswith(".")]  # no temp links left


def test_rollback_without_a_previous_release_is_a_user_error(
        tmp_path: Path, no_trusted_keys: None, capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "edgekit"
    assert main(["rollback", "digits", "--root", str(root)]) == 2
    assert "nothing installed" in capsys.readouterr().err
    assert install(root, SHIPPED) == 0
    assert main(["rollback", "digits", "--root", str(root)]) == 2
    assert "no previous release" in capsys.readouterr().err


def test_an_unsigned_artifact_is_refused_once_the_device_trusts_a_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("cryptography")
    from edgekit.trust.signing import generate_key_pair

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    root = tmp_path / "edgekit"
    assert install(root, SHIPPED) == 0
    first = link_target(root / "digits" / "current")
    generate_key_pair(tmp_path / "device.key")
    monkeypatch.setenv("EDGEKIT_TRUSTED_KEYS", str(tmp_path / "device.key.pub"))
    update = variant(SHIPPED, tmp_path / "digits-v2.edgekit", "v2")
    assert install(root, update) == 2
    assert "unsigned" in capsys.readouterr().err
    assert link_target(root / "digits" / "current") == first


@pytest.mark.parametrize("name", ["../../x", "../escape", "a/b", "/abs", ".", "..", ".hidden",
                                  "x" * 65, "with space", "nul\x00"])
def test_install_refuses_a_slot_name_outside_the_root(tmp_path: Path, no_trusted_keys: None,
                                                      name: str) -> None:
    """Issue 36.2: ``--name ../../x`` wrote the slot outside ROOT."""
    root = tmp_path / "deep" / "root"
    assert main(["install", str(SHIPPED), "--root", str(root), "--name", name,
                 "--backend", "onnxruntime"]) == 2
    written = {p for p in tmp_path.rglob("*") if p.is_file()}
    assert written == set(), written


def test_a_symlinked_slot_leaving_the_root_is_refused(tmp_path: Path,
                                                      no_trusted_keys: None) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "digits").symlink_to(outside)
    assert install(root, SHIPPED) == 2
    assert not any(outside.iterdir())
