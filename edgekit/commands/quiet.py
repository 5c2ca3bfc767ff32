"""``-q``/``--quiet``: one option shared by every command, and ``edgekit -q COMMAND``.

Quiet means results only: what a command prints on stdout (its result) stays; progress bars,
notes and warnings (stderr) go. Errors still print: ``edgekit.cli.main`` reports them after
the command has returned, outside the silenced span.

The flag lives in ``click.Context.meta``, which every context of one invocation shares, so
``edgekit -q build`` and ``edgekit build -q`` mean the same. ``with_quiet`` gives a command
the option (the CLI's group calls it for every command it loads): a command that reads the
flag itself (``build``, ``emulate``, ``bundle``, ``matrix``) declares ``quiet_option()``
among its params; any other gets it added, and its stderr is silenced while it runs.
"""

from __future__ import annotations

import contextlib
import functools
import io
from collections.abc import Callable
from typing import TypeVar

import click

QUIET_KEY = "edgekit.quiet"
HELP = "Results only: no progress, notes or warnings (errors still print)."
F = TypeVar("F", bound=Callable[..., object])


def _remember(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    quiet = bool(value) or bool(ctx.meta.get(QUIET_KEY))
    ctx.meta[QUIET_KEY] = quiet
    return quiet


def quiet_option(expose_value: bool = True) -> click.Option:
    """The shared ``--quiet/-q`` option (its value also counts ``edgekit -q``)."""
    return click.Option(["--quiet", "-q"], is_flag=True, expose_value=expose_value,
                        callback=_remember, help=HELP)


def quiet_flag(function: F) -> F:
    """Decorator form of ``quiet_option()`` for ``@click.command`` functions."""
    params = getattr(function, "__click_params__", None)
    if params is None:
        params = function.__click_params__ = []  # type: ignore[attr-defined]
    params.append(quiet_option())
    return function


def is_quiet() -> bool:
    """Whether the running command was asked to be quiet (False outside a command)."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(QUIET_KEY))


def note(message: str) -> None:
    """A message for the user, not a result: stderr, and nothing under ``-q``."""
    if not is_quiet():
        click.echo(message, err=True)


def with_quiet(command: click.Command) -> click.Command:
    """``command`` with the shared option; one without its own gets it added (once), and its
    stderr silenced while it runs quiet."""
    if any(p.name == "quiet" for p in command.params) or command.callback is None:
        return command
    command.params.append(quiet_option(expose_value=False))
    callback = command.callback

    @functools.wraps(callback)
    def maybe_silenced(*args: object, **kwargs: object) -> object:
        if not is_quiet():
            return callback(*args, **kwargs)
        with contextlib.redirect_stderr(io.StringIO()):
            return callback(*args, **kwargs)

    command.callback = maybe_silenced
    return command
