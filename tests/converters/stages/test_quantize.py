"""Quantization silences onnxruntime's quantizer, only while it runs and nobody else."""

from __future__ import annotations

import importlib
import logging

import pytest
from edgekit.converters.stages.quantize import ort_quantization_quiet

# the module that logs the pre-processing hint (the package's ``quantize`` is a function)
ORT_FILE = importlib.import_module("onnxruntime.quantization.quantize").__file__


def _record(pathname: str) -> logging.LogRecord:
    return logging.LogRecord("root", logging.WARNING, pathname, 1, "hint", None, None)


def test_only_ort_quantization_records_are_dropped_and_only_inside(
        caplog: pytest.LogCaptureFixture) -> None:
    root = logging.getLogger()
    level, filters, handlers = root.level, list(root.filters), list(root.handlers)
    caplog.set_level(logging.WARNING)
    with ort_quantization_quiet():
        root.handle(_record(ORT_FILE))
        root.handle(_record(__file__))
        logging.getLogger("user.code").warning("mine")
        assert logging.getLogger("onnxruntime.quantization").level == logging.ERROR
    root.handle(_record(ORT_FILE))
    messages = [(r.pathname, r.getMessage()) for r in caplog.records]
    assert messages == [(__file__, "hint"), (messages[1][0], "mine"),
                        (ORT_FILE, "hint")]
    assert (root.level, root.filters, root.handlers) == (level, filters, handlers)


def test_a_build_leaves_the_root_logger_as_it_was(digits_artifact, caplog) -> None:
    # the session's digits build has run its quantize stage by now
    assert logging.getLogger().level == logging.WARNING
    caplog.set_level(logging.WARNING)
    logging.getLogger("user.code").warning("still heard")
    assert [r.getMessage() for r in caplog.records] == ["still heard"]
