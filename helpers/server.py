"""Start and stop a Triton server (NGC container or local binary) as a context manager that leaves nothing running."""
from __future__ import annotations

import atexit
import ctypes
import json
import os
import py_compile
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

from . import ngc
from .repository import DEFAULT_FILENAME, PLATFORM_BACKEND, read_config, to_text
from .runtime import RuntimeChoice, choose_runtime

STANDIN_SOURCE = Path(__file__).with_name("standin_model.py")
_FORMAT = {"onnxruntime_onnx": "onnx", "pytorch_libtorch": "torchscript"}


class ServerError(RuntimeError):
    """The server did not start, or a model did not load; the message carries the log's tail."""


@dataclass
class Served:
    """How one model of the repository is served."""

    name: str
    how: str  # "native", "python stand-in", or "not served"
    detail: str

    def __str__(self) -> str:
        return f"{self.name}: {self.how} ({self.detail})"


def prepare_served_repository(source: Path, target: Path, backends: list[str]) -> list[Served]:
    """Mirror `source` into `target`: native models as links, others as Python-backend stand-ins of the same artifact."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    served = []
    for model_dir in sorted(p for p in source.iterdir() if (p / "config.pbtxt").is_file()):
        config = read_config(model_dir)
        backend = config.backend or PLATFORM_BACKEND.get(config.platform, "")
        if backend in backends:
            (target / model_dir.name).symlink_to(model_dir.resolve(), target_is_directory=True)
            served.append(Served(config.name, "native", f"{backend} backend"))
            continue
        if config.platform not in _FORMAT:
            served.append(Served(config.name, "not served",
                                 f"the {backend} backend is missing here and nothing else can run a {config.platform} file"))
            continue
        filename = config.default_model_filename or DEFAULT_FILENAME[config.platform]
        wants_gpu = any(g.kind == g.KIND_GPU for g in config.instance_group)
        device = "cuda" if wants_gpu and _FORMAT[config.platform] == "torchscript" else "cpu"  # ORT here is CPU-only
        standin = type(config)()
        standin.CopyFrom(config)
        standin.platform, standin.backend = "", "python"
        standin.ClearField("default_model_filename")
        for group in standin.instance_group:
            group.kind = group.KIND_MODEL  # the stand-in places itself on DEVICE
        for key, value in {"EXECUTION_ENV_PATH": sys.prefix, "ARTIFACT": filename,
                           "ARTIFACT_FORMAT": _FORMAT[config.platform], "DEVICE": device}.items():
            standin.parameters[key].string_value = value
        out = target / model_dir.name
        out.mkdir()
        (out / "config.pbtxt").write_text(to_text(standin))
        for version in (p for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit()):
            (out / version.name).mkdir()
            shutil.copyfile(STANDIN_SOURCE, out / version.name / "model.py")
            # Compile now: a __pycache__ appearing after start would make poll mode reload the model.
            py_compile.compile(str(out / version.name / "model.py"), doraise=True)
            (out / version.name / filename).symlink_to((version / filename).resolve())
        runner = "ONNX Runtime" if _FORMAT[config.platform] == "onnx" else "TorchScript"
        served.append(Served(config.name, "python stand-in",
                             f"no {backend} backend here; Triton's Python backend runs the same {filename} with "
                             f"{runner} on {device}, same name, inputs, outputs and batching"))
    return served


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_busy(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something already accepts connections on host:port."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _die_with_parent() -> None:
    """In the child: ask Linux to send SIGTERM when the process that started us dies (a kernel restart)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _http(method: str, url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    req = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class TritonServer:
    """A Triton server over a model repository: `with TritonServer(...) as server:` or `.start()` / `.stop()`."""

    def __init__(self, model_repository: str | Path, runtime: str | RuntimeChoice = "auto", *,
                 tag: str = ngc.NGC_TAG, host: str = "127.0.0.1", http_port: int | None = None,
                 grpc_port: int | None = None, metrics_port: int | None = None, poll_secs: int | None = 30,
                 log_file: str | Path | None = None, startup_timeout: float = 180.0, gpus: str | None = "all",
                 quiet: bool = False):
        self.repository = Path(model_repository).resolve()
        if not self.repository.is_dir():
            raise FileNotFoundError(f"model repository must be a folder; {self.repository} is not")
        self.runtime = runtime if isinstance(runtime, RuntimeChoice) else choose_runtime(runtime)
        self.tag, self.host, self.poll_secs, self.gpus = tag, host, poll_secs, gpus
        self.startup_timeout, self.quiet = startup_timeout, quiet
        self.workdir = Path(tempfile.mkdtemp(prefix="triton-"))
        self.log_file = Path(log_file) if log_file else self.workdir / "tritonserver.log"
        docker = self.runtime.name == "docker"
        pick = (lambda p, d: p or d) if docker else (lambda p, d: p or free_port(host))
        self.http_port, self.grpc_port = pick(http_port, 8000), pick(grpc_port, 8001)
        self.metrics_port = pick(metrics_port, 8002)
        self.served: list[Served] = []
        self.version = ""
        self._proc: subprocess.Popen | None = None
        self._container = f"triton-tutorials-{self.http_port}"

    @property
    def url(self) -> str:
        """host:port of the HTTP endpoint, as tritonclient.http wants it."""
        return f"{self.host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        """host:port of the gRPC endpoint."""
        return f"{self.host}:{self.grpc_port}"

    def command(self) -> list[str]:
        """The exact command that starts this server (a `docker run` line in docker mode)."""
        poll = ["--model-control-mode=poll", f"--repository-poll-secs={self.poll_secs}"] if self.poll_secs else []
        if self.runtime.name == "docker":
            return ngc.docker_run(
                ngc.image("tritonserver", self.tag),
                ["tritonserver", "--model-repository=/models", "--exit-timeout-secs=10", *poll],
                volumes={self.repository: "/models"}, ports={self.http_port: 8000, self.grpc_port: 8001,
                                                             self.metrics_port: 8002},
                host=self.host, gpus=self.gpus, name=self._container,
                extra=["--ipc=host"])  # shares /dev/shm with clients on this host (system shared memory)
        local = self.runtime.local
        return [str(local.binary), f"--model-repository={self.workdir / 'models'}",
                f"--backend-directory={local.backend_dir}", f"--http-address={self.host}",
                f"--http-port={self.http_port}", f"--grpc-address={self.host}", f"--grpc-port={self.grpc_port}",
                f"--metrics-port={self.metrics_port}", "--exit-on-error=false", "--exit-timeout-secs=10", *poll]

    def start(self) -> TritonServer:
        """Start the server and wait until it and every model in the repository are ready."""
        if self._proc is not None:
            raise ServerError(f"server already running at {self.url}")
        for port in (self.http_port, self.grpc_port, self.metrics_port):
            if port_busy(port, self.host):
                raise ServerError(f"port {port} on {self.host} is busy (another Triton server?): stop it, "
                                  "or pass free ports as http_port=, grpc_port=, metrics_port=")
        env = dict(os.environ)
        if self.runtime.name == "local":
            self.served = prepare_served_repository(self.repository, self.workdir / "models",
                                                    self.runtime.local.backends)
            env.update(self.runtime.local.env)
        else:
            self.served = [Served(p.name, "native", "NGC container")
                           for p in sorted(self.repository.iterdir()) if (p / "config.pbtxt").is_file()]
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_file, "wb")
        started = time.monotonic()
        self._proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                      preexec_fn=_die_with_parent, start_new_session=True)
        log.close()
        atexit.register(self.stop)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.version = json.loads(_http("GET", f"http://{self.url}/v2")[1]).get("version", "?")
        if self.quiet:
            return self
        print(f"Triton {self.version} ready in {time.monotonic() - started:.1f} s: http://{self.url}  "
              f"grpc {self.grpc_url}  ({self.runtime.name}; log {self.log_file})")
        for s in self.served:
            print(f"  {s}")
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        expected = {s.name for s in self.served if s.how != "not served"}
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ServerError(f"tritonserver exited with code {self._proc.returncode} before it was ready\n"
                                  f"{self.log_tail()}")
            try:
                status, body = _http("POST", f"http://{self.url}/v2/repository/index")
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                time.sleep(0.5)
                continue
            if status == 200:
                index = {m["name"]: m for m in json.loads(body)}
                failed = [m for m in index.values() if m.get("state") == "UNAVAILABLE"]
                if failed:
                    lines = "; ".join(f"model '{m['name']}': {m.get('reason', 'no reason given')}" for m in failed)
                    raise ServerError(f"model failed to load: {lines}\n{self.log_tail()}")
                if expected <= {n for n, m in index.items() if m.get("state") == "READY"}:
                    if _http("GET", f"http://{self.url}/v2/health/ready")[0] == 200:
                        return
            time.sleep(0.5)
        raise ServerError(f"server not ready after {self.startup_timeout:.0f} s\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server log."""
        if not self.log_file.exists():
            return f"(no log at {self.log_file})"
        tail = self.log_file.read_text(errors="replace").splitlines()[-lines:]
        return f"--- last {len(tail)} lines of {self.log_file} ---\n" + "\n".join(tail)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server and every process it started; safe to call twice."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        atexit.unregister(self.stop)
        try:  # backend stubs are children of tritonserver; remember them before it goes
            children = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            children = []
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        _, alive = psutil.wait_procs(children, timeout=10)
        for child in alive:
            child.kill()
        psutil.wait_procs(alive, timeout=5)
        if self.runtime.name == "docker":
            subprocess.run(["docker", "rm", "-f", self._container], capture_output=True)

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> TritonServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
