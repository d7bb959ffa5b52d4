"""Shared fixtures: a tiny ONNX classifier stand-in, a model repository, and a process census for leak checks."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import psutil
import pytest

TRITON_PROCESS_NAMES = ("tritonserver", "triton_python_backend_stub", "triton_python_b")


def pytest_addoption(parser):
    parser.addoption("--repeat", type=int, default=1,
                     help="run each test marked `reliability` this many times in a row (CI: 20)")


def pytest_generate_tests(metafunc):
    repeat = metafunc.config.getoption("repeat")
    if repeat > 1 and metafunc.definition.get_closest_marker("reliability"):
        metafunc.fixturenames.append("repetition")
        metafunc.parametrize("repetition", range(1, repeat + 1), ids=lambda i: f"run{i}")


@pytest.fixture(autouse=True)
def test_id(monkeypatch) -> str:
    """A tag in the environment of every process this test starts, so the census counts only this test's processes
    (tests can then run side by side: `--repeat 20 -n 3` in CI)."""
    tag = uuid.uuid4().hex
    monkeypatch.setenv("TUTORIAL_TEST_ID", tag)
    return tag


def triton_processes(everyone: bool = False, tag: str | None = None) -> list[psutil.Process]:
    """Live (non-zombie) tritonserver and Python-backend stub processes started by the running test, or by the
    processes given `tag` (every one on the machine with everyone=True, or outside a test)."""
    tag = None if everyone else tag or os.environ.get("TUTORIAL_TEST_ID")
    found = []
    for proc in psutil.process_iter(["name", "status"]):
        if proc.info["name"] and proc.info["name"].startswith(TRITON_PROCESS_NAMES) \
                and proc.info["status"] != psutil.STATUS_ZOMBIE:
            try:
                if tag and proc.environ().get("TUTORIAL_TEST_ID") != tag:
                    continue
            except psutil.NoSuchProcess:
                continue
            found.append(proc)
    return found


def make_onnx(path: Path, *, batch: int | None = None, in_dtype: int = 1, features: int = 8, classes: int = 4,
              seed: int = 0) -> Path:
    """A small linear classifier as ONNX: X[batch, features] @ W -> Y[batch, classes]."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = np.random.default_rng(seed).standard_normal((features, classes)).astype(np.float32)
    b = batch if batch else "batch"
    graph = helper.make_graph(
        [helper.make_node("Cast", ["X"], ["Xf"], to=TensorProto.FLOAT), helper.make_node("MatMul", ["Xf", "W"], ["Y"])],
        "tiny", [helper.make_tensor_value_info("X", in_dtype, [b, features])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [b, classes])],
        [numpy_helper.from_array(weights, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


@pytest.fixture
def tiny_onnx(tmp_path) -> Path:
    return make_onnx(tmp_path / "tiny.onnx")


@pytest.fixture
def tiny_repo(tmp_path, tiny_onnx) -> Path:
    """A repository with `tiny` (dynamic batch, max 8, dynamic batching on)."""
    from helpers import repository

    repo = tmp_path / "models"
    config = repository.config_from_onnx("tiny", tiny_onnx, max_batch_size=8, preferred_batch_sizes=[4],
                                         max_queue_delay_us=100)
    repository.add_model(repo, config, tiny_onnx)
    return repo


CI_RUN_TAG = "ci-run"


@contextlib.contextmanager
def tagged(tag: str):
    """TUTORIAL_TEST_ID=tag for every process started inside (a session fixture runs before a test's own tag)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TUTORIAL_TEST_ID", tag)
        yield


FAKE_DOCKER = Path(__file__).resolve().parent / "fakedocker"


@pytest.fixture
def fake_docker(tmp_path, monkeypatch):
    """The test `docker` first on PATH, with its own state; yields the log of every docker call."""
    log = tmp_path / "docker-calls.jsonl"
    monkeypatch.setenv("PATH", f"{FAKE_DOCKER}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_PYTHON", sys.executable)
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(tmp_path / "docker-state"))
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(log))
    yield log


# the TensorRT steps fail there, said so; 16 is not run there: its commands are the launcher calls 14 makes, and the
# knee's logic (levels, levers, the in-process reference) is the ci world's to test
DOCKER_NOTEBOOKS = ["03", "04", "05", "06", "07", "10", "11", "12", "13", "14", "15"]
DOCKER_RUN_TAG = "docker-run"
# the newest release the policy table has (not the default, 24.05): every server and container of the run must use it.
# CI runs this one; the other end of the table runs the same way with TUTORIAL_DOCKER_WORLD_TAG=24.05 ./tutorial test
# tests/test_series_docker.py (every tag's commands are checked against its flag tables in every CI run:
# test_docker_analyzer.py::test_every_docker_command_of_the_series_is_accepted_by_each_tags_binaries)
DOCKER_TAG = os.environ.get("TUTORIAL_DOCKER_WORLD_TAG", "26.02")
ROOT = Path(__file__).resolve().parents[1]
SHARED_RUNS = {"ci_run", "docker_run", "docker_series"}  # fixtures of the two executed worlds, one run each per session
_SERIES = """import json, shutil, sys, time
from pathlib import Path
from helpers import series
runs, status_file, reuse = json.loads(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
status = 1
try:
    if reuse:  # the ci run's ONNX export (its notebook 02), copied once that notebook has run, not exported again
        deadline = time.monotonic() + 900
        while not Path(reuse["exported"]).exists() and not Path(reuse["ended"]).exists() and time.monotonic() < deadline:
            time.sleep(2)
        if Path(reuse["exported"]).exists():
            shutil.copytree(reuse["source"], reuse["target"])
            runs = runs[1:]
            print(f"the ci run's ONNX export, copied from {reuse['source']}", flush=True)
    for run in runs:
        series.run_series(**{**run, "paths": [Path(p) for p in run["paths"]]} if "paths" in run else run)
    status = 0
finally:
    status_file.write_text(str(status))
"""
_interrupted = False
# pytest-timeout's limit (pyproject.toml: 900 s a test) for the tests that execute or wait for an executed run: the ci
# run took 770-904 s of setup on CI's 2 cores beside the docker world and the other worker (2026-12-03)
RUN_TIMEOUT_S = 2400
DOCKER_WORLD_NICE = ["nice", "-n", "5"] if shutil.which("nice") else []


def pytest_keyboard_interrupt(excinfo):
    """A Ctrl-C ends the session now: the docker world is stopped, not waited for."""
    global _interrupted
    _interrupted = True


def pytest_collection_modifyitems(session, config, items):
    """The tests that read an executed run go first (its first test starts the ci run), the rest after them. Under
    xdist (CI: `-n 2 --dist worksteal`) the first worker takes the ci run and the readers, and the other works through
    the rest, stealing from the end of the first's queue: the tests that need no run, while the run executes. The
    tests that need only the run's first notebooks (`ci_run_through`) go last, so they fall to the other worker, which
    runs them as soon as those notebooks have finished, while the run goes on."""
    readers = [item for item in items if SHARED_RUNS & set(item.fixturenames)]
    early = [item for item in items if "ci_run_through" in item.fixturenames]  # last: the other worker's, mid-run
    items[:] = readers + [item for item in items if item not in readers and item not in early] + early
    for item in readers + early:  # they may execute or wait for a whole run: slower is longer, never a timeout
        item.add_marker(pytest.mark.timeout(RUN_TIMEOUT_S))


def shared_dir(tmp_path_factory) -> Path:
    """A folder every xdist worker of this session sees (the session's temporary folder; its parent under xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


class BackgroundSeries:
    """The docker world's notebooks, run by a separate Python process beside the ci run (each world's notebooks
    executed once, the two at the same time). It checks the docker path's commands, configs and control flow, not
    speed: it runs at a lower CPU priority (nice 5) and with one PyTorch/OpenMP thread, so that on two cores the ci
    run, whose numbers the tests read, is not starved (2026-12-02: beside the docker world at full priority, the ci
    run's notebook 11 saw 2-11 infer/s and no stable level).
    Its exit status lands in <run>/exit_status, so another xdist worker can wait for it too (`attach`)."""

    def __init__(self, run_dir: Path, start: bool = True, reuse: dict | None = None):
        self.run_dir, self.status, self.console = run_dir, run_dir / "exit_status", run_dir / "console.txt"
        self.proc = None
        if not start:
            return
        folders = {"models_dir": str(run_dir / "models"), "build_dir": str(run_dir / "build")}  # apart from the ci run's
        from helpers import series

        # the ResNet18 track first, so that its measuring notebooks start while the ci run is in its Keras track
        # (2026-12-02, both worlds in the numbered order: their two 13s ran at the same time, 148 s and 154 s)
        order = sorted(DOCKER_NOTEBOOKS, key=lambda prefix: (prefix < "10", prefix))
        paths = [str(next(nb for nb in series.notebooks() if nb.stem.startswith(prefix))) for prefix in order]
        runs = [dict(run_dir=str(run_dir / "prerequisites"), profile="ci", only=["02"], overrides=folders),  # its ONNX
                dict(run_dir=str(run_dir), profile="docker-ci", only=DOCKER_NOTEBOOKS, overrides=folders, paths=paths)]
        env = {**os.environ, "PATH": f"{FAKE_DOCKER}{os.pathsep}{os.environ['PATH']}", "FAKE_DOCKER_PYTHON": sys.executable,
               "FAKE_DOCKER_STATE": str(run_dir / "docker-state"), "FAKE_DOCKER_LOG": str(run_dir / "docker.jsonl"),
               "TUTORIAL_NGC_TAG": DOCKER_TAG, "TUTORIAL_TEST_ID": DOCKER_RUN_TAG, "OMP_NUM_THREADS": "1",
               # the kernels act as a user who is not root: files a root container wrote are not theirs to delete
               "PYTHONPATH": os.pathsep.join(p for p in (str(FAKE_DOCKER / "userfs"), os.environ.get("PYTHONPATH")) if p)}
        with open(self.console, "w") as out:
            self.proc = subprocess.Popen([*DOCKER_WORLD_NICE, sys.executable, "-c", _SERIES, json.dumps(runs),
                                          str(self.status), json.dumps(reuse)], env=env,
                                         cwd=run_dir, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    @classmethod
    def attach(cls, run_dir: Path) -> "BackgroundSeries":
        """The run another worker of this session started."""
        return cls(run_dir, start=False)

    def result(self, timeout: float = 1200) -> Path:
        """The finished run's folder; its console output if it failed or did not end in `timeout` seconds."""
        import time

        deadline = time.monotonic() + timeout
        while not self.status.exists() and time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                break
            time.sleep(1)
        if not self.status.exists() and (self.proc is None or self.proc.poll() is None):
            self.stop()
            raise AssertionError(f"the docker-world run took over {timeout} s:\n{self.console.read_text()[-3000:]}")
        code = int(self.status.read_text() or 1) if self.status.exists() else self.proc.returncode
        assert code == 0, f"the docker-world run failed ({code}):\n{self.console.read_text()[-3000:]}"
        return self.run_dir

    def stop(self, grace: float = 0.0) -> None:
        """Let it finish for up to `grace` seconds (a reader in another worker may wait for it), then stop it as a
        Ctrl-C would: the kernel's clean-up stops its server; whatever is left of its session after 60 s is killed."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(grace)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture(scope="session")
def docker_series(request, tmp_path_factory):
    """The docker world's run, started in the background by the first test (of any xdist worker) that needs it, or
    when the ci run starts and a test of this session will need it; the worker that started it lets it finish at
    the end of its session (stops it at once after a Ctrl-C)."""
    from helpers.perf import exclusive

    shared = shared_dir(tmp_path_factory)
    with exclusive(shared / "docker-run.lock"):
        run_dir = shared / "docker-run"
        if run_dir.exists():
            started = BackgroundSeries.attach(run_dir)
        else:
            run_dir.mkdir()
            # where the ci run executes in this session, its notebook 02 exports the ONNX model both worlds serve
            ci_here = not os.environ.get("TUTORIAL_CI_RUN") and any("ci_run" in item.fixturenames
                                                                   for item in request.session.items)
            reuse = {"exported": str(shared / "ci-run" / "results" / "02_export_onnx.json"),
                     "ended": str(shared / "ci-run.json"), "source": str(ROOT / "build" / "keras"),
                     "target": str(run_dir / "build" / "keras")} if ci_here else None
            started = BackgroundSeries(run_dir, reuse=reuse)
    yield started
    started.stop(grace=0 if _interrupted else 900)


def _held_by_another(lock: Path) -> bool:
    """Whether another process holds the lock file `lock` now (the ci run executing on another xdist worker)."""
    import fcntl

    try:
        descriptor = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)  # closing the descriptor releases a lock taken through it
    return False


@pytest.fixture
def ci_run_through(request, tmp_path_factory):
    """A function: the ci run's folder as soon as its notebook `stem` has finished. While another xdist worker executes
    the run, this waits only for that notebook's results (what the test reads, in the run folder, build/ and models/,
    is then written); otherwise it is the whole run (the `ci_run` fixture)."""
    import time

    def through(stem: str, timeout: float = 1500) -> Path:
        if os.environ.get("TUTORIAL_CI_RUN"):
            return Path(os.environ["TUTORIAL_CI_RUN"])
        shared = shared_dir(tmp_path_factory)
        record, done = shared / "ci-run.json", shared / "ci-run" / "results" / f"{stem}.json"
        deadline = time.monotonic() + timeout
        while _held_by_another(shared / "ci-run.lock") and not record.exists() and time.monotonic() < deadline:
            if done.exists():
                return done.parent.parent
            time.sleep(1)
        return request.getfixturevalue("ci_run")  # finished (or failed: it says so), not started, or too slow

    return through


@pytest.fixture(scope="session")
def ci_run(request, tmp_path_factory):
    """Every notebook executed once with the ci profile; the run folder (shared by the tests that read it, across
    xdist workers: the first executes it, the others wait for it). TUTORIAL_CI_RUN=<folder of a finished ci run>
    reuses one instead, when working on the tests that read it."""
    from helpers import series
    from helpers.perf import exclusive

    if os.environ.get("TUTORIAL_CI_RUN"):
        return Path(os.environ["TUTORIAL_CI_RUN"])
    shared = shared_dir(tmp_path_factory)
    record = shared / "ci-run.json"
    with exclusive(shared / "ci-run.lock"):
        if not record.exists():
            if any("docker_run" in item.fixturenames for item in request.session.items):
                request.getfixturevalue("docker_series")  # the docker world runs meanwhile, in its own process
            run_dir = shared / "ci-run"
            run_dir.mkdir()
            try:
                with tagged(CI_RUN_TAG):
                    series.run_series(run_dir, profile="ci")
            except Exception as exc:
                record.write_text(json.dumps({"run_dir": str(run_dir), "error": f"{type(exc).__name__}: {exc}"}))
                raise
            record.write_text(json.dumps({"run_dir": str(run_dir), "error": ""}))
    ran = json.loads(record.read_text())
    if ran["error"]:
        pytest.fail(f"the ci run (executed by another test of this session) failed: {ran['error'][:2000]}")
    return Path(ran["run_dir"])
