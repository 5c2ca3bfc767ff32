"""``python -m tools.realzoo [--models a,b] [--smoke] [--out docs/realzoo.md] [--timeout S]``."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from .accepted import run_accepted
from .materialize import materialize_all, source_path, work_dir
from .registry import MODELS
from .suite import recurrent_ops, remeasure, run_model
from .table import markdown, summary, summary_text

REPO = Path(__file__).resolve().parents[2]


def write_table(rows: list[dict], command: str, out: Path, title: str) -> None:
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(markdown(rows, command, REPO, title))
    os.replace(tmp, out)


def render(files: list[str], out: Path, title: str) -> int:
    """Merge runs (e.g. a model added after the main run) into one table."""
    rows: dict[str, dict] = {}
    commands = []
    for name in files:
        data = json.loads(Path(name).read_text())
        commands.append(data["command"])
        rows.update({r["model"]: r for r in data["rows"]})
    for name, row in rows.items():  # rows of runs made before the field existed
        if "recurrent" not in row and name in MODELS:
            row["recurrent"] = recurrent_ops(source_path(MODELS[name]))
    merged = list(rows.values())
    write_table(merged, " ; ".join(commands), out, title)
    print(summary_text(summary(merged)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.realzoo", description=__doc__)
    parser.add_argument("--models", help=f"comma-separated, of: {', '.join(MODELS)}")
    parser.add_argument("--smoke", action="store_true",
                        help="the CI subset: " + ", ".join(n for n, m in MODELS.items() if m.smoke))
    parser.add_argument("--group", default="suite", choices=sorted({m.group for m in MODELS.values()}),
                        help="without --models: the models of this group (unseen: added after "
                        "the suite was tuned, tools/realzoo/unseen.py)")
    parser.add_argument("--out", default="docs/realzoo.md", help="the table (markdown)")
    parser.add_argument("--json", help="raw rows (default: WORK/results.json)")
    parser.add_argument("--timeout", type=float, default=360.0, help="seconds per step")
    parser.add_argument("--title", default="Real-model suite")
    parser.add_argument("--materialize-only", action="store_true",
                        help="only lay out sources and data (WORK/INDEX.md)")
    parser.add_argument("--render", help="only write --out from these results JSON files "
                        "(comma-separated; rows of later files replace earlier ones by model)")
    parser.add_argument("--remeasure", help="re-run only the metrics of --models on the "
                        "artifacts already built, updating the rows of this results JSON")
    parser.add_argument("--accept-refused", metavar="JSON",
                        help="for the budget-refused rows of this results JSON, build again "
                        "with --accept-accuracy-drop --guard-time 0 and add what that ships")
    parser.add_argument("-q", "--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.render:
        return render(args.render.split(","), Path(args.out), args.title)
    if args.models:
        names = args.models.split(",")
        unknown = [n for n in names if n not in MODELS]
        if unknown:
            parser.error(f"unknown model(s) {unknown}; known: {', '.join(MODELS)}")
    elif args.smoke:
        names = [n for n, m in MODELS.items() if m.smoke]
    else:
        names = [n for n, m in MODELS.items() if m.group == args.group]
    materialize_all(names)
    if args.materialize_only:
        return 0
    runs = work_dir() / "runs"
    if args.accept_refused:
        path = Path(args.accept_refused)
        data = json.loads(path.read_text())
        for row in data["rows"]:
            if row["model"] in names and row.get("kind") == "budget refusal":
                if not args.quiet:
                    print(f"[{row['model']}] accepted build ...", flush=True)
                row["accepted"] = run_accepted(MODELS[row["model"]], runs, args.timeout)
                path.write_text(json.dumps(data, indent=1, default=str))
        return render([str(path)], Path(args.out), args.title)
    if args.remeasure:
        path = Path(args.remeasure)
        data = json.loads(path.read_text())
        for row in data["rows"]:
            if row["model"] in names:
                remeasure(row, MODELS[row["model"]], runs, args.timeout)
        data["summary"] = summary(data["rows"])
        path.write_text(json.dumps(data, indent=1, default=str))
        return render([str(path)], Path(args.out), args.title)
    rows = []
    for name in names:
        if not args.quiet:
            print(f"[{name}] building ...", flush=True)
        row = run_model(MODELS[name], runs, args.timeout)
        rows.append(row)
        if not args.quiet:
            m = row.get("metrics") or {}
            print(f"[{name}] {row.get('kind')} ({row.get('stage')}) "
                  f"{(row.get('build') or {}).get('seconds')} s; float "
                  f"{(m.get('float') or {}).get('text', '-')}; int8 "
                  f"{(m.get('int8') or {}).get('text', '-')}; peer "
                  f"{(m.get('peer') or {}).get('text', '-')}; emulate "
                  f"{(row.get('emulate') or {}).get('pass', '-')}"
                  + (f"\n    {row['error']}" if row.get("error") else ""), flush=True)
    command = "python -m tools.realzoo " + shlex.join(sys.argv[1:] if argv is None else argv)
    json_path = Path(args.json) if args.json else work_dir() / "results.json"
    json_path.write_text(json.dumps({"command": command, "summary": summary(rows), "rows": rows},
                                    indent=1, default=str))
    write_table(rows, command, Path(args.out), args.title)
    print(summary_text(summary(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
