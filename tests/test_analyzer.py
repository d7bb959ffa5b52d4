"""helpers.analyzer: the YAML shown is the YAML run, Model Analyzer's CSV read from a recorded run, nothing left behind."""
from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml

from helpers import analyzer, perf, series
from helpers.runtime import LocalTriton, RuntimeChoice

DATA = Path(__file__).parent / "data"
NOTEBOOK = series.ROOT / "notebooks" / "15_model_analyzer.ipynb"


@pytest.fixture(autouse=True)
def no_lock(monkeypatch):
    """These runs generate no load: they need not wait for another perf_analyzer on this machine."""
    import contextlib

    monkeypatch.setattr(perf, "one_load_generator", contextlib.nullcontext)


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _launch(tmp_path: Path) -> dict:
    local = LocalTriton(tmp_path / "bin" / "tritonserver", tmp_path / "backends", "test",
                        {"LD_LIBRARY_PATH": "/srv/libs"})
    pa = perf.PerfAnalyzer(tmp_path / "pa" / "perf_analyzer", "test", {"LD_LIBRARY_PATH": "/pa/lib:/srv/libs"})
    return analyzer.local_launch(local, pa)


def _config(tmp_path: Path) -> dict:
    return {"model_repository": str(tmp_path / "repo"), "export_path": str(tmp_path / "profile"),
            "run_config_search_mode": "brute",
            "profile_models": {"resnet18_uint8": {"cpu_only": True, "model_config_parameters": {
                "max_batch_size": [8, 16], "instance_group": [[{"kind": "KIND_CPU", "count": 1}]]}}},
            "perf_analyzer_flags": {"shared-memory": "system", "measurement-interval": 500},
            **_launch(tmp_path)}


def test_local_launch_gives_perf_analyzer_its_libraries_and_three_ports(tmp_path):
    launch = _launch(tmp_path)
    # Model Analyzer hands triton_server_environment to perf_analyzer too: both libraries, each once
    assert launch["triton_server_environment"]["LD_LIBRARY_PATH"].split(os.pathsep) == ["/srv/libs", "/pa/lib"]
    assert launch["triton_server_flags"] == {"backend-directory": str(tmp_path / "backends")}
    ports = analyzer.markers(launch)
    assert len(set(ports)) == 3 and launch["triton_metrics_url"].endswith(f":{ports[2]}/metrics")


