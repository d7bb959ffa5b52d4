"""Keep an executed run of the series in the repository: its notebooks and report in docs/runs/NAME, its results and
tables in docs/data, with the machine's own paths written as a reader's (the run folder as runs/NAME, the checkout as
$PWD, the machine's binaries by their names (--bin-dir)) and the committed markdown in each recorded notebook.

    python scripts/record_run.py RUN_DIR NAME [--only 14 15] [--data-prefix h200_2026-12-02d] [--root PATH]
                                 [--bin-dir DIR ...] [--replace OLD=NEW ...]

RUN_DIR is a finished run folder (`./tutorial series`, scripts/gpu_local_run.sh, or the ci run of the tests);
--root is the checkout the run executed from, when it is not this one (a device machine's copy, a CI clone).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS, RUNS, DATA = ROOT / "notebooks", ROOT / "docs" / "runs", ROOT / "docs" / "data"


def replacements(run_dir: Path, name: str, roots: list[Path], extra: list[tuple[str, str]],
                 bin_dirs: list[Path] = ()) -> list[tuple[str, str]]:
    """(old, new) pairs, longest first, so the run folder (often inside a root) is rewritten before its root; a
    binary in one of `bin_dirs` (where the machine that ran it kept tritonserver, perf_analyzer) by its name alone."""
    pairs = [(str(run_dir), f"runs/{name}"), *((f"{d}/", "") for d in bin_dirs), *((f"{r}/", "$PWD/") for r in roots),
             *((str(r), "$PWD") for r in roots), *extra]
    return sorted(dict(pairs).items(), key=lambda p: -len(p[0]))


def rewrite(text: str, pairs: list[tuple[str, str]]) -> str:
    """`text` with every old string of `pairs` replaced by its new one."""
    for old, new in pairs:
        text = text.replace(old, new)
    return text


def with_committed_markdown(recorded: dict, committed: dict) -> dict:
    """The recorded notebook with each markdown cell's text taken from the committed cell of the same id."""
    texts = {c.get("id"): c["source"] for c in committed["cells"] if c["cell_type"] == "markdown" and c.get("id")}
    for cell in recorded["cells"]:
        if cell["cell_type"] == "markdown" and cell.get("id") in texts:
            cell["source"] = texts[cell["id"]]
    return recorded


def record(run_dir: Path, name: str, *, only: list[str] | None = None, data_prefix: str | None = None,
           roots: list[Path] | None = None, extra: list[tuple[str, str]] | None = None,
           bin_dirs: list[Path] | None = None) -> list[Path]:
    """Copy the run's notebooks (rewritten), report and data into the repository; returns the files written."""
    run_dir = run_dir.resolve()
    executed = sorted(p for p in run_dir.glob("*.ipynb") if not only or any(p.stem.startswith(o) for o in only))
    if not executed:
        raise FileNotFoundError(f"no executed notebook{' matching ' + str(only) if only else ''} in {run_dir}: "
                                f"expected files like 14_near_the_limit.ipynb there")
    pairs = replacements(run_dir, name, [ROOT, *(roots or [])], extra or [], bin_dirs or [])
    target = RUNS / name
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for path in executed:
        committed = NOTEBOOKS / path.name
        if not committed.exists():
            raise FileNotFoundError(f"{path.name} has no committed notebook: expected {committed}")
        nb = with_committed_markdown(json.loads(rewrite(path.read_text(), [(json.dumps(o)[1:-1], json.dumps(n)[1:-1])
                                                                            for o, n in pairs])),
                                     json.loads(committed.read_text()))
        out = target / path.name
        out.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        written.append(out)
    for report in sorted(run_dir.glob("report*.md")):
        (target / report.name).write_text(rewrite(report.read_text(), pairs))
        written.append(target / report.name)
    if data_prefix:
        stems = {p.stem[:2]: p.stem for p in executed}
        for prefix, stem in stems.items():
            results = run_dir / "results" / f"{stem}.json"
            if results.exists():
                out = DATA / f"{data_prefix}_{prefix}_results.json"
                out.write_text(rewrite(results.read_text(), [(json.dumps(o)[1:-1], json.dumps(n)[1:-1]) for o, n in pairs]))
                written.append(out)
            for table in sorted(run_dir.glob(f"{prefix}_*.csv")):
                shutil.copyfile(table, DATA / f"{data_prefix}_{table.name}")
                written.append(DATA / f"{data_prefix}_{table.name}")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("name", help="the folder under docs/runs, e.g. h200-2026-12-02d")
    parser.add_argument("--only", nargs="*", help="notebook prefixes to keep, e.g. 14 15")
    parser.add_argument("--data-prefix", help="copy results/*.json and NN_*.csv to docs/data/<prefix>_...")
    parser.add_argument("--root", action="append", type=Path, default=[], help="the checkout the run executed from")
    parser.add_argument("--bin-dir", action="append", type=Path, default=[],
                        help="a folder of the machine's binaries (tritonserver, perf_analyzer): named alone")
    parser.add_argument("--replace", action="append", default=[], help="OLD=NEW, one more rewrite")
    ns = parser.parse_args(argv)
    extra = []
    for item in ns.replace:
        if "=" not in item:
            parser.error(f"--replace takes OLD=NEW; got {item!r}")
        extra.append(tuple(item.split("=", 1)))
    for path in record(ns.run_dir, ns.name, only=ns.only, data_prefix=ns.data_prefix, roots=ns.root, extra=extra,
                       bin_dirs=ns.bin_dir):
        print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
