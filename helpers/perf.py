"""perf_analyzer: find it (or its NGC SDK image), build its command, run it with progress and parse its CSV."""
from __future__ import annotations

import contextlib
import fcntl
import math
import os
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import psutil

from . import ngc

if TYPE_CHECKING:
    from .runtime import LocalTriton

INSTALL_HINT = ("perf_analyzer not found. Run `./tutorial setup` (it unpacks the binary from tritonclient==2.50.0's "
                "wheel into the virtual environment), or set PERF_ANALYZER_BIN, or `pip install perf-analyzer` "
                "on glibc >= 2.38, or use the runtime='docker' path (nvcr.io/nvidia/tritonserver:<tag>-py3-sdk).")


class PerfAnalyzerNotFound(RuntimeError):
    """No perf_analyzer binary usable on this machine."""


class UnstableMeasurement(RuntimeError):
    """perf_analyzer could not get measurements within --stability-percentage in --max-trials windows."""


# `-v` makes perf_analyzer print every measurement window ("Pass [3] throughput: 512.3 infer/sec. Avg latency: 1950
# usec ..."): the windows a level did not stabilize over are the measured reason it did not.
PASS_LINE = re.compile(r"Pass \[(\d+)\] throughput: ([\d.]+) infer/sec\. Avg latency: (\d+) usec")


def window_spread(lines: Sequence[str]) -> str:
    """What perf_analyzer's last three windows measured, and how far apart they were (max/min - 1, the quantity
    --stability-percentage bounds for throughput and average latency alike): why a level did or did not stabilize."""
    passes = [(float(m[2]), int(m[3]) / 1000) for line in lines for m in [PASS_LINE.search(line)] if m]
    if len(passes) < 3:
        return f"{len(passes)} window(s) printed, fewer than the three it compares"
    last = passes[-3:]
    rates, latencies = [r for r, _ in last], [t for _, t in last]
    return (f"its last three windows: {min(rates):.1f}-{max(rates):.1f} infer/s ({_apart(rates):.0%} apart), "
            f"average latency {min(latencies):.2f}-{max(latencies):.2f} ms ({_apart(latencies):.0%} apart)")


REQUEST_COUNT_LINE = re.compile(r"^\s*Request count: (\d+)")


def measured_requests(lines: Sequence[str]) -> int:
    """The requests perf_analyzer's summary counted (`Request count: N` of its last client block: the stable windows
    it reports), 0 when it printed none."""
    counts = [int(m[1]) for line in lines for m in [REQUEST_COUNT_LINE.match(line)] if m]
    return counts[-1] if counts else 0


def _apart(values: Sequence[float]) -> float:
    """max/min - 1: how far apart perf_analyzer's windows were, as its stability check reads them."""
    return max(values) / min(values) - 1 if min(values) > 0 else float("inf")


class MemoryLimitExceeded(RuntimeError):
    """perf_analyzer's resident memory passed the limit; it was stopped before the kernel's OOM killer could act."""


# perf_analyzer copies every request's inputs into the request's record (MEMORY_SOURCE) and, measured over gRPC/HTTP,
# its memory grows with the requests a level sends (users reported the symptom as issue #84), about 877 KiB per 602 KB FP32
# request (REQUEST_FIXED_BYTES below); each row of notebooks 11 and 14 records its peak (peak_rss_mb). Shared memory
# (`--shared-memory system|cuda`) sends no tensor bytes.
MEMORY_SOURCE = "https://github.com/triton-inference-server/perf_analyzer/blob/main/src/infer_context.cc"
MEMORY_ISSUE = "https://github.com/triton-inference-server/perf_analyzer/issues/84"
MEMORY_CAP_GB = 3.5  # sampled every 0.2 s: a run stopped here stays under 4 GB
MEMORY_SHARE = 0.25


def default_memory_limit_gb() -> float:
    """The default ceiling for one perf_analyzer: a quarter of the memory available now, at most 3.5 GB."""
    return round(min(MEMORY_CAP_GB, psutil.virtual_memory().available / 2**30 * MEMORY_SHARE), 2)


@dataclass
class Watched:
    """What one watched perf_analyzer did: exit status, output, peak resident memory and its trace over time."""

    returncode: int
    output: list[str]
    peak_mb: float
    trace: list[tuple[float, float]]  # (seconds since start, resident MB)
    stopped: str = ""                 # why the guard stopped it ("" when it ended on its own)
    cpu_s: float = 0.0                # CPU time (user + system) of perf_analyzer: samples, or its rusage once waited for
    wall_s: float = 0.0               # how long the command ran

    @property
    def client_cores(self) -> float:
        """Cores the load generator kept busy on average: near this machine's count, the client is the limit."""
        return self.cpu_s / self.wall_s if self.wall_s else 0.0


def _tree_rss(procs: list[psutil.Process]) -> float:
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total / 2**20


def _named(proc: psutil.Process, name: str) -> bool:
    """Whether `proc` (still there) is called `name`."""
    try:
        return proc.name() == name
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _cpu_seconds(procs: list[psutil.Process], seen: dict[int, float]) -> float:
    """CPU seconds of the perf_analyzer processes among `procs`, remembered per pid (a process that ended keeps its
    last reading)."""
    for proc in procs:
        try:
            if proc.name() == "perf_analyzer":
                times = proc.cpu_times()
                seen[proc.pid] = times.user + times.system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return sum(seen.values())


def _watched_processes(root: psutil.Process, marker: str, container: bool = True) -> list[psutil.Process]:
    """The command's process tree, and with `container`, a perf_analyzer running in a container (visible on the host,
    not a child of the `docker` CLI) whose command line names `marker` (a scan of every process: done only then)."""
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        procs = []
    if not container:
        return procs
    pids = {p.pid for p in procs}
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.pid not in pids and proc.info["name"] == "perf_analyzer" and marker in " ".join(proc.info["cmdline"] or []):
            procs.append(proc)
    return procs


# One for the machine, not per user: perf_analyzer names its system shared-memory regions alike in every run
# (/dev/shm/INPUT__0_0_0, OUTPUT__0, created 0600 by whoever runs first: client r24.05 shm_utils.cc), so two users'
# runs collide as two of one user's do, and their windows disturb each other on the GPU.
LOCK_FILE = Path(tempfile.gettempdir()) / "triton-tutorials-perf_analyzer.lock"


def _lock_descriptor(lock: Path) -> int:
    """A descriptor of the file `lock`: the existing file opened read-only and without O_CREAT (flock(2) locks a file
    whatever mode it was opened in, and in a sticky /tmp fs.protected_regular refuses O_CREAT on another user's
    file), else a new one, made readable by every user (0644 whatever the umask)."""
    for _ in range(3):
        try:
            return os.open(lock, os.O_RDONLY)
        except FileNotFoundError:
            pass
        except PermissionError as exc:
            info = os.stat(lock)
            raise PermissionError(exc.errno, f"the lock file {lock} (one perf_analyzer at a time on this machine) "
                                  f"should be readable by every user; it is uid {info.st_uid}'s with mode "
                                  f"{info.st_mode & 0o777:o}: ask its owner or root to `chmod 644 {lock}`") from exc
        try:
            descriptor = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:  # another process made it in between: open that one
            continue
        os.fchmod(descriptor, 0o644)  # the umask may have taken the others' read bit
        return descriptor
    raise RuntimeError(f"the lock file {lock} kept appearing and vanishing; remove it and run again")


@contextlib.contextmanager
def exclusive(lock: str | Path):
    """Hold an exclusive lock on the file `lock` for the block: one process at a time, whichever user started it."""
    descriptor = _lock_descriptor(Path(lock))
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)


