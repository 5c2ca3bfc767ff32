"""Option types shared by the commands: comma-separated lists and ``x``-joined sizes.

One parser for every ``--threads 1,2,auto``, ``--batch 1,4``, ``--mean 0.5,0.5,0.5``,
``--input-names a,b``, ``--size 224x224`` and ``--input-shape 1x3x224x224,1x10``: a bad
item is a click usage error (exit 2) that names the option, what it expects and what came.
"""

from __future__ import annotations

import math
from typing import Any

import click


def _option_name(param: click.Parameter | None) -> str:
    if param is None:
        return "the value"
    opts = getattr(param, "opts", None) or [param.name or "value"]
    return max(opts, key=len)  # the long form: --threads rather than -t


class CommaList(click.ParamType):
    """``"1,2,auto"`` -> ``[1, 2, "auto"]``: each item converted by ``item`` (a click type),
    words in ``keywords`` kept as strings. ``what`` and ``example`` make the error message."""

    name = "list"

    def __init__(self, item: click.ParamType, what: str, example: str,
                 keywords: tuple[str, ...] = ()) -> None:
        self.item = item
        self.what = what
        self.example = example
        self.keywords = keywords

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return self.example

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> list[Any]:
        if isinstance(value, list):  # a default already converted, or a Python caller
            return value
        text = str(value)
        parts = [p.strip() for p in text.split(",")]
        if not text.strip() or any(not p for p in parts):
            self.fail(f"{_option_name(param)} expects {self.what} separated by commas "
                      f"(e.g. {self.example}); got {text!r}", param, ctx)
        out: list[Any] = []
        for part in parts:
            if part in self.keywords:
                out.append(part)
                continue
            try:
                out.append(self.item.convert(part, param, ctx))
            except click.BadParameter:
                self.fail(f"{_option_name(param)} expects {self.what} separated by commas "
                          f"(e.g. {self.example}); got {part!r} in {text!r}", param, ctx)
        return out


class Dims(click.ParamType):
    """``"224x224"`` -> ``(224, 224)``: positive integers joined by ``x``; ``count`` of them
    when given (``--size HxW`` takes 2), any number otherwise (a tensor shape)."""

    name = "dims"

    def __init__(self, what: str, example: str, count: int | None = None) -> None:
        self.what = what
        self.example = example
        self.count = count

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return self.what

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        text = str(value)
        try:
            dims = tuple(int(d) for d in text.strip().lower().split("x"))
        except ValueError:
            dims = ()
        if not dims or any(d <= 0 for d in dims) or (self.count and len(dims) != self.count):
            self.fail(f"{_option_name(param)} expects {self.what} (positive integers joined "
                      f"by 'x') such as {self.example}, got {text!r}", param, ctx)
        return dims


class FiniteFloat(click.ParamType):
    """A finite number >= ``low`` (click's FloatRange lets ``nan`` through: every comparison
    with it is false, and ``inf`` through where there is no maximum)."""

    name = "seconds"

    def __init__(self, low: float = 0.0, what: str = "seconds") -> None:
        self.low = low
        self.what = what

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not math.isfinite(number) or number < self.low:
            self.fail(f"{_option_name(param)} expects a finite number of {self.what} >= "
                      f"{self.low:g}, got {value!r}", param, ctx)
        return number


class ThreadCount(click.ParamType):
    """Every ``--threads`` goes through this type (alone, or as the item of a ``CommaList``):
    a count >= ``minimum`` in ASCII digits (0 = the runtime's default), or 'auto' where the
    option takes it. With ``cap`` (a device command: the threads run here), a count above
    this machine's usable CPUs becomes that many, said on stderr: more threads than cores
    only slow a model down, and a runtime given 100,000 crashes. Without it (``estimate``:
    the target's threads) the count stays as given."""

    name = "threads"

    def __init__(self, minimum: int = 0, auto: bool = True, cap: bool = False) -> None:
        self.minimum = minimum
        self.auto = auto
        self.cap = cap

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int | str:
        text = str(value).strip()
        if self.auto and text == "auto":
            return text
        is_int = isinstance(value, int) and not isinstance(value, bool)
        if not (is_int or text.isascii() and text.isdigit() and len(text) <= 6) or int(
                text) < self.minimum:
            default = " (0 = the runtime's default)" if self.minimum == 0 else ""
            auto = " or 'auto'" if self.auto else ""
            self.fail(f"{_option_name(param)} expects a count >= {self.minimum}{default}"
                      f"{auto}, got {str(value)[:40]!r}", param, ctx)
        return self._capped(int(text), _option_name(param)) if self.cap else int(text)

    @staticmethod
    def _capped(count: int, option: str) -> int:
        from edgekit.runtime.stats import usable_cpus

        cpus = usable_cpus()
        if count > cpus:
            click.echo(f"{option} {count}: this machine has {cpus} usable CPU(s); using {cpus}",
                       err=True)
            return cpus
        return count


