"""Build (or show) the cached arm64 sysroot that ``edgekit emulate`` runs artifacts in.

    python tools/build_sysroot.py --target rpi4            # build once, print where it is
    python tools/build_sysroot.py --target rpi4 --rebuild  # from nothing, timed
    python tools/build_sysroot.py --target rpi4 --probe    # what the emulated CPU looks like

A thin wrapper: the builder lives in ``edgekit.converters.emulation`` so that an installed
``edgekit emulate`` works outside this repository too. Cache: ``$EDGEKIT_SYSROOT_CACHE``,
else ``$XDG_CACHE_HOME/edgekit/sysroot`` (default ``~/.cache/edgekit/sysroot``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from edgekit.converters.emulation import ensure_sysroot, probe, recipe_for
from edgekit.targets import load_profile

from edgekit.errors import EdgekitError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", "-t", default="rpi4", help="target profile (default rpi4)")
    parser.add_argument("--rebuild", action="store_true", help="delete the cached one first")
    parser.add_argument("--probe", action="store_true",
                        help="also run the guest probe on the target's CPU model")
    parser.add_argument("--quiet", "-q", action="store_true")
    args = parser.parse_args(argv)

    def progress(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr, flush=True)

    try:
        profile = load_profile(args.target)
        recipe = recipe_for(profile)
        start = time.monotonic()
        sysroot = ensure_sysroot(recipe, progress=progress, rebuild=args.rebuild)
        took = time.monotonic() - start
        info = sysroot.info
        print(f"sysroot {sysroot.path} (recipe {recipe.key()}, built {info['built']} in "
              f"{info['build_seconds']} s; this call {took:.1f} s)")
        print(f"  {len(info['debs'])} debs, wheels: {', '.join(info['wheels'])}")
        if args.probe:
            print(json.dumps(probe(profile, progress), indent=2))
    except EdgekitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
