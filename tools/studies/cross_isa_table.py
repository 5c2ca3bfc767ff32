"""The cross-ISA study's rows and its printed table (tools/studies/study_cross_isa.py)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Row:
    model: str
    depth: int = 0
    fmt: str = "-"
    cpu: str = "-"
    dist: dict[str, float] = field(default_factory=dict)  # worst output's distribution
    host_db: float | None = None
    emu_db: float | None = None
    note: str = ""
    verify: str = ""  # with --verify: emulated verification of the artifact / a flipped weight


def print_table(rows: list[Row]) -> None:
    head = (f"{'model':<18}{'depth':>6}  {'format':<7}{'cpu':<5}{'=0':>8}{'<=1':>8}{'<=2':>8}"
            f"{'max':>7}{'host dB':>9}{'emu dB':>8}{'verify/flipped':>16}")
    print(head)
    print("-" * len(head))
    for r in sorted(rows, key=lambda r: (r.depth, r.model, r.fmt, r.cpu)):
        if not r.dist:
            dbs = (f" (dB vs float host {r.host_db:.1f} / emu {r.emu_db:.1f})"
                   if r.host_db is not None and r.emu_db is not None else "")
            shown = "" if not r.verify or r.note.startswith("verify") else f"; verify/flipped {r.verify}"
            print(f"{r.model:<18}{r.depth:>6}  {r.fmt:<7}{r.cpu:<5}  {r.note}{shown}{dbs}")
            continue
        d = r.dist
        db = "".join(f"{v:>9.1f}" if v is not None else f"{'-':>9}" for v in (r.host_db, r.emu_db))
        print(f"{r.model:<18}{r.depth:>6}  {r.fmt:<7}{r.cpu:<5}{d['within_0']:>8.2%}"
              f"{d['within_1']:>8.2%}{d['within_2']:>8.2%}{d['max']:>7.1f}{db}"
              f"{r.verify or '-':>16}")
    measured = [r for r in rows if r.dist]
    if measured:
        print(f"\n{len(measured)} model x format x CPU rows; worst within 1 step "
              f"{min(r.dist['within_1'] for r in measured):.2%}, worst max "
              f"{max(r.dist['max'] for r in measured):.1f} steps")
        for fmt in sorted({r.fmt for r in measured}):
            for cpu in sorted({r.cpu for r in measured}):
                sel = [r for r in measured if r.fmt == fmt and r.cpu == cpu]
                if sel:
                    print(f"  {fmt:<7}{cpu:<5} rows {len(sel):>2}: within 1 step >= "
                          f"{min(r.dist['within_1'] for r in sel):.2%}, max "
                          f"{max(r.dist['max'] for r in sel):.1f} steps")