def test_launch_fields_and_the_notebooks_search_fields_are_model_analyzers():
    from model_analyzer.config.input.config_command_profile import ConfigCommandProfile

    known = set(ConfigCommandProfile()._fields)
    cells = [c for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    source = next("".join(c["source"]) for c in cells if "search = {" in "".join(c["source"]))
    search = next(n.value for n in ast.walk(ast.parse(source))
                  if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "search")
    keys = {k.value for k in search.keys}
    server = analyzer.explicit_server(series.ROOT / "models", RuntimeChoice("local", "test", LocalTriton(Path("t"), Path("b"), "x")), ["m"])
    launch = {*analyzer.local_launch(LocalTriton(Path("t"), Path("b"), "x"), perf.PerfAnalyzer(Path("p"), "x")),
              *analyzer.remote_launch(server, perf.PerfAnalyzer(Path("p"), "x"))}
    assert keys and not (keys | launch) - known, sorted((keys | launch) - known)


def test_yaml_rendered_is_the_yaml_run_and_the_command_shown_is_the_one_run(tmp_path, monkeypatch):
    seen = tmp_path / "seen"
    fake = _script(tmp_path / "model-analyzer", f"""
import json, shutil, sys
shutil.copy(sys.argv[sys.argv.index("-f") + 1], {str(seen / "config.yml")!r})
open({str(seen / "argv.json")!r}, "w").write(json.dumps(sys.argv[1:]))
""")
    seen.mkdir()
    monkeypatch.setattr(analyzer, "executable", lambda: fake)
    config = _config(tmp_path)
    run = analyzer.run(config, tmp_path / "work", timeout_s=60)
    assert run.returncode == 0, run.output
    shown = analyzer.render_yaml(config)
    assert (seen / "config.yml").read_text() == shown == run.config_file.read_text()
    assert yaml.safe_load(shown) == config
    assert [str(fake), *json.loads((seen / "argv.json").read_text())] == analyzer.command(run.config_file)


def test_inference_csv_from_a_recorded_run():
    table = analyzer.parse_inference_csv(DATA / "ma_metrics-model-inference.csv")
    assert list(table["config_name"]) == ["resnet18_pytorch_config_1", "resnet18_pytorch_config_default",
                                          "resnet18_pytorch_config_0"]  # Model Analyzer's order, kept
    assert table["throughput"].dtype.kind == "f" and table["p99_ms"].iloc[0] == 4990.0
    assert table["satisfies_constraints"].tolist() == [True, True, True]
    assert table["max_batch_size"].tolist() == [8, 64, 8] and table["instance_group"].iloc[0] == "1:CPU"
    assert analyzer.pick(table)["config_name"] == "resnet18_pytorch_config_1"
    some = table.assign(satisfies_constraints=[False, True, True])
    assert analyzer.pick(some)["config_name"] == "resnet18_pytorch_config_default"
    none = table.assign(satisfies_constraints=False)
    assert analyzer.pick(none)["config_name"] == "resnet18_pytorch_config_1"


def test_a_csv_that_is_not_model_analyzers_is_refused(tmp_path):
    path = tmp_path / "x.csv"
    pd.DataFrame({"Concurrency": [1], "Inferences/Second": [2.0]}).to_csv(path, index=False)
    with pytest.raises(ValueError, match="Model Config Path"):
        analyzer.parse_inference_csv(path)
    with pytest.raises(FileNotFoundError, match="metrics-model-inference.csv"):
        analyzer.results(tmp_path)


def test_variant_config_is_renamed_after_its_new_folder(tmp_path):
    (tmp_path / "resnet18_pytorch_config_1").mkdir()
    (tmp_path / "resnet18_pytorch_config_1" / "config.pbtxt").write_text((DATA / "ma_variant_config.pbtxt").read_text())
    text = analyzer.variant_config(tmp_path, "resnet18_pytorch_config_1", "resnet18_pytorch_analyzer")
    assert text.startswith('name: "resnet18_pytorch_analyzer"\n')
    assert 'name: "zeros"' in text  # the warm-up entry's name is not the model's
    assert analyzer.variant_config(tmp_path, "resnet18_pytorch_config_1").startswith('name: "resnet18_pytorch"')


def _fake(tmp_path: Path, name: str, port: str) -> subprocess.Popen:
    """A process whose program is `name` and whose command line names `port`, in a session of its own."""
    return subprocess.Popen(["bash", "-c", f'exec -a "{tmp_path}/{name}" {sys.executable} -c '
                             f'"import time; time.sleep(120)" --http-port={port}'], start_new_session=True)


def test_cleanup_stops_only_the_processes_naming_this_runs_ports(tmp_path):
    mine, other = _fake(tmp_path, "tritonserver", "61234"), _fake(tmp_path, "tritonserver", "61299")
    try:
        time.sleep(0.5)
        stopped = analyzer.cleanup(["61234"], timeout=5)
        assert stopped == [f"tritonserver (pid {mine.pid})"]
        assert mine.wait(5) is not None and other.poll() is None
    finally:
        for proc in (mine, other):
            proc.kill()
            proc.wait()


def test_run_stops_what_model_analyzer_left_behind(tmp_path, monkeypatch):
    config = _config(tmp_path)
    port = analyzer.markers(config)[0]
    # like Model Analyzer: the server in a session of its own, and exiting without stopping it
    fake = _script(tmp_path / "model-analyzer", f"""
import subprocess, sys, time
subprocess.Popen(["bash", "-c", 'exec -a "{tmp_path}/tritonserver" {sys.executable} -c "import time; time.sleep(120)" --http-port={port}'],
                 start_new_session=True)
time.sleep(0.5)
""")
    monkeypatch.setattr(analyzer, "executable", lambda: fake)
    run = analyzer.run(config, tmp_path / "work", timeout_s=60)
    assert len(run.cleaned) == 1 and run.cleaned[0].startswith("tritonserver")
    assert not analyzer.leftovers([port])


def test_run_stops_a_perf_analyzer_past_the_memory_limit(tmp_path, monkeypatch):
    pa = _script(tmp_path / "perf_analyzer", "import time\nblock = bytearray(200 * 2**20)\ntime.sleep(60)\n")
    fake = _script(tmp_path / "model-analyzer", f"""
import subprocess, sys
sys.exit(subprocess.run([{str(pa)!r}]).returncode)
""")
    monkeypatch.setattr(analyzer, "executable", lambda: fake)
    started = time.monotonic()
    run = analyzer.run(_config(tmp_path), tmp_path / "work", timeout_s=60, memory_limit_gb=0.1)
    assert "memory limit of 0.1 GB" in run.stopped and run.perf_peak_mb > 100
    assert run.returncode != 0 and time.monotonic() - started < 30


def test_docker_command_runs_remote_mode_as_the_user_on_the_series_gpu(tmp_path, monkeypatch):
    """Review 2026-12-03, HIGH 1, MED 3 and 4: the SDK container ran as root (root-owned checkpoints), on every GPU,
    with the Docker socket so that Model Analyzer started its own server on 0.0.0.0:8000-8002. Now: remote mode, as
    the user, Docker's init, the series' GPU, the host's network (the series' server is on 127.0.0.1), no socket."""
    monkeypatch.setenv("TUTORIAL_GPU", "1")
    (tmp_path / "repo").mkdir()
    cmd = analyzer.docker_command("24.05", tmp_path / "repo", tmp_path)
    options = cmd[:cmd.index("nvcr.io/nvidia/tritonserver:24.05-py3-sdk")]
    assert f"{os.getuid()}:{os.getgid()}" == options[options.index("--user") + 1] and "--init" in options
    assert options[options.index("--gpus") + 1] == "device=1" and "all" not in options
    assert options[options.index("--network") + 1] == "host" and "--ipc=host" in options
    assert not any("docker.sock" in a for a in cmd)
    assert f"{tmp_path / 'repo'}:{tmp_path / 'repo'}:ro" in cmd and f"{tmp_path}:{tmp_path}" in cmd
    assert cmd[cmd.index("nvcr.io/nvidia/tritonserver:24.05-py3-sdk") + 1:] == [
        "model-analyzer", "profile", "-f", f"{tmp_path}/config.yml"]
    assert not hasattr(analyzer, "docker_launch")


def test_run_docker_refuses_any_launch_mode_but_remote(tmp_path):
    with pytest.raises(ValueError, match="remote launch mode"):
        analyzer.run_docker({"triton_launch_mode": "docker"}, "24.05", tmp_path, tmp_path)


def test_a_fresh_search_folder_each_run_and_a_cleanup_that_fails_loudly(tmp_path, monkeypatch):
    """Review HIGH 1: rmtree(ignore_errors=True) left an earlier run's root-owned checkpoint, which Model Analyzer
    then reused. Each search gets a new folder, and what cannot be deleted is an error naming it and why."""
    first = analyzer.fresh_workdir(tmp_path / "ma")
    (first / "checkpoints").mkdir()
    (first / "checkpoints" / "0.ckpt").write_text("{}")
    second = analyzer.fresh_workdir(tmp_path / "ma")
    assert second != first and not first.exists() and list(second.iterdir()) == []
    (second / "checkpoints").mkdir()
    (second / "checkpoints" / "0.ckpt").write_text("{}")
    import shutil

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(second / "checkpoints" / "0.ckpt"))

    monkeypatch.setattr(shutil, "rmtree", refuse)
    with pytest.raises(PermissionError, match=r"cannot delete .*0\.ckpt \(Permission denied; owned by uid \d+"):
        analyzer.fresh_workdir(tmp_path / "ma")


