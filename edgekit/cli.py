"""The ``edgekit`` command.

Exit codes: 0 ok; 1 a check failed (``verify``: test vectors not reproduced) or an internal
error; 2 user error (bad arguments or input; click's usage errors keep their own code 2);
3 budget not met; 130 interrupted. ``edgekit`` alone prints this help and exits 0.

Commands load lazily from the static tables in ``edgekit.commands``: device commands always,
host commands (build, estimate, calibrate-host, emulate) only where the host tools are
installed. ``edgekit --help`` lists both; on a device install the host ones are marked
host-only with the install command, and running one is a user error (exit 2) saying so.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from edgekit import __version__
from edgekit.commands import DEVICE_COMMANDS, HOST_COMMANDS, INSTALL_HOST_TOOLS, host_missing
from edgekit.commands.quiet import quiet_option, with_quiet
from edgekit.errors import BudgetError, EdgekitError, Interrupted, UserError


def host_only(name: str, missing: list[str]) -> click.Command:
    """Stands in for a host command on a device install: any arguments, one clear error."""

    def refuse(args: tuple[str, ...]) -> None:
        raise UserError(f"`edgekit {name}` runs on the host: it needs the build tools, not "
                        f"installed here (missing: {', '.join(missing)}); install them with "
                        f"{INSTALL_HOST_TOOLS}")

    return click.Command(
        name, callback=refuse, add_help_option=False,
        params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        short_help=f"[host-only: {INSTALL_HOST_TOOLS}]", help=f"Host-only: {INSTALL_HOST_TOOLS}.")


class LazyGroup(click.Group):
    """Imports a command's module only when that command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(DEVICE_COMMANDS | HOST_COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in DEVICE_COMMANDS:
            return with_quiet(importlib.import_module(DEVICE_COMMANDS[name]).command)
        if name in HOST_COMMANDS:
            missing = host_missing()
            if missing:
                return host_only(name, missing)
            return with_quiet(importlib.import_module(HOST_COMMANDS[name]).command)
        return None


@click.group(cls=LazyGroup, invoke_without_command=True, no_args_is_help=False,
             params=[quiet_option(expose_value=False)])
@click.version_option(__version__, prog_name="edgekit")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Int8 models sized to small boards, and a runtime that adapts to heat and power.

    Exit codes: 0 ok, 1 a check failed (verify) or internal error, 2 user error,
    3 budget not met, 130 interrupted."""
    if ctx.invoked_subcommand is None:  # `edgekit` alone: help, not a usage error
        click.echo(ctx.get_help())


def interrupted(cause: BaseException | None, own_process: bool) -> int:
    """Ctrl-C: say so, and what was left (a command raising ``Interrupted`` names it: "no
    artifact written"); exit 130. In a process of its own (``argv`` None: the ``edgekit``
    command) the exit skips the interpreter's teardown: the command's own cleanup has run
    (temp files and folders go in ``finally`` blocks), and torch's teardown alone took 1.8 s
    of the 2.1-2.6 s between the message and the prompt (2-core VM, loaded), where issue 35
    asks for under a second."""
    left = cause.left if isinstance(cause, Interrupted) else ""
    click.echo(f"interrupted: {left}" if left else "interrupted", err=True)
    if own_process:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(130)
    return 130


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI and turn errors into messages and exit codes."""
    try:
        cli.main(args=argv, prog_name="edgekit", standalone_mode=False)
    except click.exceptions.Abort as exc:  # click's wrapper of a KeyboardInterrupt
        return interrupted(exc.__cause__, argv is None)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except BudgetError as exc:
        click.echo(f"error: {exc}", err=True)
        if exc.table:
            click.echo(exc.table, err=True)
        return exc.exit_code
    except EdgekitError as exc:
        kind = "error" if isinstance(exc, UserError) else "internal error"
        click.echo(f"{kind}: {exc}", err=True)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        return interrupted(exc, argv is None)
    except Exception as exc:  # a bug: say so, keep the traceback for the report
        import traceback

        traceback.print_exc()
        click.echo(f"internal error (a bug in edgekit, please report): {type(exc).__name__}: {exc}",
                   err=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
