"""Run the numbered notebooks with papermill into a run folder, with parameter profiles, and write a short report."""
from __future__ import annotations

import ast
import json
import os
import queue
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
PROFILES_FILE = NOTEBOOK_DIR / "profiles.yml"


def notebooks() -> list[Path]:
    """The numbered notebooks in run order."""
    return sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))


def resolve_device(device: str = "auto") -> str:
    """`cpu` or `cuda`; `auto` picks cuda when PyTorch sees a GPU."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda; got {device!r}")
    if device != "cpu":
        import torch

        if torch.cuda.is_available():
            return "cuda"
        if device == "cuda":
            raise RuntimeError("device='cuda' asked for, but PyTorch sees no CUDA GPU here")
    return "cpu"


def instance_kind(runtime: str, device: str) -> str:
    """Where the server runs a model: on the GPU in docker mode (the runtime needs one), else where `device` says.

    Not where this kernel's PyTorch can run: the host's PyTorch may not see a GPU the containers can use (a CUDA 13
    build of PyTorch needs driver 580; NGC 24.05 containers run on 545)."""
    if runtime not in ("docker", "local"):
        raise ValueError(f"runtime must be a resolved 'docker' or 'local'; got {runtime!r}")
    return "KIND_GPU" if runtime == "docker" or device == "cuda" else "KIND_CPU"


def profile_parameters(profile: str | None, notebook: str) -> dict:
    """Parameters a profile of notebooks/profiles.yml sets for one notebook (its `all` entry, then the notebook's)."""
    if not profile:
        return {}
    import yaml

    profiles = yaml.safe_load(PROFILES_FILE.read_text())
    if profile not in profiles:
        raise ValueError(f"profile must be one of {sorted(profiles)} (from {PROFILES_FILE}); got {profile!r}")
    entry = profiles[profile] or {}
    return {**(entry.get("all") or {}), **(entry.get(notebook) or {})}


def auto_profile() -> tuple[str | None, str]:
    """The profile that fits this machine, and why: Docker + GPU -> the article's sweeps (no profile); a GPU
    without Docker -> gpu-local; CPU only -> ci (short sweeps)."""
    from .runtime import choose_runtime

    choice = choose_runtime("auto")
    if choice.name == "docker":
        return None, f"{choice}: the notebooks' own parameters (the article's 16 concurrency levels, count windows)"
    import torch

    if torch.cuda.is_available():
        return "gpu-local", f"{choice}; PyTorch sees {torch.cuda.get_device_name(0)}: GPU profile, sweeps of 4 levels"
    return "ci", f"{choice}; no GPU: the CPU profile (short sweeps; the article's 16-level sweeps take far longer on a CPU)"


def expected_duration(profile: str | None) -> str:
    """What a whole series took with this profile when it was last measured (notebooks/profiles.yml `about`). Its
    {minutes}, {seconds}, {count}, {recorded} and {machine} are filled from the recorded runs' reports and run.json
    (`recorded:`), so the time and the machine printed are the ones on record, not a copy of them."""
    import yaml

    entry = yaml.safe_load(PROFILES_FILE.read_text()).get(profile or "", {}) or {}
    about = entry.get("about", "not measured for this profile yet")
    if "{" not in about:
        return about
    times = recorded_seconds(profile)
    if not times:
        raise ValueError(f"profile {profile!r}: `about` quotes the recorded runs' times, but `recorded:` names none")
    total = sum(times.values())
    ranges = []
    for name, seen in recorded_ranges(profile).items():
        low, high = f"{min(seen):.0f}", f"{max(seen):.0f}"
        ranges.append(f"{name[:2]}: {low if low == high else f'{low}-{high}'} s")
    first, last = min(times)[:2], max(times)[:2]
    return about.format(minutes=f"{total / 60:.0f}", seconds=f"{total:.0f}", count=len(times),
                        notebooks=first if first == last else f"{first}-{last}", ranges=", ".join(ranges),
                        recorded=", ".join(entry.get("recorded", [])), machine=recorded_machine(profile))


def recorded_machine(profile: str | None) -> str:
    """The GPU (else the CPU cores) the profile's last recorded run ran on, from its run.json, as a noun without an
    article ('NVIDIA H200', 'CPU (2 cores)'); 'machine (not recorded)' when no recorded folder names one."""
    for folder in reversed(_recorded_folders(profile)):
        if (folder / RUN_FILE).exists():
            found = json.loads((folder / RUN_FILE).read_text()).get("machine") or {}
            if found.get("gpu"):
                return found["gpu"]
            if found.get("cpu_cores"):
                return f"CPU ({found['cpu_cores']} cores)"
    return "machine (not recorded)"


def recorded_ranges(profile: str | None) -> dict[str, list[float]]:
    """Every recorded time (s) of each notebook in the runs a profile names (`recorded:`), from their run.json (or
    report*.md where a run has none)."""
    seen: dict[str, list[float]] = {}
    for folder in _recorded_folders(profile):
        for name, sec in _folder_seconds(folder).items():
            seen.setdefault(name, []).append(sec)
    return dict(sorted(seen.items()))


def _recorded_folders(profile: str | None) -> list[Path]:
    """The recorded run folders a profile names (`recorded:` in profiles.yml)."""
    import yaml

    entry = yaml.safe_load(PROFILES_FILE.read_text()).get(profile or "", {}) or {}
    return [ROOT / folder for folder in entry.get("recorded", [])]


def _folder_seconds(folder: Path) -> dict[str, float]:
    """Each notebook that ran ok in a recorded run folder, with its seconds: from run.json, else its report*.md."""
    run_file = folder / RUN_FILE
    if run_file.exists():
        entries = json.loads(run_file.read_text()).get("notebooks", {})
        return {name: float(e["seconds"]) for name, e in sorted(entries.items()) if e.get("status") == "ok"}
    reports = sorted(folder.glob("report*.md"))
    if not reports:
        raise FileNotFoundError(f"the recorded run {folder} has neither {RUN_FILE} nor a report.md")
    times: dict[str, float] = {}
    for report in reports:
        times.update({name: float(sec) for name, sec in REPORT_ROW.findall(report.read_text())})
    return times


def save_results(run_dir: str | Path, notebook: str, results: dict) -> None:
    """Store a notebook's key numbers as results/<notebook>.json in the run folder, for the report."""
    path = Path(run_dir) / "results" / f"{notebook}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str))
    print(f"results saved to {path}")


REPORT_ROW = re.compile(r"^\| (\d\d_\w+) \| ok \| (\d+) \|", re.M)


def recorded_seconds(profile: str | None) -> dict[str, float]:
    """Each notebook's time (s) in the recorded runs a profile names (`recorded:` in profiles.yml; a later run wins):
    what a run of this profile is expected to take."""
    times: dict[str, float] = {}
    for folder in _recorded_folders(profile):
        times.update(_folder_seconds(folder))
    return times


RUN_FILE = "run.json"  # what a run folder ran: commit, trees, machine, profile, each notebook's seconds and status


def update_run_file(run_dir: Path, notebook: str, status: str, seconds: float, profile: str | None,
                    trees: dict[str, str], machine: dict, call: str | None = None) -> Path:
    """Add one finished notebook to `run_dir`/run.json (created on the first; chained calls into one folder add
    theirs): its seconds, status, profile, the trees of notebooks/, helpers/ and scripts/ it ran with, the machine it
    ran on, and the call of the series runner it ran in (when that call started, UTC). The run's own trees and
    machine are set only while every notebook shares them (None otherwise)."""
    from . import recordings

    path = run_dir / RUN_FILE
    run = json.loads(path.read_text()) if path.exists() else {"notebooks": {}}
    for entry in run["notebooks"].values():  # an entry written before run.json kept each notebook's machine
        entry.setdefault("machine", run.get("machine"))
    run["notebooks"][notebook] = {"seconds": round(seconds, 1), "status": status, "profile": profile or "article",
                                  "trees": trees, "machine": machine, **({"call": call} if call else {})}
    ran = [entry["trees"] for entry in run["notebooks"].values()]
    same = trees if all(t == trees for t in ran) else None
    head = {folder: recordings.git_output("rev-parse", f"HEAD:{folder}") for folder in trees}
    commit = recordings.git_output("rev-parse", "HEAD") if same and all(
        (head[f] or "").strip() == trees[f] for f in trees) else None
    machines = [entry["machine"] for entry in run["notebooks"].values()]
    one_machine = machine if all(m == machine for m in machines) else None
    run.update(commit=commit.strip() if commit else None, trees=same, machine=one_machine, profile=profile or "article")
    run["notebooks"] = dict(sorted(run["notebooks"].items()))
    path.write_text(json.dumps({key: run[key] for key in RUN_KEYS if key in run}, indent=2) + "\n")
    return path


RUN_KEYS = ("world", "commit", "trees", "machine", "profile", "notebooks", "note")  # run.json's keys, in order


def on_failure(profile: str | None) -> str:
    """What a failed notebook does to the rest of the run: `stop` (skip the rest; the default) or `continue`."""
    import yaml

    entry = yaml.safe_load(PROFILES_FILE.read_text()).get(profile or "", {}) or {}
    action = entry.get("on_failure", "stop")
    if action not in ("stop", "continue"):
        raise ValueError(f"profile {profile!r}: on_failure must be 'stop' or 'continue'; got {action!r}")
    return action


def write_report(run_dir: Path, rows: list[dict]) -> Path:
    """report.md: the machine, each notebook's status, time and expected time (with those of earlier calls into the
    same folder, from run.json), then the numbers the notebooks saved."""
    run_file = run_dir / RUN_FILE
    run = json.loads(run_file.read_text()) if run_file.exists() else {}
    now = {r["notebook"] for r in rows}
    earlier = [{"notebook": stem, "status": entry.get("status", "?"), "seconds": entry.get("seconds", 0.0),
                "expected": None} for stem, entry in (run.get("notebooks") or {}).items() if stem not in now]
    machine = run.get("machine") or {}
    where = ", ".join(filter(None, [machine.get("gpu") or ("no GPU" if machine else ""),
                                    f"{machine['cpu_cores']} CPU cores" if machine.get("cpu_cores") else "",
                                    f"{run['profile']} profile" if run.get("profile") else ""]))
    lines = [f"# Run {run_dir.name}", "", *([f"Machine: {where}.", ""] if where else []),
             "| notebook | status | seconds | expected (s) |", "|---|---|---|---|"]
    lines += [f"| {r['notebook']} | {r['status']} | {round(r['seconds'], 1):.0f} | "  # as run.json keeps it, so pages agree
              f"{'' if r.get('expected') is None else format(r['expected'], '.0f')} |"
              for r in sorted([*earlier, *rows], key=lambda r: r["notebook"])]
    for path in sorted((run_dir / "results").glob("*.json")):
        lines += ["", f"## {path.stem}", "", "```json", path.read_text().strip(), "```"]
    report = run_dir / "report.md"
    report.write_text("\n".join(lines) + "\n")
    return report


class SeriesFailed(RuntimeError):
    """One or more notebooks of a run failed; the report and the executed notebooks say where."""


def _kernel_manager(log: Path) -> type:
    """A kernel manager whose kernels listen on IPC sockets (no TCP ports to race for, no "running over TCP without
    encryption" warning) and write their own stdout/stderr (TensorFlow's and Triton's C++ logs) to `log`, not to the
    console. A notebook's outputs still land in the executed notebook, as with papermill's default."""
    from jupyter_client.manager import AsyncKernelManager

    class LoggedKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            self._sockets = tempfile.mkdtemp(prefix="nb-")  # short: a socket path has at most 107 bytes
            super().__init__(transport="ipc", ip=os.path.join(self._sockets, "k"), **kwargs)
            self.clients = []  # this kernel's clients, closed when the kernel is let go

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
            with open(log, "ab") as handle:  # the kernel keeps its own copy of the descriptor
                kw.update(stdout=handle, stderr=handle)
                await super()._async_launch_kernel(kernel_cmd, **kw)

        async def _async_cleanup_resources(self, restart: bool = False) -> None:
            await super()._async_cleanup_resources(restart)
            if not restart:
                shutil.rmtree(self._sockets, ignore_errors=True)

        cleanup_resources = _async_cleanup_resources  # jupyter_client binds its own under the public name

        def client(self, **kwargs):
            """A client of this kernel, kept so that its channels can be closed when the kernel is let go."""
            self.clients.append(super().client(**kwargs))
            return self.clients[-1]

    return LoggedKernelManager


def leading_imports(nb: str | Path) -> list[str]:
    """The import statements a notebook begins with (its parameters and header cells skipped), up to its first other statement:
    run earlier, they do what they would do at the top of the notebook, since nothing before them can change them."""
    found = []
    for cell in json.loads(Path(nb).read_text())["cells"]:
        if cell["cell_type"] != "code" or {"parameters", "injected-parameters", "header"} & set(cell["metadata"].get("tags", [])):
            continue
        try:
            body = ast.parse("".join(cell["source"])).body
        except SyntaxError:  # IPython's own syntax (a magic or a shell line): not plain Python, so not run ahead
            return found
        for statement in body:
            plain = isinstance(statement, ast.Import) or (
                isinstance(statement, ast.ImportFrom) and not statement.level and statement.module != "__future__"
                and all(alias.name != "*" for alias in statement.names))
            if not plain:
                return found
            found.append(ast.unparse(statement))
    return found


def warm_up_code(statements: list[str]) -> str:
    """The statements inside a function that is called and deleted: the modules are loaded, no name is left."""
    body = "\n".join(f"    {line}" for line in statements)
    return f"def _series_warm_up():\n{body}\n\n\n_series_warm_up()\ndel _series_warm_up\n"


def _ran_for(reply: dict | None) -> str:
    """"ran in N s, " from an execute reply (ipykernel's `started` metadata to the reply's date), else ""."""
    from datetime import datetime

    started = (reply or {}).get("metadata", {}).get("started")
    ended = (reply or {}).get("header", {}).get("date")
    if not isinstance(started, str) or not isinstance(ended, datetime):
        return ""
    return f"ran in {(ended - datetime.fromisoformat(started)).total_seconds():.1f} s, "


WARM_UP_TIMEOUT_S = 300.0  # the longest a notebook waits for its kernel's imports to finish before it takes a fresh one


TIMED_TAG = "timed"  # a cell that measures time or throughput: the runner's own work is finished before it runs


class _Kernels:
    """Each notebook's own fresh kernel, started while the notebook before it runs and left to exit while the next
    one runs: a kernel's start (about 1.5 s on 2 cores) and a TensorFlow or PyTorch kernel's exit (1.4-2 s) overlap
    the work of a neighbour instead of adding to the series' time. A kernel started ahead also runs the import
    statements its notebook begins with (leading_imports; TensorFlow alone takes 12 s here). None of that overlaps a
    measurement: before a cell tagged `timed` runs, hush() waits for the imports sent ahead and for the kernels
    asked to exit. If the imports fail, the notebook gets a fresh kernel and meets the error itself. Each start,
    warm-up and shutdown request is a line of the run's log."""

    def __init__(self, manager: type, kernel: str, log: Path):
        self.manager, self.kernel, self.log = manager, kernel, log
        self.ahead: dict[Path, object] = {}  # started, not yet used
        self.warming: dict[object, tuple] = {}  # kernel -> (its notebook, client, request id) of the imports sent
        self.warmed: dict[object, bool] = {}  # kernel -> whether those imports ran, once waited for
        self.exiting: list = []  # asked to shut down, not yet reaped

    def _say(self, line: str) -> None:
        with open(self.log, "a") as handle:
            handle.write(f"-- {line}\n")

    def _start(self, nb: Path):
        from jupyter_core.utils import run_sync

        km = self.manager(kernel_name=self.kernel)
        try:
            # as nbclient starts one: in the notebook's folder, IPython's history in memory (two kernels at once)
            run_sync(km.start_kernel)(cwd=str(nb.parent), extra_arguments=["--HistoryManager.hist_file=:memory:"])
        except BaseException:
            run_sync(km.shutdown_kernel)(now=True)  # a launched process, its files and socket folder: gone
            raise
        self._say(f"kernel {km.provisioner.process.pid} started for {nb.name}")
        return km

    def take(self, nb: Path):
        """The kernel for `nb`: the one started ahead (settle() waits for its imports), or a new one."""
        return self.ahead.pop(nb, None) or self._start(nb)

    def settle(self, nb: Path, km):
        """The kernel to run `nb` in: `km` once the imports sent ahead to it have run, else a fresh one (`km` is
        released). Called after the next notebook's kernel is started, so that its imports run meanwhile."""
        if km in self.warming:
            self._wait_for_imports(km, "before the notebook")
        if self.warmed.pop(km, True):
            return km
        self.release(km)
        return self._start(nb)

    def hush(self, why: str) -> None:
        """Finish the runner's work in the background (the imports sent ahead, the kernels asked to exit), so that a
        measurement that follows has the machine to itself."""
        for km in list(self.warming):
            self._wait_for_imports(km, why)
        self.reap()

    def prefetch(self, following: Path) -> None:
        """Start the kernel of the notebook that runs next and send it that notebook's leading imports; if it cannot
        start, that notebook tries again (and fails there, with the error)."""
        if following in self.ahead:
            return
        try:
            self.ahead[following] = km = self._start(following)
        except Exception as error:
            self._say(f"the kernel for {following.name} did not start ahead ({type(error).__name__}: {error}); "
                      "it is started again when its turn comes")
            return
        statements = leading_imports(following)
        if not statements:
            return
        try:
            client = km.client()
            client.start_channels()
            request = client.execute(warm_up_code(statements), silent=True, store_history=False, allow_stdin=False)
        except Exception as error:  # the kernel is still fresh: the notebook runs its imports itself
            self._say(f"the imports of {following.name} were not sent ahead ({type(error).__name__}: {error})")
            return
        self.warming[km] = (following, client, request)
        self._say(f"kernel {km.provisioner.process.pid} runs the {len(statements)} import statements "
                  f"{following.name} begins with")

    def _wait_for_imports(self, km, why: str) -> None:
        """Wait for the imports sent ahead to `km`; whether they ran goes to `warmed` (else `km` is not to be used)."""
        from jupyter_core.utils import run_sync

        nb, client, request = self.warming.pop(km)
        pid, waiting, reply = km.provisioner.process.pid, time.monotonic(), None
        try:
            while reply is None and time.monotonic() - waiting < WARM_UP_TIMEOUT_S and run_sync(km.is_alive)():
                try:
                    message = run_sync(client.get_shell_msg)(timeout=1.0)
                except queue.Empty:
                    continue
                if message["parent_header"].get("msg_id") == request:  # the reply to this request, not another
                    reply = message
            output = self._output_of(client, request) if reply is not None else ""
        finally:
            client.stop_channels()
        took = f"{_ran_for(reply)}{time.monotonic() - waiting:.1f} s waited for them {why}"
        reply = reply["content"] if reply is not None else None
        self.warmed[km] = reply is not None and reply["status"] == "ok"
        if self.warmed[km]:
            self._say(f"kernel {pid}: {nb.name}'s imports ran ahead ({took})"
                      + (f"; they printed:\n{output}" if output else ""))
            return
        why_not = (f"{reply.get('ename')}: {reply.get('evalue')}" if reply is not None else
                   "no reply" if run_sync(km.is_alive)() else "the kernel died")
        self._say(f"kernel {pid}: {nb.name}'s imports ahead failed ({why_not}, {took}); a fresh kernel runs it")

    @staticmethod
    def _output_of(client, request: str, timeout: float = 2.0) -> str:
        """What a request printed (its stream and error messages), up to the kernel's idle status for it."""
        from jupyter_core.utils import run_sync

        texts, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                message = run_sync(client.get_iopub_msg)(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                break
            if message["parent_header"].get("msg_id") != request:
                continue
            content = message["content"]
            if message["msg_type"] == "stream":
                texts.append(content["text"])
            elif message["msg_type"] == "error":
                texts.append("\n".join(content.get("traceback", [])))
            elif message["msg_type"] == "status" and content.get("execution_state") == "idle":
                break
        return "".join(texts).rstrip()

    def release(self, km) -> None:
        """Close the clients of a used kernel and ask it to shut down; it exits on its own while the next runs."""
        import asyncio

        from jupyter_core.utils import ensure_event_loop, run_sync

        try:
            asyncio.get_running_loop()
        except RuntimeError:  # none running here, so jupyter_core's loop for this thread is the runner's own
            loop = ensure_event_loop()
            left = asyncio.all_tasks(loop)  # an interrupted cell's execution and polling: ended, errors collected
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        if km in self.exiting:  # released already (its fresh replacement failed to start)
            return
        for made in km.clients:
            made.stop_channels()
        self.exiting.append(km)
        if run_sync(km.is_alive)():
            run_sync(km.interrupt_kernel)()  # as jupyter_client's shutdown does: a cell still running (Ctrl-C) stops
            run_sync(km.request_shutdown)()
            self._say(f"kernel {km.provisioner.process.pid} asked to shut down")

    def reap(self, but=None) -> None:
        """Wait for the kernels asked to shut down, all `but` one (signals after jupyter_client's grace time), and
        remove their files."""
        from jupyter_core.utils import run_sync

        for km in [k for k in self.exiting if k is not but]:
            self.exiting.remove(km)
            try:
                run_sync(km.finish_shutdown)()
            finally:
                run_sync(km.cleanup_resources)()

    def close(self) -> None:
        """Stop every kernel started ahead and not used, and reap the exiting ones."""
        from jupyter_core.utils import run_sync

        try:
            while self.ahead:
                _, km = self.ahead.popitem()
                self.warming.pop(km, None)
                for made in km.clients:  # the imports' client among them
                    made.stop_channels()
                run_sync(km.shutdown_kernel)(now=True)
        finally:
            self.reap()


class _Line:
    """One console line per notebook: on a terminal it shows the cell being run and the time so far, redrawn each
    second; elsewhere (CI logs, pipes) the name, then the outcome on the same line when the notebook ends."""

    def __init__(self, name: str, stream=None, width: int = 30):
        self.name, self.stream, self.width = name, stream or sys.stdout, width
        self.tty = self.stream.isatty()
        self.cell, self.cells, self.start = 0, 0, time.monotonic()
        self._done = threading.Event()
        if self.tty:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        else:
            self.stream.write(f"  {name:<{width}} ")
            self.stream.flush()

    def _tick(self) -> None:
        while not self._done.wait(1.0):
            self._draw()

    def _draw(self) -> None:
        at = f"cell {self.cell}/{self.cells}" if self.cells else "starting the kernel"
        self.stream.write(f"\r\033[K  {self.name:<{self.width}} {at:<14} {time.monotonic() - self.start:5.0f} s")
        self.stream.flush()

    def at_cell(self, index: int, total: int) -> None:
        """The notebook is running cell `index` (0-based) of `total`."""
        self.cell, self.cells = index + 1, total
        if self.tty:
            self._draw()

    def finish(self, status: str) -> None:
        """End the line with the notebook's outcome."""
        self._done.set()
        if self.tty:
            self._thread.join()
            self.stream.write(f"\r\033[K  {self.name:<{self.width}} ")
        self.stream.write(status + "\n")
        self.stream.flush()


def _engine():
    """papermill's nbclient engine, telling a callback (`on_cell(cell, index, count)`) which cell starts."""
    from papermill.engines import NBClientEngine

    class LineEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, on_cell=None, **kwargs):
            if on_cell:
                started = nb_man.cell_start

                def cell_start(cell, cell_index=None, **kw):
                    on_cell(cell, cell_index, len(nb_man.nb.cells))
                    return started(cell, cell_index, **kw)

                nb_man.cell_start = cell_start
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)

    return LineEngine


