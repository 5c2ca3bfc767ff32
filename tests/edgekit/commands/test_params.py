"""The shared option types: comma lists and x-joined sizes, as the commands use them."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from edgekit.commands.params import (
    BATCH_SIZES,
    FLOATS,
    IMAGE_SIZE,
    NAMES,
    SHAPES,
    THREAD_COUNT,
    THREAD_COUNTS,
    THREADS_OR_AUTO,
)


def echo_command(param_type: click.ParamType) -> click.Command:
    @click.command()
    @click.option("--value", "-v", type=param_type)
    def command(value: object) -> None:
        click.echo(repr(value))

    return command


@pytest.mark.parametrize(("param_type", "text", "expected"), [
    (THREADS_OR_AUTO, "1,2, auto", [1, 2, "auto"]),
    (THREAD_COUNTS, "4,1", [4, 1]),
    (BATCH_SIZES, "1", [1]),
    (FLOATS, "0.485,0.456,0.406", [0.485, 0.456, 0.406]),
    (NAMES, "image, mask", ["image", "mask"]),
    (IMAGE_SIZE, "224X160", (224, 160)),
    (SHAPES, "1x3x224x224,1x10", [(1, 3, 224, 224), (1, 10)]),
])
def test_good_values_convert(param_type: click.ParamType, text: str, expected: object) -> None:
    result = CliRunner().invoke(echo_command(param_type), ["--value", text])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == repr(expected)


@pytest.mark.parametrize(("param_type", "text", "shown"), [
    (THREADS_OR_AUTO, "1,many", "'many' in '1,many'"),
    (THREAD_COUNTS, "auto", "'auto'"),  # 'auto' only where the option takes it
    (BATCH_SIZES, "0", "'0'"),
    (BATCH_SIZES, "1,,2", "'1,,2'"),
    (BATCH_SIZES, " ", "' '"),
    (FLOATS, "0.5,nan-ish", "'nan-ish'"),
    (IMAGE_SIZE, "224", "'224'"),
    (IMAGE_SIZE, "224x224x3", "'224x224x3'"),
    (IMAGE_SIZE, "-1x8", "'-1x8'"),
    (SHAPES, "1x0x8", "'1x0x8'"),
])
def test_bad_values_are_usage_errors_naming_the_option(param_type: click.ParamType, text: str,
                                                       shown: str) -> None:
    result = CliRunner().invoke(echo_command(param_type), ["--value", text])
    assert result.exit_code == 2, result.output
    assert "--value expects" in result.output and shown in result.output, result.output


def test_every_threads_option_goes_through_the_one_thread_type() -> None:
    # edgekit run, bench (device: capped at this machine's CPUs) and estimate (host: the
    # target's counts, not capped) read --threads with ThreadCount, alone or as list items
    import importlib

    from edgekit.commands import DEVICE_COMMANDS, HOST_COMMANDS
    from edgekit.commands.params import CommaList, ThreadCount

    seen = {}
    for name, module in {**DEVICE_COMMANDS, **HOST_COMMANDS}.items():
        for param in importlib.import_module(module).command.params:
            if "--threads" in getattr(param, "opts", ()):
                kind = param.type.item if isinstance(param.type, CommaList) else param.type
                seen[name] = (type(kind), kind.cap)
    assert seen == {"run": (ThreadCount, True), "bench": (ThreadCount, True),
                    "estimate": (ThreadCount, False)}


@pytest.mark.parametrize(("param_type", "text", "expected"), [
    (THREAD_COUNT, "auto", "auto"),
    (THREAD_COUNT, "0", 0),
    (THREADS_OR_AUTO, "auto,1", ["auto", 1]),
])
def test_thread_counts_keep_their_forms(param_type: click.ParamType, text: str,
                                        expected: object) -> None:
    result = CliRunner().invoke(echo_command(param_type), ["--value", text])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == repr(expected)


@pytest.mark.parametrize("text", ["-1", "two", "1e20", "1234567"])
def test_a_bad_thread_count_names_the_option(text: str) -> None:
    result = CliRunner().invoke(echo_command(THREAD_COUNT), ["--value", text])
    assert result.exit_code == 2, result.output
    assert "--value expects a count >= 0 (0 = the runtime's default) or 'auto'" in result.output
