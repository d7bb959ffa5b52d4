"""Start and stop a Triton server (NGC container or local binary) as a context manager that leaves nothing running."""
from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path

import psutil

from . import ngc
from .client import close_clients
from .launchers import CONTAINER_PREFIX, guarded, launcher_for
from .preflight import check_repository, model_folders
from .runtime import RuntimeChoice, choose_runtime
from .standin import Served

READY_POLL_S = 0.1  # how often a starting server is asked whether it is ready (a ResNet18 loads in about 1 s on 2 cores)
UNLOAD_POLL_S = 0.02  # how often a stopping server is asked whether its models are unloaded
UNLOAD_WAIT_S = 10.0  # the longest stop() waits for them before it signals the server all the same


def model_table(log_text: str) -> str:
    """Triton's own startup lines about its models: each "loading" / "successfully loaded" / failure line, then the
    Model | Version | Status table it prints once loading is done (READY, or UNAVAILABLE with the reason)."""
    lines = log_text.splitlines()
    keep = {k for k, ln in enumerate(lines) if re.search(r"model_lifecycle\.cc:\d+\]", ln)}
    for k, line in enumerate(lines):
        if re.match(r"\|\s*Model\s*\|\s*Version\s*\|\s*Status\s*\|", line):
            end = k + 1
            while end < len(lines) and lines[end].startswith(("|", "+")):
                end += 1
            keep.update(range(max(k - 2, 0), end))  # the line that introduces it, the border, the header, the rows
    picked = [lines[k] for k in sorted(keep)]
    if not any("| Model" in ln for ln in picked):
        raise ValueError("the server log has no 'Model | Version | Status' table yet (Triton prints it once the "
                         "models have loaded)")
    return "\n".join(picked)


class ServerError(RuntimeError):
    """The server did not start, or a model did not load; the message carries the log's tail."""


