"""The manual and the tools/ tree stay what issue 32 made them: a README of at most 350 lines whose
quick start is the two setup commands, a tools/ root of setup scripts only, and no reference in
the docs, the README or the code to a tools/ file that is not there (the move left none)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools"
# a tools/ path as docs and comments write it: tools/quickstart.sh, tools/benchmarks/bench_peers.py, tools/zoo/
TOOLS_PATH = re.compile(r"(?<![\w/.])tools/[\w./-]*[\w/]")


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    return [ROOT / name for name in out]


def test_readme_is_a_short_manual_whose_quick_start_is_the_two_setup_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 350
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = quick.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["bash tools/quickstart.sh", "bash tools/test.sh"]
    assert "bash tools/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_tools_root_holds_only_setup_scripts():
    files = sorted(p.name for p in TOOLS.iterdir() if p.is_file())
    assert len(files) <= 8, files
    assert all(name.endswith(".sh") or name == "build_sysroot.py"
               for name in files), files
    assert not list(TOOLS.glob("bench_*.py"))


def test_the_move_map_names_files_that_are_where_it_says():
    for line in (ROOT / "docs" / "moves" / "tools.txt").read_text().splitlines():
        old, new = line.split()
        assert (ROOT / new).exists(), new
        assert not (ROOT / old).exists(), old


def exists(path: str) -> bool:
    """A file or folder, a prefix written before a pattern (``tools/fixtures/trained/ctc.{pt,onnx}``,
    ``bench_<x>.py``) or a module's attribute (``tools/studies/soak_fake_board.Heater``)."""
    module = path.rsplit(".", 1)[0] + ".py"
    return ((ROOT / path).exists() or any(ROOT.glob(path + "*"))
            or ("." in path and (ROOT / module).exists()))


def test_every_tools_path_in_docs_readme_and_code_exists():
    sources = tracked("README.md", "docs/*.md", "*.py", "*.sh", "*.toml", ".ci/run")
    missing = set()
    for source in sources:
        if source.name == "tools_moves.txt" or not source.is_file():
            continue
        for match in TOOLS_PATH.finditer(source.read_text(errors="replace")):
            path = match.group(0).rstrip(".")
            if path.endswith(("/x.py", "/bench_x.py")):  # the placeholder of a usage line
                continue
            if not exists(path):
                missing.add(f"{source.relative_to(ROOT)}: {path}")
    assert not missing, sorted(missing)
