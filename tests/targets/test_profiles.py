"""Target profiles are validated data: typos and unknown names are errors naming what is allowed."""

from __future__ import annotations

import dataclasses

import pytest
from edgekit.targets import PROFILE_DIR, PowerModel, list_profiles, load_profile, profile_from_dict
from edgekit.targets.schema import COST_MODEL_KEYS

from edgekit.errors import TargetError


def test_bundled_profiles_load():
    names = list_profiles()
    for expected in ("rpi4", "rpi5", "rpi3", "rpi-zero2w", "generic-aarch64", "host"):
        assert expected in names
    for name in names:
        assert load_profile(name).name == name


def test_rpi4_facts():
    p = load_profile("rpi4")
    assert (p.cpu.core, p.cpu.cores, p.cpu.freq_mhz) == ("cortex-a72", 4, 1500)
    assert p.cpu.neon and not p.cpu.dotprod and not p.cpu.fp16
    assert p.memory.ram_mb == (1024, 2048, 4096, 8192)
    assert (p.thermal.soft_limit_c, p.thermal.hard_limit_c) == (80.0, 85.0)
    assert (p.power.idle_w, p.power.full_load_w) == (2.7, 6.4)
    assert p.emulation.cpu_model == "cortex-a72" and p.emulation.cpuinfo_part == "0xd08"


def test_rpi5_has_dotprod_and_fp16():
    p = load_profile("rpi5")
    assert p.cpu.core == "cortex-a76" and p.cpu.dotprod and p.cpu.fp16


FACT_SECTIONS = ("[cpu]", "[memory]", "[thermal]", "[power]", "[budgets]")


def test_every_fact_carries_a_source_comment():
    """Board facts and budget defaults each name their source on their line."""
    for path in PROFILE_DIR.glob("*.toml"):
        section = ""
        for line in path.read_text().splitlines():
            if line.startswith("["):
                section = line.strip()
            elif "=" in line and not line.lstrip().startswith("#") and section in FACT_SECTIONS:
                assert "#" in line, f"{path.name} {section}: no source for: {line}"


def test_unknown_target_lists_allowed():
    with pytest.raises(TargetError, match=r"unknown target 'pi4' \(did you mean 'rpi4'\?\); allowed: .*rpi4"):
        load_profile("pi4")


def _write(tmp_path, text):
    path = tmp_path / "board.toml"
    path.write_text(text)
    return path


def test_unknown_key_names_the_allowed_keys(tmp_path):
    text = (PROFILE_DIR / "rpi4.toml").read_text().replace("cores = 4", "cores = 4\ncorez = 4")
    with pytest.raises(TargetError, match="unknown key 'corez' in \\[cpu\\]; allowed: arch, core, cores"):
        load_profile(_write(tmp_path, text))


def test_missing_field_is_named(tmp_path):
    text = (PROFILE_DIR / "rpi4.toml").read_text().replace("idle_w = 2.7", "")
    with pytest.raises(TargetError, match="missing field 'idle_w' in \\[power\\]"):
        load_profile(_write(tmp_path, text))


def test_wrong_type_and_value(tmp_path):
    text = (PROFILE_DIR / "rpi4.toml").read_text().replace('activation_type = "uint8"',
                                                           'activation_type = "fp8"')
    with pytest.raises(TargetError, match="activation_type = 'fp8'; allowed: uint8, int8"):
        load_profile(_write(tmp_path, text))


def test_host_resolves_native_values():
    p = load_profile("host")
    assert p.cpu.arch != "native" and p.cpu.cores >= 1


def test_sections_are_typed_and_frozen():
    p = load_profile("rpi4")
    assert isinstance(p.budgets.latency_ms, float) and p.runtime.formats == ("tflite", "onnx")
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.cpu.cores = 8  # type: ignore[misc]
    assert not hasattr(p, "tuner")  # no attribute falls through to raw data any more


def test_a_bool_is_not_a_number(tmp_path):
    data = load_profile("rpi4").to_dict()
    data["power"]["idle_w"] = True
    data["schema"] = True
    with pytest.raises(TargetError) as err:
        profile_from_dict(data)
    assert "[power] idle_w must be int or float, got bool True" in str(err.value)
    assert "top level schema must be int, got bool True" in str(err.value)


def test_cost_model_keys_are_the_estimators():
    from edgekit.converters.estimate.cost import MODEL_KEYS

    assert tuple(MODEL_KEYS) == COST_MODEL_KEYS
    assert set(load_profile("rpi4").cost_model.rates) == set(COST_MODEL_KEYS)
    data = load_profile("rpi4").to_dict()
    data["cost_model"]["conv_gmacs_i4"] = 1.0
    with pytest.raises(TargetError, match="unknown key 'conv_gmacs_i4' in \\[cost_model\\]"):
        profile_from_dict(data)


def test_one_power_model_for_the_estimator_and_the_runtime():
    from edgekit.converters.estimate import power_w

    p = load_profile("rpi4")
    power = PowerModel.from_profile(p)
    assert power.watts(1) == pytest.approx(2.7 + 3.7 / 4) == power_w(p, 1)
    assert power.watts(8) == pytest.approx(6.4) == power_w(p, 8)  # capped at the 4 cores