def port_busy(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something already accepts connections on host:port."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _http(method: str, url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    req = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class _PortTaken(ServerError):
    """The server exited because another process held one of its ports."""

    def __init__(self, port: int):
        super().__init__(f"port {port} was taken by another process")
        self.port = port


class _NoInterrupt:
    """Hold back Ctrl-C (SIGINT) while the server is being started or stopped.

    With deliver=True the held-back Ctrl-C is raised on leaving the block; with deliver=False the caller reads
    `pending` and decides (start() must stop the server it has just launched before it lets the interrupt through).
    """

    def __init__(self, deliver: bool = True):
        self.deliver = deliver
        self.pending = False

    def __enter__(self) -> _NoInterrupt:
        try:
            self.previous = signal.signal(signal.SIGINT, lambda *_: setattr(self, "pending", True))
        except ValueError:  # not the main thread: nothing to hold back
            self.previous = None
        return self

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            if self.deliver and self.pending and exc[0] is None:
                raise KeyboardInterrupt


class TritonServer:
    """A Triton server over a model repository: `with TritonServer(...) as server:` or `.start()` / `.stop()`.

    `models` lists the models to load (default: every model in the repository); a model that is not listed is
    neither loaded nor waited for. Models are loaded explicitly (`--model-control-mode=explicit`); poll_secs=N asks
    for the articles' poll mode instead (only without `models`). Before starting, the repository is checked
    (helpers.preflight) unless preflight=False. The server runs under helpers.reaper, so nothing outlives the kernel
    that started it."""

    def __init__(self, model_repository: str | Path, runtime: str | RuntimeChoice = "auto", *,
                 models: Sequence[str] | None = None, tag: str = "series", host: str = "127.0.0.1",
                 http_port: int | None = None, grpc_port: int | None = None, metrics_port: int | None = None,
                 poll_secs: int | None = None, log_file: str | Path | None = None, startup_timeout: float = 180.0,
                 gpu: int | str | None = "series", preflight: bool = True, quiet: bool = False):
        self.repository = Path(model_repository).resolve()
        if not self.repository.is_dir():
            raise FileNotFoundError(f"model repository must be a folder; {self.repository} is not")
        tag = ngc.series_tag(tag)
        self.runtime = runtime if isinstance(runtime, RuntimeChoice) else choose_runtime(runtime, tag, gpu)
        self.launcher = launcher_for(self.runtime)
        self.models = list(models) if models is not None else None
        self.tag, self.host, self.poll_secs, self.gpus = tag, host, poll_secs, ngc.gpus_flag(gpu)
        self.startup_timeout, self.preflight, self.quiet = startup_timeout, preflight, quiet
        # created by start() and removed by stop(): a server built only to print its command leaves nothing
        self.workdir = Path(tempfile.gettempdir()) / f"triton-{uuid.uuid4().hex[:8]}"
        self.log_file = Path(log_file).resolve() if log_file else self.workdir / "tritonserver.log"
        self._asked_ports = (http_port, grpc_port, metrics_port)
        self._pick_ports()
        self.served: list[Served] = []
        self.version = ""
        self._proc: subprocess.Popen | None = None
        self._ready = False  # started and answered ready: stop() may ask it to unload its models
        self._explicit = False  # started with explicit model control (set by _launch, from the command it ran)

    @property
    def url(self) -> str:
        """host:port of the HTTP endpoint, as tritonclient.http wants it."""
        return f"{self.host}:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        """host:port of the Prometheus metrics endpoint (helpers.metrics.scrape reads it)."""
        return f"{self.host}:{self.metrics_port}"

    @property
    def grpc_url(self) -> str:
        """host:port of the gRPC endpoint."""
        return f"{self.host}:{self.grpc_port}"

    def model_names(self) -> list[str]:
        """The models this server loads: `models`, or every model folder of the repository."""
        return self.models if self.models is not None else [p.name for p in model_folders(self.repository)]

    def command(self) -> list[str]:
        """The exact command that starts this server (a `docker run` line in docker mode)."""
        return self.launcher.command(self)

    def _pick_ports(self, avoid: Sequence[int] = ()) -> None:
        """Three distinct ports (the ones asked for, else free ones, never one in `avoid`) and the container's name."""
        picked: list[int] = [*avoid]
        for asked, default in zip(self._asked_ports, (8000, 8001, 8002)):
            picked.append(self.launcher.pick_port(asked, default, self.host, avoid=picked))
        self.http_port, self.grpc_port, self.metrics_port = picked[-3:]
        self.container_name = f"{CONTAINER_PREFIX}{self.http_port}"

    def start(self, attempts: int = 3) -> TritonServer:
        """Check the repository, start the server, and wait until it and every model it loads are ready.

        A port picked here can be taken by another process before the server binds it (Triton binds after loading
        its models); the server is then started again on new ports, up to `attempts` times in all."""
        if self._proc is not None:
            raise ServerError(f"server already running at {self.url}")
        if self.preflight:
            check_repository(self.repository, self.models)
        for attempt in range(1, attempts + 1):
            busy = [port for port in (self.http_port, self.grpc_port, self.metrics_port) if port_busy(port, self.host)]
            if busy and (set(busy) & set(self._asked_ports) or attempt == attempts):
                raise ServerError(f"port {busy[0]} on {self.host} is busy (another Triton server?): stop it, "
                                  "or pass free ports as http_port=, grpc_port=, metrics_port=")
            if busy:  # a port picked when this object was made was taken since: pick again, as after a lost bind
                print(f"port {busy[0]} was taken after it was picked; starting on other ports")
                self._pick_ports(avoid=busy)
                continue
            self.launcher.before_start(self)  # docker: pull the image, with progress, before the clock starts
            started = time.monotonic()
            try:
                self._launch()
                self._wait_ready()
                self._ready = True
                break
            except _PortTaken as taken:
                tail = self.log_tail()  # stop() removes the log with the server's folder
                if self._stop_whatever_comes():
                    raise KeyboardInterrupt from taken
                if taken.port in self._asked_ports or attempt == attempts:
                    raise ServerError(f"{taken} (attempt {attempt} of {attempts}): pass other ports as http_port=, "
                                      f"grpc_port=, metrics_port=\n{tail}") from None
                print(f"{taken} before the server bound it; starting again on other ports")
                self._pick_ports(avoid=[self.http_port, self.grpc_port, self.metrics_port])
            except BaseException as exc:
                if self._stop_whatever_comes() and not isinstance(exc, KeyboardInterrupt):
                    raise KeyboardInterrupt from exc
                raise
        self.version = json.loads(_http("GET", f"http://{self.url}/v2")[1]).get("version", "?")
        if not self.quiet:
            print(f"Triton {self.version} ready in {time.monotonic() - started:.1f} s: http://{self.url}  "
                  f"grpc {self.grpc_url}  ({self.runtime.name}; log {self.log_file})")
            for s in self.served:
                print(f"  {s}")
        return self

    def _launch(self) -> None:
        """Prepare the repository and start the server under the reaper, Ctrl-C held back until it exists."""
        held = _NoInterrupt(deliver=False)
        with held:
            self.workdir.mkdir(parents=True, exist_ok=True)
            self.served, extra_env = self.launcher.prepare(self)
            env = {**os.environ, **extra_env}
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            command = self.command()
            self._explicit = "--model-control-mode=explicit" in command  # stop() may unload; poll mode refuses it
            with open(self.log_file, "wb") as log:
                self._proc = subprocess.Popen(guarded(command, self.launcher.cleanup_command(self)),
                                              stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            atexit.register(self.stop)
        if held.pending:  # a Ctrl-C during the launch: the server exists now, so the caller stops it first
            raise KeyboardInterrupt

    def _stop_whatever_comes(self) -> bool:
        """stop() until it has run to the end, even when a Ctrl-C lands before it holds them back; whether one came."""
        interrupted = False
        while True:
            try:
                self.stop()
                return interrupted
            except KeyboardInterrupt:  # a second call finishes the work, or finds it done
                interrupted = True

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        expected = {s.name for s in self.served if s.how != "not served"}
        wanted = set(self.model_names())
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                taken = re.search(r"Socket '[^']*:(\d+)' already in use", self.log_file.read_text(errors="replace"))
                if taken:
                    raise _PortTaken(int(taken.group(1)))
                loading = self._models_still_loading()
                during = f" while loading model {', '.join(repr(m) for m in loading)}" if loading else ""
                raise ServerError(f"tritonserver exited with code {self._proc.returncode}{during} before it was "
                                  f"ready\n{self.log_tail()}")
            try:
                status, body = _http("POST", f"http://{self.url}/v2/repository/index")
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                time.sleep(READY_POLL_S)
                continue
            if status == 200:
                index = {m["name"]: m for m in json.loads(body) if m["name"] in wanted}
                failed = [m for m in index.values() if m.get("state") == "UNAVAILABLE"]
                if failed:
                    lines = "; ".join(f"model '{m['name']}': {m.get('reason', 'no reason given')}" for m in failed)
                    raise ServerError(f"model failed to load: {lines}\n{self.log_tail()}")
                if expected <= {n for n, m in index.items() if m.get("state") == "READY"}:
                    if _http("GET", f"http://{self.url}/v2/health/ready")[0] == 200:
                        return
            time.sleep(READY_POLL_S)
        raise ServerError(f"server not ready after {self.startup_timeout:.0f} s\n{self.log_tail()}")

    def _models_still_loading(self) -> list[str]:
        """Models the log says began loading and never finished (a crash during load names its model)."""
        if not self.log_file.exists():
            return []
        text = self.log_file.read_text(errors="replace")
        started = re.findall(r'"loading: ([^:"]+):\d+"', text)
        done = set(re.findall(r"successfully loaded '([^']+)'", text))
        return [m for m in dict.fromkeys(started) if m not in done]

    def model_table(self) -> str:
        """The model lines and the Model | Version | Status table of this server's log (model_table)."""
        return model_table(self.log_file.read_text(errors="replace"))

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server log."""
        if not self.log_file.exists():
            return f"(no log at {self.log_file})"
        tail = self.log_file.read_text(errors="replace").splitlines()[-lines:]
        return f"--- last {len(tail)} lines of {self.log_file} ---\n" + "\n".join(tail)

    def stop(self, timeout: float = 25.0) -> None:
        """Stop the server and every process it started; safe to call twice, and Ctrl-C cannot cut it short."""
        with _NoInterrupt():
            proc, self._proc = self._proc, None
            ready, self._ready = self._ready, False
            if proc is not None:
                atexit.unregister(self.stop)
                close_clients([self.url, self.grpc_url])  # or Triton waits for their open connections (10 s)
                try:  # the reaper's group: tritonserver and the backend stubs it started
                    group = psutil.Process(proc.pid).children(recursive=True)
                except psutil.NoSuchProcess:
                    group = []
                if proc.poll() is None:
                    if ready:
                        self._unload_models()
                    proc.terminate()  # the reaper stops the group, and removes the container in docker mode
                    try:
                        proc.wait(timeout)
                    except subprocess.TimeoutExpired:  # the reaper itself is stuck: kill its group, clean up here
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                        cleanup = self.launcher.cleanup_command(self)
                        if cleanup:
                            subprocess.run(cleanup, capture_output=True, timeout=60)
                _, alive = psutil.wait_procs(group, timeout=5)
                for child in alive:
                    child.kill()
                psutil.wait_procs(alive, timeout=5)
            if self.workdir.exists():
                shutil.rmtree(self.workdir, ignore_errors=True)

    def _unload_models(self) -> None:
        """Unload every loaded model and wait, at most UNLOAD_WAIT_S, until none is left (explicit mode only).

        On its stop signal Triton unloads the models itself, but checks that they are gone only once a second
        (InferenceServer::Stop), so each stop waited a second more than the unloading took."""
        if not self._explicit:  # poll mode refuses unload requests
            return
        repository = f"http://{self.url}/v2/repository"
        busy = ("READY", "LOADING", "UNLOADING")
        deadline = time.monotonic() + UNLOAD_WAIT_S
        try:
            status, body = _http("POST", f"{repository}/index")
            loaded = {m["name"] for m in json.loads(body) if m.get("state") in busy} if status == 200 else set()
            asked = [name for name in sorted(loaded)
                     if _http("POST", f"{repository}/models/{urllib.parse.quote(name)}/unload")[0] == 200]
            while asked and time.monotonic() < deadline:
                status, body = _http("POST", f"{repository}/index")
                if status != 200 or not any(m.get("state") in busy for m in json.loads(body)):
                    return
                time.sleep(UNLOAD_POLL_S)
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError) as exc:
            # a server that does not answer is stopped by its signal all the same
            print(f"unloading before the stop failed ({exc!r}); stopping the server with its models loaded",
                  file=sys.stderr)

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> TritonServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class SharedServer:
    """A Triton server that someone else runs (a workshop room's shared server), used read-only: the attributes a
    notebook reads from TritonServer (url, grpc_url, metrics_url, served, version, runtime); start() checks that it
    is ready and serves `models`; stop() leaves it running, since it is not ours."""

    def __init__(self, url: str, models: Sequence[str], *, grpc_port: int | None = None,
                 metrics_port: int | None = None):
        host, _, port = url.removeprefix("http://").rstrip("/").partition(":")
        if not host or (port and not port.isdigit()):
            raise ValueError(f"server_url must look like 'host' or 'host:8000'; got {url!r}")
        self.host, self.http_port = host, int(port or 8000)
        self.grpc_port = grpc_port or self.http_port + 1    # Triton's defaults: 8000, 8001, 8002
        self.metrics_port = metrics_port or self.http_port + 2
        self.models = list(models)
        self.runtime = RuntimeChoice("shared", f"the shared server at {self.url}, started by someone else")
        self.served: list[Served] = []
        self.version = ""

    url = TritonServer.url
    grpc_url = TritonServer.grpc_url
    metrics_url = TritonServer.metrics_url

    def start(self) -> SharedServer:
        """Check that the shared server answers and that every model this notebook needs is READY on it."""
        try:
            status = _http("GET", f"http://{self.url}/v2/health/ready", timeout=5)[0]
            index = json.loads(_http("POST", f"http://{self.url}/v2/repository/index", timeout=5)[1])
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ServerError(f"no Triton server answers at http://{self.url} ({exc}): check server_url, or leave it "
                              "empty to start this notebook's own server") from None
        if status != 200:
            raise ServerError(f"the server at http://{self.url} is not ready (HTTP {status})")
        ready = {m["name"] for m in index if m.get("state") == "READY"}
        missing = [m for m in self.models if m not in ready]
        if missing:
            raise ServerError(f"models {missing} are not ready on the shared server at {self.url} (it has "
                              f"{sorted(ready)}): ask whoever runs it to load them")
        self.version = json.loads(_http("GET", f"http://{self.url}/v2")[1]).get("version", "?")
        self.served = [Served(name, "shared", f"on the server at {self.url}") for name in self.models]
        print(f"using the shared Triton {self.version} at http://{self.url} (grpc {self.grpc_url}): {self.models}")
        return self

    def stop(self) -> None:
        """Nothing to stop: the shared server stays up for everyone else."""

    @property
    def running(self) -> bool:
        """Whether the shared server answers."""
        try:
            return _http("GET", f"http://{self.url}/v2/health/live", timeout=2)[0] == 200
        except (urllib.error.URLError, OSError):
            return False

    def __enter__(self) -> SharedServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