def _failure_lines(error: Exception, nb_path: Path, log: Path, cells: int) -> list[str]:
    """A failed notebook in a few lines: the failing cell's source and the error, then where the whole story is
    (`cells`: the executed notebook's, which holds papermill's injected-parameters cell)."""
    from papermill.exceptions import PapermillExecutionError

    if isinstance(error, PapermillExecutionError):
        source = error.source.strip().splitlines()
        shown = source[:8] + ([f"... ({len(source) - 8} more lines)"] if len(source) > 8 else [])
        said = str(error.evalue).strip().splitlines() or [""]
        told = said if len(said) <= 10 else [*said[:2], f"... ({len(said) - 8} lines)", *said[-6:]]  # the end says why
        lines = [f"    cell {error.cell_index + 1} of {cells}:", *(f"    | {line}" for line in shown),
                 f"    {error.ename}: {told[0]}"[:400], *(f"      {line}"[:400] for line in told[1:])]
    else:
        lines = [f"    {type(error).__name__}: {error}"[:600]]
    return lines + [f"    full traceback: {nb_path}; kernel and server logs: {log}"]


def run_series(run_dir: str | Path | None = None, profile: str | None = None, only: list[str] | None = None,
               kernel: str = "python3", overrides: dict | None = None, paths: list[Path] | None = None,
               stream=None) -> Path:
    """Execute the notebooks in order into `run_dir` (default runs/<timestamp>), one console line each, kernel output
    in `run_dir/logs/series.log`; after a failure the rest are skipped or run as the profile says (`on_failure`),
    and SeriesFailed is raised once the report is written. `overrides` (e.g. models_dir, build_dir) go to every
    notebook that declares them, after the profile's values; `paths` replaces the numbered notebooks."""
    import papermill
    from papermill.engines import papermill_engines

    papermill_engines.register("tutorial", _engine())
    out = stream or sys.stdout
    run_dir = Path(run_dir or ROOT / "runs" / time.strftime("%Y%m%d-%H%M%S")).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / "logs" / "series.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    selected = [nb for nb in (paths or notebooks()) if not only or any(nb.stem.startswith(o) for o in only)]
    if not selected:
        raise ValueError(f"no notebook matches {only}; have {[nb.stem for nb in (paths or notebooks())]}")
    expected, action = recorded_seconds(profile), on_failure(profile)
    width = max(len(nb.stem) for nb in selected)
    planned = []
    for nb in selected:  # every notebook's parameters checked before the first one runs
        declared = papermill.inspect_notebook(str(nb))
        params = {**profile_parameters(profile, nb.stem), "run_dir": str(run_dir),
                  **{k: v for k, v in (overrides or {}).items() if k in declared}}
        shared = profile_parameters(profile, "all") if profile else {}
        params = {k: v for k, v in params.items() if k in declared or k not in shared}
        unknown = sorted(set(params) - set(declared))
        if unknown:
            raise ValueError(f"{nb.name} has no parameters {unknown}; its parameters cell declares {sorted(declared)}")
        planned.append((nb, params))
    rows, failed = [], []
    from . import recordings

    trees, machine = recordings.tree_ids(), recordings.machine()  # what every notebook of this call runs with
    call = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())  # chained calls into one folder: which call ran what

    def finished(row: dict) -> None:
        rows.append(row)
        update_run_file(run_dir, row["notebook"], row["status"], row["seconds"], profile, trees, machine, call)

    kernels = _Kernels(_kernel_manager(log), kernel, log)
    try:
        for at, (nb, params) in enumerate(planned):
            row = {"notebook": nb.stem, "expected": expected.get(nb.stem), "seconds": 0.0}
            if failed and action == "stop":
                rows.append({**row, "status": "skipped"})
                out.write(f"  {nb.stem:<{width}} skipped (after {failed[0]} failed)\n")
                continue
            with open(log, "a") as handle:
                handle.write(f"\n== {nb.name} {json.dumps(params, default=str)}\n")
            line = _Line(nb.stem, out, width)
            start = time.monotonic()
            km = None
            try:
                km = kernels.take(nb)
                if at + 1 < len(planned):
                    kernels.prefetch(planned[at + 1][0])
                km = kernels.settle(nb, km)

                def at_cell(cell, index: int, count: int, name: str = nb.name) -> None:
                    if TIMED_TAG in cell.metadata.get("tags", []):
                        kernels.hush(f"before {name}'s timed cell {index + 1}")
                    line.at_cell(index, count)

                papermill.execute_notebook(str(nb), str(run_dir / nb.name), parameters=params, cwd=str(nb.parent),
                                           kernel_name=kernel, progress_bar=False, engine_name="tutorial",
                                           on_cell=at_cell, km=km)
            except Exception as error:
                row.update(status="FAILED", seconds=time.monotonic() - start)
                finished(row)
                failed.append(nb.stem)
                line.finish(f"FAILED after {row['seconds']:.0f} s")
                out.write("\n".join(_failure_lines(error, run_dir / nb.name, log, line.cells)) + "\n")
                write_report(run_dir, rows)
                continue
            except BaseException:  # Ctrl-C: the line ends, the report says how far the run got
                line.finish("interrupted")
                finished({**row, "status": "interrupted", "seconds": time.monotonic() - start})
                write_report(run_dir, rows)
                raise
            finally:
                try:
                    if km is not None:
                        kernels.release(km)
                finally:
                    kernels.reap(but=km)  # the previous notebook's, which exited while this one ran
            row.update(status="ok", seconds=time.monotonic() - start)
            finished(row)
            hint = "" if row["expected"] is None else f" (recorded: {row['expected']:.0f} s)"
            line.finish(f"ok {row['seconds']:5.0f} s{hint}")
    finally:
        kernels.close()
    report = write_report(run_dir, rows)
    out.write(_closing_table(rows, width) + f"\n  report: {report}\n  kernel and server logs: {log}\n"
              f"  site: ./tutorial docs {run_dir}  (writes build/site/index.html)\n")
    out.flush()
    if failed:
        raise SeriesFailed(f"{len(failed)} notebook(s) failed: {', '.join(failed)} (see {report})")
    return run_dir


