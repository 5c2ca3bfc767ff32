"""Stage prefixes, run once and reused: the budget search's memory.

A candidate of the search is a set of stage configs (``{"prune": PruneConfig(0.5),
"calibrate": CalibrateConfig(("minmax",)), "quantize": QuantizeConfig(keep_float)}``).
Two candidates that agree on the configs of the first stages of the plan share those
stages' work: the context after each stage is kept under the key ``((stage, config), ...)``
of the prefix that made it, and a later candidate forks the longest cached prefix it
agrees with and runs only the rest. So the source is read once, each pruning ratio is
prepared once, each (ratio, method) is calibrated once, and the accuracy guard's float
fallbacks re-run quantization only.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..context import BuildContext
from ..pipeline import Pipeline, Plan, StageConfig

Key = tuple[tuple[str, StageConfig | None], ...]


class PrefixCache:
    def __init__(self, plan: Plan, base: BuildContext) -> None:
        self.plan = plan
        self.base = base
        self.contexts: dict[Key, BuildContext] = {(): base}
        self.runs: dict[str, int] = {}  # stage -> times it ran (what the cache saved shows here)

    def prefix(self, until: str, configs: Mapping[str, StageConfig] | None = None
               ) -> tuple[Key, BuildContext, tuple[str, ...]]:
        """The longest cached prefix of what ``run(until, configs)`` needs: its key, its
        context, and the stages still to run after it (``search/dispatch.py`` runs them
        elsewhere)."""
        configs = dict(configs or {})
        names = self.plan.until(until)
        key: Key = ()
        ctx = self.base
        for i, name in enumerate(names):
            longer = (*key, (name, configs.get(name)))
            if longer not in self.contexts:
                return key, ctx, names[i:]
            key, ctx = longer, self.contexts[longer]
        return key, ctx, ()

    def run(self, until: str, configs: Mapping[str, StageConfig] | None = None) -> BuildContext:
        """The context after the plan's stages up to ``until`` with these configs (stages not
        named in ``configs`` take the ones ``configure`` derives from the build config).

        The returned context is shared with later calls: fork it before changing it.
        A stage raising ``pipeline.Rejected`` leaves nothing cached for its prefix."""
        configs = dict(configs or {})
        key: Key = ()
        ctx = self.base
        for name in self.plan.until(until):
            key = (*key, (name, configs.get(name)))
            cached = self.contexts.get(key)
            if cached is not None:
                ctx = cached
                continue
            ctx = ctx.fork(f"{name}-{len(self.contexts)}")
            Pipeline([name], {name: configs[name]} if name in configs else None).run(ctx)
            self.runs[name] = self.runs.get(name, 0) + 1
            self.contexts[key] = ctx
        return ctx
