"""Stage contracts: the one written order, the order check, forks, and the search's prefix
cache reusing stage results for equal configs (real stages on the digits CNN)."""

from __future__ import annotations

import dataclasses

import pytest
from edgekit.converters.context import GIVEN, BuildConfig, BuildContext
from edgekit.converters.pipeline import STAGES, Pipeline, check_order, plan, stage_class
from edgekit.converters.search.cache import PrefixCache
from edgekit.converters.stages.calibrate import CalibrateConfig
from edgekit.converters.stages.prune import PruneConfig
from edgekit.converters.stages.quantize import QuantizeConfig
from edgekit.targets import load_profile

from edgekit.errors import InternalError

from ..conftest import DIGITS_NPZ, DIGITS_ONNX


@pytest.mark.parametrize("kind", ["onnx", "torch"])
@pytest.mark.parametrize("prune", [False, True])
def test_every_plan_is_a_selection_of_the_one_order_that_passes_its_contracts(kind, prune):
    names = plan(kind, prune).names
    assert set(names) <= set(STAGES) and names[-3:] == ("convert_tflite", "estimate", "package")
    if prune:  # the pruning plans keep STAGES' own order
        assert list(names) == [n for n in STAGES if n in names]
    check_order(names, GIVEN)


def test_an_order_that_breaks_a_contract_is_refused_before_anything_runs(tmp_path):
    ctx = BuildContext(BuildConfig(source=str(DIGITS_ONNX)), load_profile("host"), tmp_path)
    with pytest.raises(InternalError, match="stage 'calibrate' requires calib, float_path, inputs"):
        Pipeline(["calibrate", "load"]).run(ctx)
    assert ctx.stages == [] and ctx.produced == {}
    assert "ranges" in stage_class("calibrate").provides


def test_a_fork_copies_what_stages_append_to_and_shares_what_they_replace(tmp_path):
    ctx = BuildContext(BuildConfig(source="m.onnx"), load_profile("host"), tmp_path,
                       inputs=[{"name": "x", "shape": [1]}], float_model=object())
    ctx.mark("load", "inputs", "float_model")
    child = ctx.fork("child")
    child.inputs[0]["quantization"] = {"scale": 0.1}
    child.warn("only the child")
    child.mark("validate", "quant_path")
    assert ctx.inputs == [{"name": "x", "shape": [1]}] and ctx.warnings == []
    assert "quant_path" not in ctx.produced and child.workdir == tmp_path / "child"
    assert child.float_model is ctx.float_model and child.config is ctx.config
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.config.method = "entropy"  # type: ignore[misc]


def test_the_prefix_cache_runs_each_stage_once_per_distinct_prefix(tmp_path):
    config = BuildConfig(source=str(DIGITS_ONNX), target="host", calib=str(DIGITS_NPZ),
                         calib_samples=32, val_samples=32, quiet=True, search=True)
    base = BuildContext(config, load_profile("host"), tmp_path, report=lambda _m: None)
    cache = PrefixCache(plan("onnx", True), base)
    dense = {"prune": PruneConfig(0.0), "calibrate": CalibrateConfig(("minmax",))}
    first = cache.run("quantize", dense)
    assert cache.runs == {n: 1 for n in ("load", "data", "pin", "prune", "prepare",
                                         "equalize", "narrow_outputs", "calibrate", "quantize")}
    assert cache.run("quantize", dict(dense)) is first  # equal configs: nothing re-runs
    node = next(n.name for n in first.float_model.graph.node if n.op_type == "Conv")
    fallback = cache.run("quantize", {**dense, "quantize": QuantizeConfig((node,))})
    assert cache.runs["calibrate"] == 1 and cache.runs["quantize"] == 2
    assert fallback.ranges == first.ranges and fallback.candidates != first.candidates
    entropy = cache.run("quantize", {**dense, "calibrate": CalibrateConfig(("entropy",))})
    assert cache.runs["prepare"] == 1 and cache.runs["calibrate"] == 2
    assert set(entropy.ranges) == {"entropy"} and set(first.ranges) == {"minmax"}
    assert [s["name"] for s in entropy.stages] == ["load", "data", "pin", "prepare",
                                                   "equalize", "calibrate", "quantize"]
    assert base.stages == [] and entropy.produced["ranges"] == "calibrate"


@pytest.mark.parametrize("kind", ["onnx", "torch"])
def test_the_decisions_after_validate_are_stages_of_a_plain_plan_and_left_to_the_search(kind):
    plain, searched = plan(kind, False).names, plan(kind, True, search=True).names
    after = plain[plain.index("validate") + 1:]
    assert after[:3] == ("accuracy_decision", "speed_choice", "layer_speed")
    assert not {"accuracy_decision", "speed_choice", "layer_speed"} & set(searched)
    for name in ("accuracy_decision", "speed_choice", "layer_speed"):
        assert stage_class(name).name == name  # registered under its own name
    check_order(plain, GIVEN)