def _closing_table(rows: list[dict], width: int) -> str:
    """Each notebook's status and time against the recorded run's, and the totals."""
    lines = ["", f"  {'notebook':<{width}} {'status':<11} {'seconds':>7} {'recorded':>8}"]
    for r in rows:
        was = "" if r["expected"] is None else f"{r['expected']:.0f}"
        lines.append(f"  {r['notebook']:<{width}} {r['status']:<11} {r['seconds']:7.0f} {was:>8}")
    ran = [r for r in rows if r["status"] == "ok"]
    known = [r["expected"] for r in ran if r["expected"] is not None]
    total_was = f"{sum(known):.0f}" if len(known) == len(ran) and known else ""
    lines.append(f"  {'total':<{width}} {f'{len(ran)}/{len(rows)} ok':<11} "
                 f"{sum(r['seconds'] for r in rows):7.0f} {total_was:>8}")
    return "\n".join(lines)


def prepare_lab(profile: str, target: str | Path | None = None) -> Path:
    """Copies of the notebooks with a profile's values injected as papermill would inject them (a cell tagged
    `injected-parameters` after the `parameters` cell), not executed, for `./tutorial lab --profile NAME`. The
    repository's folders are given as absolute paths, since the copies live outside notebooks/."""
    import nbformat
    import papermill
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    target = Path(target or ROOT / "runs" / f"lab-{profile}").resolve()
    target.mkdir(parents=True, exist_ok=True)
    folders = {"models_dir": ROOT / "models", "build_dir": ROOT / "build", "run_dir": target / "run"}
    for nb in notebooks():
        declared = papermill.inspect_notebook(str(nb))
        params = {k: v for k, v in profile_parameters(profile, nb.stem).items() if k in declared}
        params.update({k: str(v) for k, v in folders.items() if k in declared})
        parameterized = parameterize_notebook(load_notebook_node(str(nb)), params)
        nbformat.write(parameterized, str(target / nb.name))
    print(f"notebooks with the {profile!r} profile's parameters in {target}")
    return target


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Run the tutorial notebooks with papermill.")
    parser.add_argument("--profile", default="auto",
                        help="parameter profile from notebooks/profiles.yml (ci, gpu-local, docker-ci), 'article' for "
                             "the notebooks' own parameters, or auto (default: chosen from this machine)")
    parser.add_argument("--run-dir", help="output folder (default runs/<timestamp>)")
    parser.add_argument("--only", nargs="*", help="notebook name prefixes, e.g. 00 05")
    parser.add_argument("--tag", help="the NGC release tag for every notebook and container (sets $TUTORIAL_NGC_TAG)")
    parser.add_argument("--prepare-lab", metavar="DIR",
                        help="write parameterized copies for JupyterLab into DIR instead of running (needs --profile)")
    ns = parser.parse_args()
    if ns.tag:
        from .ngc import SERIES_TAG_VARIABLE, check_tag

        os.environ[SERIES_TAG_VARIABLE] = check_tag(ns.tag)  # the kernels papermill starts inherit it
    if ns.prepare_lab:
        if ns.profile in ("auto", "article"):
            parser.error("--prepare-lab needs --profile NAME (a profile of notebooks/profiles.yml)")
        prepare_lab(ns.profile, ns.prepare_lab)
        raise SystemExit(0)
    chosen, why = (auto_profile() if ns.profile == "auto" else
                   (None if ns.profile == "article" else ns.profile, "asked for with --profile"))
    print(f"profile: {chosen or 'article'} ({why}); expected: {expected_duration(chosen)}", flush=True)
    try:
        run_series(ns.run_dir, chosen, ns.only)
    except SeriesFailed as failure:
        raise SystemExit(f"tutorial: {failure}") from None