# ``run``: one count or 'auto'; ``bench``: several; ``estimate`` (host): the target's counts
THREAD_COUNT = ThreadCount(cap=True)
THREADS_OR_AUTO = CommaList(ThreadCount(minimum=1, cap=True), "counts >= 1 and/or 'auto'",
                            "1,2,4,auto")
THREAD_COUNTS = CommaList(ThreadCount(minimum=1, auto=False), "counts >= 1", "1,4")
SECONDS = FiniteFloat()
BATCH_SIZES = CommaList(click.IntRange(1), "sizes >= 1", "1,4")
FLOATS = CommaList(click.FLOAT, "numbers", "0.485,0.456,0.406")
NAMES = CommaList(click.STRING, "names", "image,mask")
IMAGE_SIZE = Dims("HxW", "224x224", count=2)
SHAPES = CommaList(Dims("a shape", "1x3x224x224"), "shapes joined by 'x'", "1x3x224x224,1x10")


class NamedShapes(click.ParamType):
    """``--input-shape``: ``"1x3x224x224,1x10"`` -> a list of shapes (in input order), or
    ``"image=1x3x640x640,sr=1"`` -> ``{name: shape}``."""

    name = "shapes"

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[NAME=]DIMS,..."

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> list[tuple[int, ...]] | dict[str, tuple[int, ...]]:
        if isinstance(value, (list, dict)):
            return value
        text = str(value)
        if "=" not in text:
            return SHAPES.convert(text, param, ctx)
        named: dict[str, tuple[int, ...]] = {}
        for part in text.split(","):
            name, eq, dims = part.strip().partition("=")
            if not eq or not name.strip():
                self.fail(f"{_option_name(param)} expects NAME=DIMS items separated by commas "
                          f"(e.g. images=1x3x640x640,sr=1); got {part!r} in {text!r}", param, ctx)
            named[name.strip()] = Dims("a shape", "1x3x224x224").convert(dims, param, ctx)
        return named


class NamedValue(click.ParamType):
    """``NAME=VALUE`` (``--const sr=16000``, ``--batch-axis state=1``) -> ``(name, value)``
    with the value converted by ``item``."""

    name = "name=value"

    def __init__(self, item: click.ParamType, example: str) -> None:
        self.item = item
        self.example = example

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "NAME=VALUE"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> tuple[str, Any]:
        if isinstance(value, tuple):
            return value
        name, eq, rest = str(value).partition("=")
        if not eq or not name.strip() or not rest.strip():
            self.fail(f"{_option_name(param)} expects NAME=VALUE such as {self.example}, got "
                      f"{value!r}", param, ctx)
        try:
            return name.strip(), self.item.convert(rest.strip(), param, ctx)
        except click.BadParameter:
            self.fail(f"{_option_name(param)} expects NAME=VALUE such as {self.example}, got "
                      f"{value!r}", param, ctx)


INPUT_SHAPES = NamedShapes()
CONST_VALUE = NamedValue(FLOATS, "sr=16000")
BATCH_AXIS = NamedValue(click.IntRange(0), "state=1")


# ``edgekit run`` and ``bench``: the command-line form of ``edgekit.load(exact_int8=False)``
FAST_INT8 = click.option(
    "--fast-int8", is_flag=True,
    help="x86 without VNNI: run an int8 ONNX model on onnxruntime's fused kernels (fast; "
         "outputs may sit a few steps from the board's) instead of unfused (exact, 4-6x slower).")