def test_explicit_server_lets_model_analyzer_load_variants(tmp_path):
    """Remote mode loads each variant through the repository API: the series' server must run with explicit model
    control (never poll mode), loading the models asked for by name, on its own three ports."""
    runtime = RuntimeChoice("local", "test", LocalTriton(tmp_path / "tritonserver", tmp_path / "backends", "test"))
    server = analyzer.explicit_server(tmp_path, runtime, ["resnet18_uint8", "resnet18_pytorch"])
    cmd = server.command()
    assert cmd[0] == str(tmp_path / "tritonserver") and "--model-control-mode=poll" not in cmd
    assert not any(a.startswith("--repository-poll-secs") for a in cmd)
    assert cmd[-3:] == ["--model-control-mode=explicit", "--load-model=resnet18_uint8", "--load-model=resnet18_pytorch"]
    launch = analyzer.remote_launch(server, perf.PerfAnalyzer(tmp_path / "perf_analyzer", "test"))
    assert launch["triton_launch_mode"] == "remote" and launch["triton_grpc_endpoint"] == server.grpc_url
    assert launch["dcgm_disable"] is not analyzer.dcgm_found()  # allowed in remote mode only
    assert analyzer.markers(launch) == [str(server.http_port), str(server.grpc_port), str(server.metrics_port)]


def test_remote_mode_cleanup_spares_the_callers_server(tmp_path, monkeypatch):
    config = {**_config(tmp_path), "triton_launch_mode": "remote"}
    port = analyzer.markers(config)[0]
    ours = _fake(tmp_path, "tritonserver", port)  # the series' server that remote mode measures: not Model Analyzer's
    fake = _script(tmp_path / "model-analyzer", "")
    monkeypatch.setattr(analyzer, "executable", lambda: fake)
    try:
        time.sleep(0.5)
        run = analyzer.run(config, tmp_path / "work", timeout_s=60)
        assert run.cleaned == [] and ours.poll() is None
    finally:
        ours.kill()
        ours.wait()
