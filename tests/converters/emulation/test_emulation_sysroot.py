"""The sysroot recipe and builder, and what the emulated CPU looks like from inside."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from edgekit.converters.emulation import CpuSpec, ensure_sysroot, prepare, probe, recipe_for
from edgekit.converters.emulation import recipe as recipe_module
from edgekit.converters.emulation.apt import debian_mirrors
from edgekit.converters.emulation.builder import PTH_NAME, project_sources, source_hash
from edgekit.converters.emulation.recipe import (
    SITE_PACKAGES,
    WHEEL_LOCK,
    WHEEL_PINS,
    cache_root,
)
from edgekit.targets import load_profile, profile_from_dict

from edgekit.errors import TargetError, UserError

# -- recipe and host-side pieces (no emulation) -------------------------------------------


def test_one_sysroot_serves_every_aarch64_board_and_the_key_tracks_its_content() -> None:
    rpi4 = recipe_for(load_profile("rpi4"))
    assert rpi4.key() == recipe_for(load_profile("rpi-zero2w")).key()  # the CPU is per run
    assert "onnxruntime==1.32.0" in rpi4.wheels and "ai-edge-litert==2.3.0" in rpi4.wheels
    assert "manylinux2014_aarch64" in rpi4.wheel_platforms  # older tags listed explicitly
    fewer_tags = dataclasses.replace(rpi4, wheel_platforms=rpi4.wheel_platforms[:1])
    other_pkgs = dataclasses.replace(rpi4, debian_packages=(*rpi4.debian_packages, "libgomp1"))
    assert len({rpi4.key(), fewer_tags.key(), other_pkgs.key()}) == 3


def test_the_wheel_lock_pins_every_runtime_by_hash_and_its_content_is_in_the_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [line.split() for line in WHEEL_LOCK.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    pinned = {words[0] for words in lines}
    assert set(WHEEL_PINS.values()) <= pinned
    assert all(len(words) == 2 and words[1].startswith("--hash=sha256:")
               and len(words[1]) == len("--hash=sha256:") + 64 for words in lines), lines
    before = recipe_for(load_profile("rpi4")).key()
    edited = tmp_path / "sysroot-wheels.txt"
    edited.write_text(WHEEL_LOCK.read_text().replace("numpy==2.4.6", "numpy==2.4.5"))
    monkeypatch.setattr(recipe_module, "WHEEL_LOCK", edited)
    assert recipe_for(load_profile("rpi4")).key() != before


def test_the_cache_follows_the_override_else_the_user_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEKIT_SYSROOT_CACHE", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
    monkeypatch.delenv("EDGEKIT_SYSROOT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "edgekit" / "sysroot"


def test_a_native_target_has_no_emulation() -> None:
    with pytest.raises(TargetError, match="no emulation"):
        recipe_for(load_profile("host"))


def test_missing_qemu_is_a_user_error_naming_the_package() -> None:
    data = load_profile("rpi4").to_dict()
    data["emulation"]["qemu"] = "qemu-nosucharch-static"
    with pytest.raises(UserError, match="qemu-nosucharch-static not found.*qemu-user-static"):
        prepare(profile_from_dict(data))


def test_cpuinfo_names_the_targets_core_and_only_its_features() -> None:
    a72 = CpuSpec.from_profile(load_profile("rpi4")).cpuinfo()
    a76 = CpuSpec.from_profile(load_profile("rpi5")).cpuinfo()
    assert "CPU implementer\t: 0x41" in a72 and "CPU part\t: 0xd08" in a72
    assert "asimddp" not in a72  # the Pi 4's Cortex-A72 is ARMv8.0: no dot product
    assert "CPU part\t: 0xd0b" in a76 and "asimddp" in a76
    assert a72.count("processor\t:") == (os.cpu_count() or 1)


def test_debian_mirrors_come_from_the_hosts_apt_sources(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EDGEKIT_DEBIAN_MIRROR", raising=False)
    (tmp_path / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security/\nSuites: bookworm-security\n")
    (tmp_path / "other.list").write_text("deb [arch=amd64] https://vendor.example/apt stable main\n")
    assert debian_mirrors((str(tmp_path),)) == ("http://mirror.example/debian",
                                                "http://mirror.example/debian-security")
    (tmp_path / "debian.sources").unlink()  # no Debian mirror on the host (say Ubuntu)
    assert debian_mirrors((str(tmp_path),)) == ("http://deb.debian.org/debian",
                                                "http://deb.debian.org/debian-security")


def test_source_hash_changes_with_any_file(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    files = [("edgekit/a.py", tmp_path / "a.py")]
    before = source_hash(files)
    (tmp_path / "a.py").write_text("x = 2\n")
    assert source_hash(files) != before


# -- the built sysroot (real apt, pip, QEMU) ----------------------------------------------


@pytest.mark.emulated
def test_sysroot_is_built_once_and_reused(sysroot) -> None:  # noqa: ANN001
    info = sysroot.info
    assert sysroot.python.is_file()
    assert info["key"] == sysroot.path.name == sysroot.recipe.key()
    assert any(w.startswith("onnxruntime-1.32.0-cp311") and "aarch64" in w for w in info["wheels"])
    assert any(w.startswith("ai_edge_litert-2.3.0-cp311") for w in info["wheels"])
    site = sysroot.root / SITE_PACKAGES  # pip --target installed the locked closure there
    for dist in ("numpy-2.4.6", "onnxruntime-1.32.0", "ai_edge_litert-2.3.0", "protobuf-"):
        assert any(site.glob(f"{dist}*.dist-info")), dist
    assert any(d.startswith("python3.11_") and d.endswith("_arm64.deb") for d in info["debs"])
    again = ensure_sysroot(sysroot.recipe)
    assert again.path == sysroot.path and again.info["built"] == info["built"]
    # No absolute symlinks: the host kernel would resolve them against the host's /.
    for dirpath, dirnames, filenames in os.walk(sysroot.root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                assert not os.readlink(path).startswith("/"), path


@pytest.mark.emulated
def test_project_layer_is_the_device_package_only(sysroot) -> None:  # noqa: ANN001
    files = project_sources()
    names = {rel for rel, _ in files}
    assert {"edgekit/__init__.py", "edgekit/model.py", "edgekit/targets/rpi4.toml"} <= names
    assert not any(rel.startswith(("edgekit/converters/", "edgekit/emulation/"))
                   or rel.endswith("/guest.py") for rel in names), sorted(names)
    pth = (sysroot.root / SITE_PACKAGES / PTH_NAME).read_text().strip()
    assert pth == f"/opt/edgekit/{source_hash(files)}"
    layer = sysroot.root / pth.lstrip("/")
    for rel, host in files:
        assert (layer / rel).read_bytes() == host.read_bytes(), rel
    assert (layer / "edgekit" / "targets" / "rpi4.toml").is_file()
    assert not (layer / "edgekit" / "converters").exists()
    assert not (layer / "edgekit" / "emulation").exists()


@pytest.mark.emulated
def test_python_runs_on_the_pi4_cortex_a72_without_dotprod(sysroot) -> None:  # noqa: ANN001
    seen = probe(load_profile("rpi4"))
    assert seen["machine"] == "aarch64" and seen["python"].startswith("3.11")
    assert seen["cpuinfo"]["implementer"] == "0x41" and seen["cpuinfo"]["part"] == "0xd08"
    assert "asimddp" not in seen["cpuinfo"]["features"]
    # HWCAP comes from QEMU's CPU model: what onnxruntime dispatches its int8 kernels on.
    assert seen["hwcap"]["asimd"] and not seen["hwcap"]["asimddp"]
    assert not seen["hwcap"]["sve"] and not seen["hwcap"]["i8mm"]
    assert seen["versions"] == {"numpy": "2.4.6", "onnxruntime": "1.32.0",
                                "ai-edge-litert": "2.3.0"}


@pytest.mark.emulated
def test_the_cpu_model_reaches_the_guest(sysroot) -> None:  # noqa: ANN001
    """The Pi 5's Cortex-A76 has dot product: the same sysroot, another -cpu, other HWCAP."""
    seen = probe(load_profile("rpi5"))
    assert seen["cpuinfo"]["part"] == "0xd0b"
    assert seen["hwcap"]["asimddp"] and not seen["hwcap"]["sve"]
