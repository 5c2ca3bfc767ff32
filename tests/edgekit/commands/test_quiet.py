"""``-q``/``--quiet`` on every command, one shared option, and ``edgekit -q COMMAND`` (issue 35)."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from edgekit.commands import DEVICE_COMMANDS, HOST_COMMANDS
from edgekit.commands.quiet import HELP, with_quiet
from tests.conftest import DIGITS_NPZ, DIGITS_ONNX, SAMPLES


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgekit.cli", *args], capture_output=True,
                          text=True)


@pytest.mark.parametrize("name", sorted(DEVICE_COMMANDS | HOST_COMMANDS))
def test_every_command_takes_the_shared_quiet_option(name):
    from edgekit.cli import cli

    command = cli.get_command(click.Context(cli), name)
    options = [p for p in command.params if p.name == "quiet"]
    assert len(options) == 1, f"{name}: {len(options)} quiet options"
    assert options[0].opts == ["--quiet", "-q"] and options[0].help == HELP


def test_group_quiet_is_the_commands_quiet(tmp_path):
    """`edgekit -q build` is `edgekit build -q`: the artifact's path alone, stderr empty."""
    out = tmp_path / "d.edgekit"
    args = ["build", "-t", "host", str(DIGITS_ONNX), "--calib", str(DIGITS_NPZ),
            "--format", "onnx", "-o", str(out)]
    loud = run(*args)
    assert loud.returncode == 0 and loud.stderr  # progress and notes without -q
    quiet = run("-q", *args)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.strip() == str(out) and quiet.stderr == ""


@pytest.mark.parametrize("args", [
    ["verify", "{a}"], ["inspect", "{a}"], ["bench", "{a}", "--duration", "0.1", "--threads", "1"],
    ["run", "{a}", str(SAMPLES / "3_0021.png"), "--top-k", "1"], ["targets"],
])
def test_quiet_device_commands_keep_their_results(digits_onnx_artifact, args):
    args = [a.format(a=digits_onnx_artifact) for a in args]
    proc = run(args[0], "-q", *args[1:])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() and proc.stderr == ""


def test_quiet_silences_a_commands_stderr_not_its_result_nor_errors():
    @click.command()
    @click.option("--fail", is_flag=True)
    def noisy(fail: bool) -> None:
        click.echo("a note", err=True)
        print("a library warning", file=sys.stderr)
        click.echo("the result")
        if fail:
            raise click.ClickException("the error")

    command = with_quiet(noisy)
    runner = CliRunner()
    loud = runner.invoke(command, [])
    assert "a note" in loud.stderr and "the result" in loud.stdout
    quiet = runner.invoke(command, ["-q"])
    assert quiet.exit_code == 0 and quiet.stdout == "the result\n" and quiet.stderr == ""
    failed = runner.invoke(command, ["--quiet", "--fail"])
    assert failed.exit_code == 1 and "the error" in failed.stderr