def one_load_generator():
    """One perf_analyzer at a time on this machine, across processes (two notebooks, a CI run's two worlds): a second
    load generator would be measured along with the first, and two with CUDA shared memory on one server collide
    ("shared memory region 'OUTPUT' already in manager": they name their regions alike). Waits for the other."""
    return exclusive(LOCK_FILE)


def watch(command: list[str], env: dict[str, str], *, marker: str, limit_gb: float, interval: float = 0.2) -> Watched:
    """Run `command` (alone among this machine's perf_analyzers: one_load_generator) and sample the resident memory
    of the perf_analyzer it starts every `interval` seconds; past `limit_gb`, kill it (SIGKILL to perf_analyzer,
    wherever it runs) and say so in `stopped`."""
    container = list(command[:2]) == ["docker", "run"]
    with one_load_generator(), tempfile.TemporaryFile("w+") as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        if container:  # named, under the reaper, removed by name whatever happens (ngc.start_container)
            proc, name = ngc.start_container(command, stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
        else:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
        root, started, trace, stopped, cpu = psutil.Process(proc.pid), time.monotonic(), [], "", {}
        try:
            while proc.poll() is None:
                procs = _watched_processes(root, marker, container)
                # perf_analyzer's own memory (in a container: not the docker CLI's, nor the reaper's)
                mb = _tree_rss([p for p in procs if _named(p, "perf_analyzer")] if container else procs)
                _cpu_seconds(procs, cpu)
                trace.append((round(time.monotonic() - started, 2), round(mb, 1)))
                if mb > limit_gb * 1024 and not stopped:
                    stopped = (f"perf_analyzer passed the memory limit of {limit_gb:g} GB ({mb:.0f} MB resident "
                               f"after {trace[-1][0]:.0f} s) and was stopped")
                    for victim in procs:
                        try:
                            victim.send_signal(signal.SIGKILL if victim.name() == "perf_analyzer" else signal.SIGTERM)
                        except (psutil.NoSuchProcess, psutil.AccessDenied):
                            continue
                time.sleep(interval)
        finally:
            if container:
                ngc.stop_container(proc, name, grace=5)
            elif proc.poll() is None:
                proc.kill()
            proc.wait()
        wall = time.monotonic() - started
        # the command's own CPU time once it has been waited for (a short run may end between two samples; in a
        # container, only the docker CLI's is counted here, and the samples above find the containerized process)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        waited = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        out.seek(0)
        lines = out.readlines()
    peak = max((mb for _, mb in trace), default=0.0)
    return Watched(proc.returncode, lines, peak, trace, stopped, round(max(sum(cpu.values()), waited), 3),
                   round(wall, 3))


@dataclass
class PerfAnalyzer:
    """A perf_analyzer binary with the environment it needs (libcudart.so.12, libb64)."""

    binary: Path
    source: str
    env: dict[str, str] = field(default_factory=dict)


def _lib_dirs() -> list[str]:
    purelib = Path(sysconfig.get_paths()["purelib"])
    dirs = [purelib / "nvidia" / "cuda_runtime" / "lib", Path(sys.prefix) / "opt" / "perf_analyzer" / "lib"]
    return [str(d) for d in dirs if d.is_dir()]


def find_perf_analyzer() -> PerfAnalyzer:
    """$PERF_ANALYZER_BIN, perf_analyzer on PATH, tritonclient 2.50.0's binary unpacked by setup, or the pip package."""
    libs = os.pathsep.join(_lib_dirs() + [p for p in [os.environ.get("LD_LIBRARY_PATH", "")] if p])
    env = {"LD_LIBRARY_PATH": libs}
    if os.environ.get("PERF_ANALYZER_BIN"):
        path = Path(os.environ["PERF_ANALYZER_BIN"])
        if not path.exists():
            raise PerfAnalyzerNotFound(f"PERF_ANALYZER_BIN points to {path}, which does not exist")
        return PerfAnalyzer(path, "$PERF_ANALYZER_BIN", env)
    unpacked = Path(sys.prefix) / "opt" / "perf_analyzer" / "bin" / "perf_analyzer"
    on_path = shutil.which("perf_analyzer")
    for path, source in ((on_path, "perf_analyzer on PATH"), (unpacked, "tritonclient 2.50.0 wheel, unpacked by setup")):
        if path and Path(path).exists():
            ok = subprocess.run([str(path), "--version"], capture_output=True, text=True, env={**os.environ, **env})
            if "error while loading shared libraries" in ok.stderr:
                missing = re.search(r"loading shared libraries: (\S+?):", ok.stderr)
                raise PerfAnalyzerNotFound(f"{path} cannot start: {missing.group(1) if missing else ok.stderr.strip()} "
                                           "is missing; `./tutorial setup` installs it into the environment")
            return PerfAnalyzer(Path(path), source, env)
    raise PerfAnalyzerNotFound(INSTALL_HINT)


def shell_setup() -> str:
    """The `export` line that lets the local perf_analyzer start in a terminal (the library folders set-up gave it:
    libcudart.so.12, libb64), or "" where the environment has none of them."""
    dirs = _lib_dirs()
    return f"export LD_LIBRARY_PATH={shlex.quote(os.pathsep.join(dirs))}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}" if dirs else ""


def require_perf_analyzer() -> PerfAnalyzer:
    """find_perf_analyzer, or stop the notebook with the one instruction that fixes it (no stack trace)."""
    try:
        return find_perf_analyzer()
    except PerfAnalyzerNotFound as exc:
        raise SystemExit(str(exc)) from None


# perf_analyzer's own default for --measurement-request-count (its CLI reference, CLI_DOC)
DEFAULT_WINDOW_REQUESTS = 50
CLI_DOC = "https://github.com/triton-inference-server/perf_analyzer/blob/main/docs/cli.md"


def window_args(measurement_request_count: int | None = None, measurement_interval_ms: int | None = None) -> list[str]:
    """How perf_analyzer bounds a measurement window. Count windows (the series' way, and the default here):
    `--measurement-mode count_windows --measurement-request-count N`, a window ends once N requests have completed
    (perf_analyzer checks once a second, so a window lasts at least a second) and its rate is the requests
    completed over the window's real duration: a window cannot be empty on a slow machine. Time windows
    (`--measurement-interval`) only when `measurement_interval_ms` is given alone (to compare the two modes)."""
    if measurement_request_count is not None and measurement_interval_ms is not None:
        raise ValueError("give measurement_request_count (count windows) or measurement_interval_ms (time windows), "
                         f"not both; got {measurement_request_count} and {measurement_interval_ms}")
    if measurement_interval_ms is not None:
        return ["--measurement-interval", str(int(measurement_interval_ms))]
    count = DEFAULT_WINDOW_REQUESTS if measurement_request_count is None else int(measurement_request_count)
    if count < 1:
        raise ValueError(f"measurement_request_count must be at least 1; got {count}")
    return ["--measurement-mode", "count_windows", "--measurement-request-count", str(count)]


def perf_args(model: str, url: str, *, protocol: str = "grpc", concurrency: str = "1:16:1", batch_size: int = 1,
              measurement_request_count: int | None = None, measurement_interval_ms: int | None = None,
              max_trials: int = 10, stability_percentage: int = 10, shared_memory: str = "none",
              csv_file: str | None = None, percentile: int | None = None, input_data: str | None = None,
              shapes: dict[str, Sequence[int]] | None = None) -> list[str]:
    """perf_analyzer's arguments (without the binary) for a concurrency sweep `start:end:step`, in count windows of
    `measurement_request_count` requests (window_args; count_window sizes it from the memory limit), at most
    `max_trials` windows per level until the last three agree within `stability_percentage`."""
    if protocol not in ("http", "grpc"):
        raise ValueError(f"protocol must be 'http' or 'grpc'; got {protocol!r}")
    if shared_memory not in ("none", "system", "cuda"):
        raise ValueError(f"shared_memory must be none, system or cuda; got {shared_memory!r}")
    if not re.fullmatch(r"\d+(:\d+(:\d+)?)?", concurrency):
        raise ValueError(f"concurrency must look like '1:16:1' (start:end:step); got {concurrency!r}")
    args = ["-m", model, "-u", url, "-i", protocol, "-b", str(batch_size), "--concurrency-range", concurrency,
            *window_args(measurement_request_count, measurement_interval_ms), "--max-trials", str(max_trials),
            "--stability-percentage", str(stability_percentage), "--shared-memory", shared_memory, "-v"]
    if input_data:
        args += ["--input-data", input_data]
    for name, dims in (shapes or {}).items():
        args += ["--shape", f"{name}:{','.join(str(d) for d in dims)}"]
    if percentile:
        args += ["--percentile", str(percentile)]
    if csv_file:
        args += ["-f", csv_file]
    return args


# perf_analyzer's resident memory per request sent: the tensor's bytes plus about 250 KB of its own (measured on an
# H200, 2026-12-02: 3420 MiB after 3994 FP32 requests of 602,112 bytes, 877 KiB each); a 10 % margin on top
REQUEST_FIXED_BYTES = 256 * 1024
REQUEST_MARGIN = 1.1


def request_budget(bytes_per_request: int, limit_gb: float | None = None, share: float = 0.8) -> int:
    """How many requests one perf_analyzer may send with the tensors in the requests (gRPC/HTTP, no shared memory)
    and stay under `share` of the memory limit: it copies each request's inputs (MEMORY_SOURCE) and, measured, its
    memory follows the count of requests sent in the level, over all its windows."""
    limit = (limit_gb or default_memory_limit_gb()) * 2**30
    return int(limit * share / (REQUEST_MARGIN * (bytes_per_request + REQUEST_FIXED_BYTES)))


# perf_analyzer calls a level stable after its last three windows agree (--stability-percentage), so three at least
STABLE_WINDOWS = 3


def count_window(bytes_per_request: int, *, trials: int, limit_gb: float | None = None, most: int | None = None,
                 least: int = 20, rate: float | None = None) -> dict:
    """perf_args keyword arguments for count windows sized so that what one level keeps fits the memory limit:
    {"measurement_request_count": N, "max_trials": trials}.

    perf_analyzer's memory grows with every request a level sends over gRPC/HTTP (MEMORY_SOURCE: the inputs' copy),
    and a level sends about N x trials requests, so N is the level's request_budget (the tensor's bytes plus
    perf_analyzer's own per request, under 80 % of `limit_gb`, default default_memory_limit_gb()) divided by
    `trials`, capped at `most` (a slow
    machine's rate: a window of N requests lasts N / rate seconds). A big request gives a smaller N.
    `bytes_per_request=0` means the tensor travels through shared memory (`--shared-memory system|cuda`): nothing of
    it is kept per request, so N is `most`.
    A window sleeps whole seconds until N requests are done (inference_profiler.cc), at least one, so a row faster
    than N requests per second keeps its rate x 1 s per window, whatever N is. `rate` (requests/s; an upper bound, such as
    the same model's rate through shared memory, measured before) sizes that: a window then keeps rate x ceil(N /
    rate) requests, and `trials` is lowered to the windows the limit holds. A window also starts where the last one
    ended, so it spans perf_analyzer's own work on the requests it collected, which is longer when they carry tensors:
    such a row keeps more than this estimate, and the memory guard stops it (nearlimit.Rows retries it once).
    Raises ValueError when the limit leaves fewer than `least` requests per window, or room for fewer than
    STABLE_WINDOWS windows at `rate`."""
    if trials < 1:
        raise ValueError(f"trials must be at least 1; got {trials}")
    if bytes_per_request <= 0:
        if most is None:
            raise ValueError("bytes_per_request=0 (shared memory) keeps nothing per request: give `most`, the "
                             "requests a window may hold")
        return {"measurement_request_count": int(most), "max_trials": trials}
    limit = limit_gb or default_memory_limit_gb()
    total = request_budget(bytes_per_request, limit)
    budget = total // trials
    if budget < least:
        raise ValueError(f"expected at least {least} requests per window; found {budget}: {bytes_per_request:,} bytes "
                         f"per request over {trials} trial(s) fit {budget} per window under {limit:g} GB. Send the "
                         "tensors through shared memory, lower max_trials, or raise the memory limit")
    count = min(budget, int(most)) if most else budget
    if not rate or rate <= 0:
        return {"measurement_request_count": count, "max_trials": trials}
    kept = math.ceil(rate * math.ceil(count / rate))  # the requests one window holds: whole seconds at `rate`
    fit = total // kept
    if fit < STABLE_WINDOWS:
        held_gb = STABLE_WINDOWS * kept * REQUEST_MARGIN * (bytes_per_request + REQUEST_FIXED_BYTES) / 2**30
        raise ValueError(f"expected room for {STABLE_WINDOWS} count windows under 80 % of the {limit:g} GB limit; found "
                         f"{fit}: at {rate:,.0f} requests/s a window (whole seconds of sleep, at least one) keeps about "
                         f"{kept:,} requests of {bytes_per_request:,} bytes, and {STABLE_WINDOWS} windows hold about "
                         f"{held_gb:.1f} GB. Send the tensors through shared memory or raise the memory limit")
    return {"measurement_request_count": count, "max_trials": min(trials, int(fit))}


CUDA_IPC_ISSUE = "https://github.com/triton-inference-server/server/issues/3429"


def docker_command(args: list[str], tag: str = "series", results_dir: str | Path | None = None) -> list[str]:
    """`docker run` of perf_analyzer from the SDK image (the plain tritonserver image does not ship it), with Docker's
    init (signals reach perf_analyzer; watch names the container when it starts it). `--shared-memory cuda` is
    refused: the container has no GPU to create the regions on, and the server would open them through CUDA IPC
    between two containers, reported to fail (CUDA_IPC_ISSUE); this series has not verified a set-up that works."""
    if "--shared-memory" in args[:-1] and args[args.index("--shared-memory") + 1] == "cuda":
        raise ValueError("shared_memory='cuda' is not offered with perf_analyzer in the SDK container: the container "
                         "gets no GPU, and the server in its own container would open the regions through CUDA IPC "
                         f"between two containers, where registering them has been reported to fail ({CUDA_IPC_ISSUE}); "
                         "use shared_memory='system' (both containers share this host's /dev/shm through --ipc=host)")
    volumes = {results_dir: "/results"} if results_dir else None
    return ngc.docker_run(ngc.image("sdk", tag), ["perf_analyzer", *args], network="host", gpus=None,
                          volumes=volumes, workdir="/results" if results_dir else None, as_user=True, init=True,
                          extra=["--ipc=host"])


def concurrency_levels(concurrency: str) -> list[int]:
    """The concurrency values perf_analyzer will visit for `start:end:step`."""
    parts = [int(p) for p in concurrency.split(":")]
    start, end, step = parts[0], parts[1] if len(parts) > 1 else parts[0], parts[2] if len(parts) > 2 else 1
    return list(range(start, end + 1, step))


def level_command(model: str, url: str, csv_file: str | Path, docker_tag: str | None = None,
                  **kwargs) -> tuple[list[str], dict[str, str]]:
    """The exact command (and extra environment) that measures one concurrency level into `csv_file`: perf_analyzer
    here, or in the SDK image with the CSV's folder mounted at /results so the CSV outlives the container."""
    csv_file = Path(csv_file).resolve()
    csv_file.parent.mkdir(parents=True, exist_ok=True)
    if docker_tag:
        args = perf_args(model, url, csv_file=f"/results/{csv_file.name}", **kwargs)
        return docker_command(args, docker_tag, results_dir=csv_file.parent), {}
    pa = find_perf_analyzer()
    return [str(pa.binary), *perf_args(model, url, csv_file=str(csv_file), **kwargs)], pa.env


def shown_command(model: str, url: str, csv_file: str | Path, concurrency: int, *, docker_tag: str | None = None,
                  memory_limit_gb: float | None = None, warmup_requests: int = 0, **kwargs) -> str:
    """The perf_analyzer command `measure_level` runs for these settings, as one shell line (the memory guard and
    the warm-up window are this series' own, not perf_analyzer's flags)."""
    return ngc.as_shell(level_command(model, url, csv_file, docker_tag, concurrency=str(concurrency), **kwargs)[0])


def _window(kwargs: dict) -> str:
    """The window a level's settings ask for, in words: `count windows of N requests` or `M ms time windows`."""
    if kwargs.get("measurement_interval_ms") is not None and kwargs.get("measurement_request_count") is None:
        return f"{kwargs['measurement_interval_ms']} ms time windows"
    return f"count windows of {_window_requests(kwargs)} requests"


def _window_requests(kwargs: dict) -> int:
    """--measurement-request-count of a level's settings (perf_analyzer's default when not set), 0 in time windows."""
    if kwargs.get("measurement_interval_ms") is not None and kwargs.get("measurement_request_count") is None:
        return 0
    return int(kwargs.get("measurement_request_count") or DEFAULT_WINDOW_REQUESTS)


def _run_level(model: str, url: str, csv_file: Path, docker_tag: str | None, kwargs: dict,
               memory_limit_gb: float) -> Watched:
    """One perf_analyzer invocation under the memory guard; raises when it fails, passes the limit or never
    stabilizes."""
    command, env = level_command(model, url, csv_file, docker_tag, **kwargs)
    if docker_tag:
        ngc.ensure_image(ngc.image("sdk", docker_tag))
    watched = watch(command, {**os.environ, **env}, marker=csv_file.name, limit_gb=memory_limit_gb)
    lines = watched.output
    where = (f"{model!r} at concurrency {kwargs.get('concurrency')} ({_window(kwargs)}, at most "
             f"{kwargs.get('max_trials', 10)} of them)")
    if watched.stopped:
        transport = kwargs.get("shared_memory", "none")
        smaller = ("lower --measurement-request-count or --max-trials (a window lasts at least one second, and "
                   "longer with tensors in the requests, so it keeps more than the count)")
        remedy = (f"{smaller}, or raise memory_limit_gb" if transport != "none" else
                  f"send the tensors through shared memory (shared_memory='system', or 'cuda' with a GPU client), "
                  f"or {smaller}; perf.count_window sizes the count from the limit")
        raise MemoryLimitExceeded(f"{where}: {watched.stopped}; it copies the inputs of every request it sends over "
                                  f"{kwargs.get('protocol', 'grpc')}, and its memory grows with the requests a level sends "
                                  f"({MEMORY_SOURCE}; reported as {MEMORY_ISSUE}): "
                                  f"{remedy}")
    if any("Failed to obtain stable measurement" in ln for ln in lines):
        longer = ("raise --measurement-request-count (longer windows) or --max-trials"
                  if "count windows" in where else "lengthen --measurement-interval or raise --max-trials")
        raise UnstableMeasurement(f"perf_analyzer found no stable measurement for {where}: {window_spread(lines)}, "
                                  f"against {kwargs.get('stability_percentage', 10)} %: {longer}, or loosen "
                                  f"--stability-percentage ({CLI_DOC})")
    if any("No valid requests recorded within time interval" in ln for ln in lines):  # exit 3: a time window saw none
        raise UnstableMeasurement(f"no request of {where} completed within a window ({window_spread(lines)}): use "
                                  "count windows (measurement_request_count), which end when requests completed, or "
                                  "lengthen --measurement-interval (a busy or slow machine)")
    if watched.returncode != 0 or not csv_file.exists() or any(re.search(r"had error|Failed to|failed", ln) for ln in lines):
        raise RuntimeError(f"perf_analyzer failed (exit {watched.returncode}) for model {model!r}; command:\n"
                           f"  {ngc.as_shell(command)}\n" + "".join(lines[-25:]))
    return watched


def c_api_layout(local: "LocalTriton", model_repository: str | Path, models: Sequence[str], work: str | Path) -> Path:
    """What perf_analyzer's C API mode loads, laid out in `work`: a Triton install folder (`lib/libtritonserver.so`,
    `backends/`: the local server's own, linked) and a repository holding only `models` (linked), so the server it
    starts in its own process loads nothing else. Returns the install folder; the repository is beside it."""
    from .native_backends import server_library

    work = Path(work).resolve()
    install, repo = work / "tritonserver", work / "repository"
    for folder in (install / "lib", repo):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    (install / "lib" / "libtritonserver.so").symlink_to(server_library(local))
    backends = install / "backends"
    if backends.is_symlink() or backends.exists():
        backends.unlink()
    backends.symlink_to(local.backend_dir.resolve())
    for name in models:
        source = Path(model_repository).resolve() / name
        if not (source / "config.pbtxt").exists():
            raise FileNotFoundError(f"model {name!r} has no config.pbtxt in {model_repository}: expected {source}")
        (repo / name).symlink_to(source)
    return install


def c_api_command(model: str, install: str | Path, csv_file: str | Path, local: "LocalTriton", *,
                  concurrency: int = 1, batch_size: int = 1, measurement_request_count: int | None = None,
                  measurement_interval_ms: int | None = None, max_trials: int = 10,
                  stability_percentage: int = 10) -> tuple[list[str], dict[str, str]]:
    """perf_analyzer with Triton in its own process (`--service-kind=triton_c_api`): no HTTP/gRPC, no network, the
    inputs handed over in host memory (no --shared-memory here, though the mode has it). Its docs name one limit, async
    mode, and point to the server's QA script for others (perf_analyzer's docs, "Benchmarking Triton directly via C API"). It keeps the requests it sends in this mode too
    (an H200 run grew about 1 GB/s once requests flowed): size the count windows with count_window, as for gRPC/HTTP."""
    install = Path(install)
    pa = find_perf_analyzer()
    args = ["-m", model, "--service-kind=triton_c_api", f"--triton-server-directory={install}",
            f"--model-repository={install.parent / 'repository'}", "-b", str(batch_size),
            "--concurrency-range", str(concurrency), *window_args(measurement_request_count, measurement_interval_ms),
            "--max-trials", str(max_trials), "--stability-percentage", str(stability_percentage), "-v",
            "-f", str(Path(csv_file).resolve())]
    library_dir = str((install / "lib" / "libtritonserver.so").resolve().parent)
    ld = os.pathsep.join(p for p in [library_dir, local.env.get("LD_LIBRARY_PATH", ""), pa.env.get("LD_LIBRARY_PATH", ""),
                                     os.environ.get("LD_LIBRARY_PATH", "")] if p)
    return [str(pa.binary), *args], {**pa.env, **local.env, "LD_LIBRARY_PATH": ld}


def c_api_shell(command: Sequence[str], install: str | Path, local: "LocalTriton") -> list[str]:
    """The C API row as lines to paste into a terminal: the layout `c_api_layout` made (mkdir, ln -s), then `command`
    with the library path it runs with (the server's library folder, the local server's and perf_analyzer's, then the
    terminal's own)."""
    install = Path(install)
    repo = install.parent / "repository"
    links = [install / "lib" / "libtritonserver.so", install / "backends", *sorted(repo.iterdir())]
    lines = [ngc.as_shell(["mkdir", "-p", str(install / "lib"), str(repo)])]
    lines += [ngc.as_shell(["ln", "-sfn", os.readlink(link), str(link)]) for link in links if link.is_symlink()]
    library_dir = str((install / "lib" / "libtritonserver.so").resolve().parent)
    ld = [library_dir, *local.env.get("LD_LIBRARY_PATH", "").split(os.pathsep), *_lib_dirs()]
    return lines + [f"LD_LIBRARY_PATH={shlex.quote(os.pathsep.join(dict.fromkeys(d for d in ld if d)))}"
                    f"${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}} {ngc.as_shell(command)}"]


def c_api_level(model: str, install: str | Path, csv_file: str | Path, local: "LocalTriton", *,
                memory_limit_gb: float | None = None, **kwargs) -> dict:
    """One concurrency level through the C API (c_api_command), under the memory guard, as one row like
    measure_level's (stable=False and the reason when it fails)."""
    csv_file = Path(csv_file).resolve()
    csv_file.parent.mkdir(parents=True, exist_ok=True)
    command, env = c_api_command(model, install, csv_file, local, **kwargs)
    watched = watch(command, {**os.environ, **env}, marker=csv_file.name,
                    limit_gb=memory_limit_gb or default_memory_limit_gb())
    csv_file.with_suffix(".log").write_text("".join(watched.output))
    failed = (watched.stopped or watched.returncode != 0 or not csv_file.exists()
              or any("Failed to obtain stable measurement" in line for line in watched.output))
    if failed:
        reason = (watched.stopped or (f"no stable measurement: {window_spread(watched.output)}"
                                      if any("stable measurement" in line for line in watched.output) else
                                      f"perf_analyzer exited {watched.returncode}: " + "".join(watched.output[-3:]).strip()))
        return {"concurrency": kwargs.get("concurrency", 1), "stable": False, "throughput": float("nan"),
                "p99_ms": float("nan"), "error": reason}
    row = parse_csv(csv_file).iloc[0].to_dict()
    return {**row, "stable": True, "peak_rss_mb": watched.peak_mb, "client_cores": round(watched.client_cores, 3),
            "window_requests": _window_requests(kwargs),
            "requests": measured_requests(watched.output), "error": ""}


DEFAULT_WARMUP_REQUESTS = 200


def warmup_command(model: str, url: str, csv_file: str | Path, concurrency: int, docker_tag: str | None = None,
                   requests: int = DEFAULT_WARMUP_REQUESTS, **kwargs) -> tuple[list[str], dict[str, str]]:
    """The unmeasured pass `warm_up` runs: the level's own command with one count window of `requests` (at most
    the level's own window, so its memory stays within the level's) and no stability to reach."""
    window = kwargs.get("measurement_request_count")
    settings = {**kwargs, "concurrency": str(concurrency), "max_trials": 1, "stability_percentage": 999,
                "measurement_interval_ms": None,
                "measurement_request_count": max(1, min(requests, window) if window else requests)}
    return level_command(model, url, Path(csv_file).with_name(f"{Path(csv_file).stem}_warmup.csv"), docker_tag,
                         **settings)


def warm_up(model: str, url: str, csv_file: str | Path, concurrency: int, *, docker_tag: str | None = None,
            requests: int = DEFAULT_WARMUP_REQUESTS, memory_limit_gb: float | None = None, **kwargs) -> Watched:
    """One unmeasured perf_analyzer pass at `concurrency` before the first measurement: a TorchScript model
    specializes on its first runs (each new batch shape, which a dynamic batcher varies), so the first window after a
    start measures that work, not the model."""
    if docker_tag:
        ngc.ensure_image(ngc.image("sdk", docker_tag))
    command, env = warmup_command(model, url, csv_file, concurrency, docker_tag, requests, **kwargs)
    return watch(command, {**os.environ, **env}, marker=f"{Path(csv_file).stem}_warmup",
                 limit_gb=memory_limit_gb or default_memory_limit_gb())


def run(model: str, url: str, csv_file: str | Path, *, concurrency: str = "1:16:1", docker_tag: str | None = None,
        progress: bool = True, memory_limit_gb: float | None = None, warmup_requests: int = 0,
        **kwargs) -> pd.DataFrame:
    """Measure each concurrency level of `start:end:step` with perf_analyzer, with a progress bar.

    Each level is measured in count windows (`measurement_request_count`, window_args; count_window sizes it) and
    its rate is perf_analyzer's own. Returns one row per level (perf_analyzer's CSV, parsed) with perf_analyzer's
    peak resident memory (`peak_rss_mb`), the cores it kept busy (`client_cores`), the window's request count
    (`window_requests`) and the requests its summary counted (`requests`); with `warmup_requests`, unmeasured
    passes of that many requests at the first and the top level come first (the first level's shape; the batches a
    dynamic batcher forms at the top);
    a level that never stabilizes or passes `memory_limit_gb` (default: default_memory_limit_gb()) is kept with
    stable=False, no numbers and the reason in `error`, so one bad level does not lose the sweep. Raises when no level
    is stable. Each level's output goes to <csv>.log and, per stable level, to table.attrs["console"] (`console`);
    with docker_tag, perf_analyzer runs from the NGC SDK image.
    """
    from tqdm.auto import tqdm

    limit = memory_limit_gb or default_memory_limit_gb()
    csv_file = Path(csv_file).resolve()
    csv_file.parent.mkdir(parents=True, exist_ok=True)
    rows, log, consoles = [], [], {}
    levels = concurrency_levels(concurrency)
    for level in sorted({levels[0], levels[-1]}) if warmup_requests else []:  # the first level's shape, the top's batches
        log += warm_up(model, url, csv_file, level, docker_tag=docker_tag, requests=warmup_requests,
                       memory_limit_gb=limit, **kwargs).output
    for level in tqdm(levels, desc=f"perf_analyzer {model}", unit="level",
                      disable=not progress):
        level_csv = csv_file.with_name(f"{csv_file.stem}_c{level}.csv")
        try:
            watched = _run_level(model, url, level_csv, docker_tag, {**kwargs, "concurrency": str(level)}, limit)
            log += watched.output
            consoles[level] = "".join(watched.output)
            table = parse_csv(level_csv)
            rows.append(table.assign(stable=True, peak_rss_mb=watched.peak_mb, client_cores=round(watched.client_cores, 3),
                                     window_requests=_window_requests(kwargs),
                                     requests=measured_requests(watched.output), error=""))
            level_csv.unlink()
        except (UnstableMeasurement, MemoryLimitExceeded) as exc:
            log.append(f"{exc}\n")
            rows.append(pd.DataFrame({"concurrency": [level], "stable": [False], "error": [str(exc)]}))
    csv_file.with_suffix(".log").write_text("".join(log))
    table = pd.concat(rows, ignore_index=True)
    if not table["stable"].any():
        reasons = "; ".join(dict.fromkeys(table["error"]))
        raise UnstableMeasurement(f"no concurrency level of {concurrency} was stable for {model!r}: {reasons}; "
                                  f"see {csv_file.with_suffix('.log')}")
    table.to_csv(csv_file, index=False)
    table.attrs["console"] = consoles
    return table


def console(table: pd.DataFrame, level: int) -> str:
    """What perf_analyzer printed to its console for one measured level of a `run` table (its own summary block:
    request count, throughput, latency percentiles, the server-side split), as it printed it."""
    printed = table.attrs.get("console", {})
    if level not in printed:
        raise KeyError(f"no console output kept for concurrency {level}; kept: {sorted(printed)} (only stable levels "
                       "measured by perf.run keep theirs)")
    return printed[level]


def measure_level(model: str, url: str, csv_file: str | Path, concurrency: int, *, docker_tag: str | None = None,
                  **kwargs) -> dict:
    """One concurrency level as one row; a setting that never stabilizes, passes the memory limit, or whose
    perf_analyzer dies, comes back as stable=False with no numbers and the reason in `error`, so one bad setting does
    not lose the others."""
    try:
        table = run(model, url, csv_file, concurrency=str(concurrency), docker_tag=docker_tag, progress=False, **kwargs)
        return table.iloc[0].to_dict()
    except (UnstableMeasurement, RuntimeError) as exc:
        reason = str(exc).splitlines()[0]
        print(f"{model} at concurrency {concurrency}: {reason}")
        return {"concurrency": concurrency, "stable": False, "throughput": float("nan"), "p99_ms": float("nan"),
                "error": reason}


def repeat_level(model: str, url: str, csv_file: str | Path, concurrency: int, *, repeats: int = 3,
                 **kwargs) -> dict:
    """The same level measured `repeats` times (each a perf_analyzer of its own), as one row (`median_run`): the
    median throughput, with the spread beside it (`throughput_min`/`_max`, `p99_min`/`_max`, `repeats` that were stable)."""
    csv_file = Path(csv_file)
    return median_run([measure_level(model, url, csv_file.with_name(f"{csv_file.stem}_r{i}{csv_file.suffix}"),
                                     concurrency, **kwargs) for i in range(repeats)])


def median_run(runs: Sequence[dict]) -> dict:
    """Several runs of one setting as one row: the median throughput of the stable runs, the other columns from the
    middle run (of an even number, the slower of the two middle ones; its own rate as `middle_throughput`), with the
    spread beside it (`throughput_min`/`_max`, `p99_min`/`_max`, `repeats` that were stable); the last run when none
    was stable."""
    ok = sorted((r for r in runs if r.get("stable")), key=lambda r: r["throughput"])
    if not ok:
        return {**runs[-1], "repeats": 0}
    middle = ok[(len(ok) - 1) // 2]
    return {**middle, "throughput": float(statistics.median(r["throughput"] for r in ok)), "repeats": len(ok),
            "middle_throughput": middle["throughput"],  # the run whose latencies the row shows, its own rate
            "throughput_min": ok[0]["throughput"], "throughput_max": ok[-1]["throughput"],
            "p99_min": min(r["p99_ms"] for r in ok), "p99_max": max(r["p99_ms"] for r in ok)}


def verdict(rows: pd.DataFrame, label: str = "variant") -> pd.DataFrame:
    """Rank rows with a throughput range (`throughput_min`/`_max`, from repeat_level): the fastest wins only when its
    slowest run beats the runner-up's fastest; otherwise both are a tie within noise. Adds `verdict` and the ratio to
    the runner-up with the precision the spread allows."""
    ok = rows[rows["stable"].astype(bool)].sort_values("throughput", ascending=False)
    out = rows.assign(verdict="")
    if len(ok) < 2 or "throughput_min" not in ok:
        return out
    first, second = ok.iloc[0], ok.iloc[1]
    low, high = first["throughput_min"] / second["throughput_max"], first["throughput_max"] / second["throughput_min"]
    if low > 1:
        text = f"wins: {low:.1f}-{high:.1f}x the runner-up" if high - low >= 0.1 else f"wins: {low:.2f}x the runner-up"
        out.loc[first.name, "verdict"] = text
    else:
        tied = ok[ok["throughput_max"] >= first["throughput_min"]]
        out.loc[tied.index, "verdict"] = f"tie within noise ({len(tied)} rows' ranges overlap)"
    return out


def memory_trace(model: str, url: str, csv_file: str | Path, *, concurrency: int, requests: int,
                 memory_limit_gb: float | None = None, **kwargs) -> pd.DataFrame:
    """perf_analyzer's resident memory over one count window of `requests` requests (one trial), sampled every
    0.2 s: the growth of issue #84 made visible, the same count for every transport. Returns columns seconds, rss_mb;
    attrs hold peak_mb, stopped and returncode. With docker_tag the SDK image is pulled first (never inside the
    trace); a perf_analyzer that fails raises with its output (one window cannot be stable, so that exit is the
    trace's normal end, as is the memory guard's stop)."""
    docker_tag = kwargs.pop("docker_tag", None)
    settings = {**kwargs, "concurrency": str(concurrency), "measurement_request_count": requests,
                "measurement_interval_ms": None, "max_trials": 1, "stability_percentage": 999}
    command, env = level_command(model, url, csv_file, docker_tag, **settings)
    if docker_tag:
        ngc.ensure_image(ngc.image("sdk", docker_tag))
    watched = watch(command, {**os.environ, **env}, marker=Path(csv_file).name,
                    limit_gb=memory_limit_gb or default_memory_limit_gb())
    one_window = any("Failed to obtain stable measurement" in line for line in watched.output)
    if watched.returncode != 0 and not watched.stopped and not one_window:
        raise RuntimeError(f"perf_analyzer failed (exit {watched.returncode}) during the memory trace of {model!r}; "
                           f"command:\n  {ngc.as_shell(command)}\n" + "".join(watched.output[-25:]))
    trace = pd.DataFrame(watched.trace, columns=["seconds", "rss_mb"])
    trace.attrs.update(peak_mb=watched.peak_mb, stopped=watched.stopped, returncode=watched.returncode)
    return trace


def best(table: pd.DataFrame, p99_budget_ms: float | None = None) -> pd.Series | None:
    """The stable row with the highest throughput (within the p99 budget when one is given), or None."""
    ok = table[table["stable"].astype(bool)]
    if p99_budget_ms is not None:
        ok = ok[ok["p99_ms"] <= p99_budget_ms]
    return None if ok.empty else ok.loc[ok["throughput"].idxmax()]


def best_per_knob(knobs: pd.DataFrame, p99_budget_ms: float | None = None) -> tuple[dict[str, pd.Series], dict[str, str]]:
    """Each knob's fastest stable row (columns `knob`, `value`), within the p99 budget when any of its settings meets
    it; apart, the knobs none of whose settings was stable, each with its rows' errors."""
    chosen, unstable = {}, {}
    for knob, table in knobs.groupby("knob", sort=False):
        row = best(table, p99_budget_ms)
        row = best(table) if row is None else row
        if row is not None:
            chosen[knob] = row
            continue
        errors = table["error"].dropna().astype(str) if "error" in table else pd.Series(dtype=str)
        unstable[knob] = "; ".join(dict.fromkeys(e for e in errors if e)) or "no stable measurement"
    return chosen, unstable


# --- the knee search and the winner rule: pure functions over measured rows (issue 32, items 3 and 4) ---

RISING = 0.03  # a level "rises" when its throughput is at least 3 % over the best level below it


def _level(row) -> dict:
    """A measured level as a plain dict (a DataFrame row, a Series or a dict)."""
    return dict(row) if not isinstance(row, pd.Series) else row.to_dict()


def _knee_walk(rows, p99_budget_ms: float, rising: float) -> tuple[dict | None, dict | None, str]:
    """(knee, the level above it, why the search stopped there): levels in rising concurrency count while they are
    stable, within the p99 budget and rising; the knee is the last that counts before the first that does not."""
    levels = sorted((_level(r) for r in rows), key=lambda r: r["concurrency"])
    knee, best = None, 0.0
    for row in levels:
        c = int(row["concurrency"])
        if not row.get("stable", True) or row.get("throughput") != row.get("throughput"):  # unstable, or NaN
            return knee, row, f"concurrency {c} gave no stable measurement ({row.get('error') or 'no reason kept'})"
        if row["p99_ms"] > p99_budget_ms:
            why = f"p99 {row['p99_ms']:.2f} ms at concurrency {c} is over the {p99_budget_ms:g} ms budget"
            if knee is not None and row["throughput"] < (1 + rising) * best:  # both tests failed: both are named
                why += (f", and throughput had stopped rising there too ({row['throughput'] / best - 1:+.1%} against "
                        f"{best:.1f} at concurrency {int(knee['concurrency'])}, {rising:.0%} needed)")
            return knee, row, why
        if knee is not None and row["throughput"] < (1 + rising) * best:
            return knee, row, (f"throughput stopped rising at concurrency {c}: {row['throughput']:.1f} is "
                               f"{row['throughput'] / best - 1:+.1%} against the best below it, {best:.1f} at "
                               f"concurrency {int(knee['concurrency'])} ({rising:.0%} needed)")
        knee, best = row, max(best, row["throughput"])
    if knee is None:
        return None, None, ""
    if len(levels) == 1:  # nothing to rise from
        return knee, None, (f"p99 within {p99_budget_ms:g} ms at the only level measured, concurrency "
                            f"{int(knee['concurrency'])}: the knee is at least there")
    return knee, None, (f"p99 within {p99_budget_ms:g} ms and throughput rising up to the highest level measured, "
                        f"concurrency {int(knee['concurrency'])}: the knee is at least there")


def _doubling(start: int, most: int | None, up_to: int) -> list[int]:
    """The levels the search doubles through: start, 2 start, 4 start, ..., the last one capped at `most`."""
    levels, c = [], start
    while c <= up_to and (most is None or c <= most):
        levels.append(c)
        if most is not None and c < most < 2 * c:
            levels.append(most)
        c *= 2
    return levels


def next_level(rows, p99_budget_ms: float, *, start: int = 1, most: int | None = None,
               rising: float = RISING) -> int | None:
    """The next concurrency the knee search measures, or None when it is done. `rows` are the levels measured so far
    (concurrency, throughput, p99_ms; `stable` False for a level without numbers). Concurrency doubles from `start`
    (the last step capped at `most`) while p99 stays within `p99_budget_ms` and throughput rises (at least `rising`
    over the best level below); then one level halfway between the knee (the last level that passed) and the first
    that did not (bisection, once); then it stops. It stops at `most`, and at once when the first level fails."""
    measured = sorted({int(_level(r)["concurrency"]) for r in rows})
    if not measured:
        return start
    knee, above, _ = _knee_walk(rows, p99_budget_ms, rising)
    if above is None:  # every level passed: double on, up to `most`
        top = measured[-1]
        if most is not None and top >= most:
            return None
        return top * 2 if most is None else min(top * 2, most)
    if knee is None:  # the first level already failed: nothing lower to search
        return None
    doubling = set(_doubling(start, most, measured[-1]))
    if any(c not in doubling for c in measured):  # the one bisection level is measured
        return None
    low, high = int(knee["concurrency"]), int(above["concurrency"])
    middle = (low + high) // 2
    return middle if low < middle < high else None


def knee(rows, p99_budget_ms: float, *, rising: float = RISING) -> dict:
    """The knee of measured levels: {"knee": the highest level within the p99 budget whose throughput still rose
    (None when the first level failed), "above": the level above it that did not count (over budget, not rising, or
    unstable; None when none did), "why": why the search stopped there}."""
    found, above, why = _knee_walk(rows, p99_budget_ms, rising)
    return {"knee": found, "above": above, "why": why}


def find_knee(measure: Callable[[int], dict], p99_budget_ms: float, *, start: int = 1, most: int = 1024,
              rising: float = RISING, confirm: Callable[[int], dict] | None = None) -> dict:
    """The knee search, driving `measure(concurrency) -> row` (a dict with throughput, p99_ms, and stable False for a
    level without numbers) level by level as next_level says: knee's result plus `rows`, every level measured, in
    the order measured. With `confirm` (concurrency -> row, the median of several runs), the knee and the level above
    it are measured again that way before the search ends: their rows are replaced (the single run kept as
    `search_run`), and the search goes on where the confirmed rows move it, so one noisy window cannot set the knee."""
    rows: list[dict] = []
    confirmed: set[int] = set()
    while True:
        while (level := next_level(rows, p99_budget_ms, start=start, most=most, rising=rising)) is not None:
            rows.append({**_level(measure(level)), "concurrency": level})
        found = knee(rows, p99_budget_ms, rising=rising)
        todo = [int(r["concurrency"]) for r in (found["knee"], found["above"])
                if confirm is not None and r is not None and int(r["concurrency"]) not in confirmed]
        if not todo:
            return {**found, "rows": rows}
        for c in todo:
            confirmed.add(c)
            single = next(r for r in rows if int(r["concurrency"]) == c)
            again = {**_level(confirm(c)), "concurrency": c, "search_run": single.get("throughput")}
            rows = [again if int(r["concurrency"]) == c else r for r in rows]


def figure(x: float) -> str:
    """A measured figure as a reader takes it in: whole numbers from 100 up, one decimal from 10, three significant
    digits below (so both ends of a range read alike: 42.6-45.0, not 42.6-45)."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 10 else f"{x:.3g}"


def winner(samples: dict[str, Sequence[float]], *, higher_is_better: bool = True, simpler: str | Sequence[str],
           least: int = 3) -> dict:
    """The winner rule: several measurements of each setting (at least `least`, alternated on one server), and a
    winner only when its range (min..max) clears every other setting's range; otherwise a tie within noise, and the
    `simpler` setting is kept (a name, or names simplest first: the simplest among the tied that is not `beaten`;
    when none is, the best median). Returns {"winner": name or None, "kept": name, "verdict": text, "ranges": {name: (min,
    max)}, "medians": {name: median}}."""
    simplest = [simpler] if isinstance(simpler, str) else list(simpler)
    if not simplest or any(name not in samples for name in simplest):
        raise ValueError(f"simpler={simpler!r} is not one of the settings measured (or a list of them): {sorted(samples)}")
    if len(samples) < 2:
        raise ValueError(f"expected at least two settings to compare; found {len(samples)}: {sorted(samples)}")
    short = {name: len(v) for name, v in samples.items() if len(v) < least}
    if short:
        raise ValueError(f"expected at least {least} measurements of each setting; found "
                         + ", ".join(f"{n} of {name!r}" for name, n in short.items()))
    ranges = {name: (float(min(v)), float(max(v))) for name, v in samples.items()}
    medians = {name: float(pd.Series(list(v), dtype=float).median()) for name, v in samples.items()}
    sign = 1 if higher_is_better else -1
    order = sorted(samples, key=lambda name: -sign * medians[name])
    best, others = order[0], order[1:]
    low, high = ranges[best]

    def clears(other: str) -> bool:
        o_low, o_high = ranges[other]
        return low > o_high if higher_is_better else high < o_low

    if all(clears(o) for o in others):
        runner = others[0]
        r_low, r_high = ranges[runner]
        lo, hi = (low / r_high, high / r_low) if higher_is_better else (r_low / high, r_high / low)
        return {"winner": best, "kept": best, "ranges": ranges, "medians": medians,
                "verdict": f"{best} wins: its range {figure(low)}-{figure(high)} clears every other's (against {runner}, "
                           f"{lo:.2f}-{hi:.2f}x)"}
    tied = [best, *[o for o in others if not clears(o)]]
    gone = beaten(samples, higher_is_better=higher_is_better)  # tied with the best, yet behind another in every run
    kept = next((name for name in simplest if name in tied and name not in gone), best)
    why = "the simpler setting" if kept in simplest else f"the best median ({', '.join(simplest)} clearly behind)"
    before = simplest[:simplest.index(kept)] if kept in simplest else simplest
    why += "".join(f"; every run of {name} is behind all of {gone[name]}'s" for name in before if name in tied and name in gone)
    return {"winner": None, "kept": kept, "ranges": ranges, "medians": medians,
            "verdict": f"tie within noise: the ranges of {', '.join(tied)} overlap; keeping {kept} ({why})"}


WINNER_RUNS = 3  # the fewest runs of each finalist from which a winner may be named


def beaten(samples: dict[str, Sequence[float]], *, higher_is_better: bool = True, least: int = 2) -> dict[str, str]:
    """Settings whose every measurement is behind every measurement of another that has at least `least` of them:
    {beaten: the other}. One measurement beats nothing: a single window is noise."""
    def ahead(theirs: Sequence[float], mine: Sequence[float]) -> bool:
        return min(theirs) > max(mine) if higher_is_better else max(theirs) < min(mine)

    found = {}
    for name, mine in samples.items():
        ahead_of = [other for other, theirs in samples.items()
                    if other != name and mine and len(theirs) >= least and ahead(theirs, mine)]
        if ahead_of:
            found[name] = ahead_of[0]
    return found


def _keep(samples: dict[str, Sequence[float]], ranked: Sequence[str], higher_is_better: bool) -> tuple[str, str]:
    """With no winner: the simplest setting (`ranked` simplest first) that has a stable run and is not `beaten`, and why."""
    gone = beaten(samples, higher_is_better=higher_is_better)
    kept = next((name for name in ranked if samples[name] and name not in gone), ranked[0])
    if kept == ranked[0]:
        return kept, "the simpler setting"
    return kept, "the simplest setting left: " + "; ".join(
        f"{name} gave no stable run" if not samples[name] else f"every stable run of {name} is behind all of {gone[name]}'s"
        for name in ranked[:ranked.index(kept)])


def finalists(screen: dict[str, dict], keep: int = 2) -> list[str]:
    """The `keep` fastest stable screening runs' names, filled up in `screen`'s order (simplest first) when fewer
    were stable: an unstable run ranks nothing, and the contest measures every finalist again."""
    if len(screen) < keep:
        raise ValueError(f"expected at least {keep} screened settings; found {len(screen)}: {list(screen)}")
    stable = sorted((name for name, row in screen.items() if row.get("stable")), key=lambda name: -screen[name]["throughput"])
    chosen = (stable + [name for name in screen if name not in stable])[:keep]
    return [name for name in screen if name in chosen]


def alternate(measure: Callable[[str], dict], names: Sequence[str], *, runs: int = 3) -> dict[str, list[dict]]:
    """Each setting measured `runs` times in turns (a b, b a, a b, ...), so a machine that drifts reaches all alike."""
    if runs < 1 or len(names) < 1:
        raise ValueError(f"expected at least one setting and one run; found {len(names)} settings, runs={runs}")
    found: dict[str, list[dict]] = {name: [] for name in names}
    for turn in range(runs):
        shift = turn % len(names)
        for name in [*names[shift:], *names[:shift]]:
            found[name].append(measure(name))
    return found


def contest(measure: Callable[[str], dict], names: Sequence[str], *, simpler: str | Sequence[str], runs: int = 3,
            key: str = "throughput", higher_is_better: bool = True) -> dict:
    """The winner rule run end to end: `names` measured `runs` times each in turns on one server (`alternate`),
    then `winner` on the stable runs. A setting with fewer than `runs` stable runs cannot win: it is named, and the
    simplest setting is kept that has a stable run and is not `beaten`, unless a setting with every run stable clears
    every other's stable runs (then it wins). Below WINNER_RUNS runs no winner is named, and the same setting is kept.
    Returns winner's dict plus "runs" (one row per measurement: name, run, the row)."""
    ranked = list(dict.fromkeys(([simpler] if isinstance(simpler, str) else list(simpler)) + list(names)))
    if len(ranked) > len(set(names)):
        raise ValueError(f"simpler={simpler!r} is not one of the settings to measure (or a list of them): {list(names)}")
    order: list[dict] = []

    def measured(name: str) -> dict:
        row = measure(name)
        order.append({"setting": name, "run": sum(r["setting"] == name for r in order) + 1, **row})
        return row

    found = alternate(measured, names, runs=runs)
    rows = pd.DataFrame(order)  # in the order measured
    samples = {name: [r[key] for r in got if r.get("stable")] for name, got in found.items()}
    short = {name: len(v) for name, v in samples.items() if len(v) < runs}
    if runs < WINNER_RUNS:  # a pipeline check (CI's docker world): measured, but too few runs to name a winner
        kept, why = _keep(samples, ranked, higher_is_better)
        return {"winner": None, "kept": kept, "runs": rows, "ranges": {}, "medians": {},
                "verdict": f"{runs} run(s) each: no winner is named below {WINNER_RUNS} runs; keeping {kept}, {why}"}
    full = [name for name in names if len(samples[name]) == runs]
    if short and full and all(samples.values()):  # a setting measured fully may still clear the short ones' stable runs
        fair = winner(samples, higher_is_better=higher_is_better, simpler=simpler, least=1)
        if fair["winner"] in full:
            return {**fair, "runs": rows, "verdict": fair["verdict"] + " (stable runs: " + ", ".join(
                f"{name} {n} of {runs}" for name, n in short.items()) + ")"}
    if short:
        kept, why = _keep(samples, ranked, higher_is_better)
        return {"winner": None, "kept": kept, "runs": rows, "ranges": {}, "medians": {},
                "verdict": "no winner: fewer stable runs than asked for (" + ", ".join(
                    f"{name}: {n} of {runs}" for name, n in short.items()) + f"); keeping {kept}, {why}"}
    return {**winner(samples, higher_is_better=higher_is_better, simpler=simpler, least=runs), "runs": rows}


_COLUMNS = {"Concurrency": "concurrency", "Inferences/Second": "throughput", "Client Send": "client_send_us",
            "Network+Server Send/Recv": "network_us", "Server Queue": "queue_us",
            "Server Compute Input": "compute_input_us", "Server Compute Infer": "compute_infer_us",
            "Server Compute Output": "compute_output_us", "Client Recv": "client_recv_us",
            "p50 latency": "p50_us", "p90 latency": "p90_us", "p95 latency": "p95_us", "p99 latency": "p99_us",
            "Avg latency": "avg_us"}
# the parts of a request's latency parse_csv gives (ms): they add up to perf_analyzer's mean latency
LATENCY_PARTS = ("client_send_ms", "network_ms", "queue_ms", "compute_input_ms", "compute_infer_ms",
                 "compute_output_ms", "client_recv_ms")


def parse_csv(path: str | Path) -> pd.DataFrame:
    """perf_analyzer's -f CSV (or a sweep that `run` saved) as a table: infer/s, latencies in ms, queue/compute split."""
    raw = pd.read_csv(path)
    if {"concurrency", "throughput", "stable"} <= set(raw.columns):  # already parsed and saved by run()
        return raw
    missing = [c for c in ("Concurrency", "Inferences/Second", "p99 latency") if c not in raw.columns]
    if missing:
        raise ValueError(f"{path} is not a perf_analyzer CSV: columns {missing} missing; found {list(raw.columns)}")
    df = raw.rename(columns=_COLUMNS)[[c for c in _COLUMNS.values() if c in raw.rename(columns=_COLUMNS).columns]]
    for col in [c for c in df.columns if c.endswith("_us")]:
        df[col.replace("_us", "_ms")] = df.pop(col) / 1000.0
    df["compute_ms"] = df[[c for c in ("compute_input_ms", "compute_infer_ms", "compute_output_ms") if c in df]].sum(axis=1)
    return df.sort_values("concurrency").reset_index(drop=True)
