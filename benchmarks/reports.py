"""Reports: numbers formatted, raw runs saved, and sections of docs/benchmarks.md rewritten."""

from __future__ import annotations

import datetime as dt
import json
import shlex
import sys
from dataclasses import asdict
from pathlib import Path

from .common import DOCS, RAW_DIR, log, on_sigterm_raise
from .load import Result, alternating_windows_parser
from .machine import machine


# ---- reports --------------------------------------------------------------------------------------

def fmt_rps(r: Result | None) -> str:
    return "-" if r is None else f"{r.rps:,.0f}" + (" ⚠" if r.noisy else "")


def machine_line(m: dict, pg_version: str | None, *, postgres: bool = True) -> str:
    return (f"{m['cores']} cores, {m['cpu_model']}, {m['ram_gib']} GiB RAM; Linux {m['kernel']}, Python {m['python']}, "
            f"aiohttp {m['aiohttp']}" + (f", PostgreSQL {pg_version or '?'} (embedded)" if postgres else "")
            + f"; commit {m['commit'] or 'unknown'}"
            + (f"; a busy thread ran {m['running_share']:.0%} of a 2 s window at the start (`harness.running_share`)"
               if m.get("running_share") is not None else ""))


def quick_banner(quick: bool) -> list[str]:
    if not quick:
        return []
    return ["> **Quick run (`--quick`): short windows on a shared, busy machine, for the shape of the "
            "section only. These numbers are noise; replace them with a full run.**", ""]


def save_raw(name: str, run: dict) -> Path:
    RAW_DIR.mkdir(parents=True, exist_ok=True)
    path = RAW_DIR / f"{name}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}.json"

    def default(o):
        return asdict(o) if hasattr(o, "__dataclass_fields__") else str(o)
    path.write_text(json.dumps(run, indent=2, default=default) + "\n")
    return path


def write_section(path: Path, heading: str, section: str) -> None:
    """Replace the section starting at the line `heading` (up to the next `## ` heading), or append it."""
    text = path.read_text() if path.exists() else (
        "# Benchmarks\n\nResults of the scripts under `benchmarks/`; each section belongs to one benchmark "
        "and is rewritten by it.\n")
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
    if start is None:
        new = text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    else:
        end = next((j for j in range(start + 1, len(lines)) if lines[j].startswith("## ")), len(lines))
        before, after = "\n".join(lines[:start]), "\n".join(lines[end:])
        new = (before.rstrip("\n") + "\n\n" if before.strip() else "") + section.rstrip("\n") + "\n"
        if after.strip():
            new += "\n" + after.rstrip("\n") + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(new)
    tmp.replace(path)


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def alternating_windows_main(name: str, description: str, rounds: int, run, markdown, heading: str) -> None:
    """The whole of a benchmark of alternating windows that needs no database: parse its flags,
    `run(args)`, and publish `markdown` of the result as `python -m benchmarks.NAME`'s section."""
    args = alternating_windows_parser(description, rounds=rounds).parse_args()
    on_sigterm_raise()
    info, date = machine(), now_utc()
    command = shlex.join(["python", "-m", f"benchmarks.{name}", *sys.argv[1:]])
    run_info = {"date": date, "command": command, "machine": info, "seconds": args.seconds, "rounds": args.rounds,
                **run(args)}
    publish(name, run_info, markdown, DOCS, heading, to_docs=not args.no_docs)


def publish(name: str, run: dict, markdown, out: Path, heading: str, *, to_docs: bool) -> None:
    """Keep the raw numbers, print the Markdown section, and (unless `to_docs` is off) write it into `out`."""
    run["raw_file"] = save_raw(name, run).name
    section = markdown(run)
    log("\n" + section)
    if to_docs:
        write_section(out, heading, section)
        log(f"wrote '{heading[3:]}' in {out}")
