"""The test docker's stand-in for the SDK image's `model-analyzer profile -f CONFIG` (test infrastructure: this is NOT
Triton Model Analyzer, and what it writes is labelled so in its log).

It checks what the real one would refuse or get wrong in the container it runs in, each check with its source:
  * every YAML key is one of Model Analyzer's profile options (the installed triton-model-analyzer's
    ConfigCommandProfile, the package the local world runs) and a key the tag's own Model Analyzer knows
    (flags.MODEL_ANALYZER_YAML: 24.05's has no dcgm_disable), every `perf_analyzer_flags` key one of its allowed keys
    and an option of the tag's perf_analyzer (flags.py);
  * `triton_launch_mode: remote` needs the server's endpoints (config_command_profile.py: "Must specify
    triton-grpc-endpoint if connecting to already running server"), reachable from the container (127.0.0.1 only with
    --network host), and a server in explicit model control (client.py: "The remote Tritonserver needs to be launched
    in EXPLICIT mode"); `dcgm_disable` only in remote mode (config_command.py); docker mode needs the Docker socket
    mounted (docs/launch_modes.md); local mode is refused here (the SDK image's own server is not what the series runs);
  * the output model repository must be new unless `override_output_model_repository` (entrypoint.py);
  * a checkpoint in `checkpoint_directory` is loaded and its measurements reused for variants of the same name, as
    Model Analyzer does (state/analyzer_state_manager.py, record/metrics_manager.py): "Loaded checkpoint from file".
Then, so that the notebook can go on, it does what remote mode does with a brute search: the model's default config
and each point of `model_config_parameters`, each loaded into the server with its config through the repository API
and measured once with the SDK image's perf_analyzer (here this machine's) at `parameters.concurrency`; it writes
each variant's config.pbtxt to the output repository and export_path/results/metrics-model-inference.csv in Model
Analyzer's columns and order (within the constraints first, then by throughput). Quick and optuna search are refused.
"""
from __future__ import annotations

import csv
import itertools
import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import flags  # noqa: E402

SAY = "[Model Analyzer stand-in of the test docker]"
CONTEXT = json.loads(os.environ.get("FAKE_DOCKER_CONTAINER", "{}"))


def fail(message: str) -> int:
    print(f"{SAY} ERROR: {message}", file=sys.stderr, flush=True)
    return 1


def host_path(path: str) -> str:
    """The host path of a container path (volumes are container path -> host path)."""
    for dst, src in sorted(CONTEXT.get("volumes", {}).items(), key=lambda kv: -len(kv[0])):
        if path == dst or path.startswith(dst.rstrip("/") + "/"):
            return src + path[len(dst.rstrip("/")):]
    return path


def writable(path: str) -> bool:
    """Whether a container path lies in a mount that is not read-only."""
    for dst, _ in sorted(CONTEXT.get("volumes", {}).items(), key=lambda kv: -len(kv[0])):
        if path == dst or path.startswith(dst.rstrip("/") + "/"):
            return "ro" not in CONTEXT.get("modes", {}).get(dst, "").split(",")
    return False


def check_config(config: dict) -> str | None:
    """What Model Analyzer (or the container) would refuse in `config`, or None."""
    from model_analyzer.config.input.config_command_profile import ConfigCommandProfile
    from model_analyzer.perf_analyzer.perf_config import PerfAnalyzerConfig

    unknown = sorted(set(config) - set(ConfigCommandProfile()._fields))
    if unknown:
        return f"unknown profile options {unknown} (Model Analyzer's config.md lists the valid ones)"
    refused = flags.unknown_model_analyzer(CONTEXT.get("tag", "26.02"), ["profile"], sorted(config))
    if refused:  # the tag's own Model Analyzer is older than the installed one: its YamlConfigValidator
        return refused[0]
    pa_flags = config.get("perf_analyzer_flags", {})
    allowed = set(PerfAnalyzerConfig.allowed_keys())
    bad = sorted(k for k in pa_flags if k not in allowed)
    if bad:
        return f"perf_analyzer_flags {bad} are not among Model Analyzer's allowed perf_analyzer options"
    stand_in, options = flags.table_for(CONTEXT.get("tag", "26.02"), flags.PERF_ANALYZER)
    missing = sorted(k for k in pa_flags if k not in options)
    if missing:
        return f"perf_analyzer_flags {missing} are not options of NGC {stand_in}'s perf_analyzer (flags.py)"
    mode = config.get("triton_launch_mode", "local")
    if config.get("dcgm_disable") and mode != "remote":
        return "If `dcgm-disable` then `triton-launch-mode` must be set to remote"
    if mode == "docker" and not CONTEXT.get("docker_sock"):
        return "docker launch mode needs the Docker socket mounted (-v /var/run/docker.sock:/var/run/docker.sock)"
    if mode != "remote":
        return f"the test docker's stand-in runs remote launch mode only; got {mode!r}"
    if config.get("run_config_search_mode", "brute") != "brute":
        return f"the test docker's stand-in runs brute search only; got {config['run_config_search_mode']!r}"
    for key in ("triton_grpc_endpoint", "triton_http_endpoint", "triton_metrics_url"):
        if not config.get(key):
            return (f"client-protocol is 'grpc'. Must specify {key.replace('_', '-')} if connecting to already "
                    "running server (remote mode; the defaults localhost:8000-8002 are not the series' server)")
        host = config[key].split("//")[-1].split(":")[0]
        if host in ("localhost", "127.0.0.1") and CONTEXT.get("network") != "host":
            return f"{key} {config[key]}: 127.0.0.1 in this container is its own, not the host's (no --network host)"
    for key in ("export_path", "checkpoint_directory", "output_model_repository_path"):
        if key in config and not writable(config[key]):
            return f"{key} {config[key]} is not in a writable mount of this container"
    return None


def http(url: str, body: dict | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None,
                                     method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError as error:
        return 0, str(error)


def variants(model: str, spec: dict, base: dict) -> list[tuple[str, dict]]:
    """The default config, then each point of model_config_parameters (lists crossed; an instance_group list of
    lists: each inner list one value), named as Model Analyzer names them."""
    found = [(f"{model}_config_default", base)]
    params = spec.get("model_config_parameters") or {}
    axes = []
    for key, value in params.items():
        if isinstance(value, dict):
            inner = [[(key, k, v) for v in (vals if isinstance(vals, list) else [vals])] for k, vals in value.items()]
            axes += inner
        else:
            axes.append([(key, None, v) for v in (value if isinstance(value, list) else [value])])
    for i, point in enumerate(itertools.product(*axes) if axes else []):
        config = json.loads(json.dumps(base))
        for key, sub, value in point:
            if sub is None:
                config[key] = value
            else:
                config.setdefault(key, {})[sub] = value
        found.append((f"{model}_config_{i}", config))
    return found


def to_pbtxt(config: dict) -> str:
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2 as mc

    message = json_format.ParseDict(config, mc.ModelConfig(), ignore_unknown_fields=True)
    return text_format.MessageToString(message)


def measure(model: str, config: dict, perf_flags: dict, concurrency: int) -> dict:
    """One perf_analyzer run of `model` at `concurrency` over gRPC: throughput and p99 in ms."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "pa.csv"
        args = [CONTEXT["perf_analyzer"], "-m", model, "-u", config["triton_grpc_endpoint"], "-i", "grpc",
                "--concurrency-range", str(concurrency), "-f", str(out),
                *[f"--{k}={v}" for k, v in perf_flags.items()]]
        ran = subprocess.run(args, capture_output=True, text=True)
        if ran.returncode != 0 or not out.exists():
            return {"error": (ran.stdout + ran.stderr).strip().splitlines()[-1:] or [f"exit {ran.returncode}"]}
        row = next(csv.DictReader(out.open()))
        return {"throughput": float(row["Inferences/Second"]), "p99_ms": float(row["p99 latency"]) / 1000}


def main(argv: list[str]) -> int:
    if argv[:1] != ["profile"] or not ({"-f", "--config-file"} & set(argv)):
        return fail(f"expected `model-analyzer profile -f CONFIG`; got {argv}")
    flag = "-f" if "-f" in argv else "--config-file"
    config_path = argv[argv.index(flag) + 1]
    config = yaml.safe_load(Path(host_path(config_path)).read_text())
    problem = check_config(config)
    if problem:
        return fail(problem)
    base_url = f"http://{config['triton_http_endpoint']}"
    status, text = http(f"{base_url}/v2/health/ready")
    if status != 200:
        return fail(f"the remote server at {config['triton_http_endpoint']} is not ready ({status}: {text[:200]})")
    out_repo = Path(host_path(config.get("output_model_repository_path", "output_model_repository")))
    if out_repo.exists() and not config.get("override_output_model_repository"):
        return fail(f"Path \"{out_repo}\" already exists. Please set or modify \"--output-model-repository-path\" "
                    "flag or use \"--override-output-model-repository\" flag.")
    out_repo.mkdir(parents=True, exist_ok=True)
    checkpoints = Path(host_path(config.get("checkpoint_directory", "./checkpoints")))
    checkpoints.mkdir(parents=True, exist_ok=True)
    found = sorted(checkpoints.glob("*.ckpt"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1)
    state = json.loads(found[-1].read_text()) if found else {}
    if found:
        print(f"{SAY} Loaded checkpoint from file {found[-1]}", flush=True)
    constraint = (config.get("constraints") or {}).get("perf_latency_p99", {}).get("max")
    perf_flags = config.get("perf_analyzer_flags") or {}
    rows = []
    for model, spec in (config.get("profile_models") or {}).items():
        status, text = http(f"{base_url}/v2/repository/models/{model}/load", {})
        if status != 200:
            return fail(f"The remote Tritonserver needs to be launched in EXPLICIT mode (loading {model}: {status} "
                        f"{text[:200]})")
        status, text = http(f"{base_url}/v2/models/{model}/config")
        if status != 200:
            return fail(f"cannot read {model}'s config from the server ({status}: {text[:200]})")
        base = json.loads(text)
        concurrency = int((spec.get("parameters") or {}).get("concurrency", [config.get(
            "run_config_search_min_concurrency", 1)])[0])
        for name, variant in variants(model, spec, base):
            folder = out_repo / name
            folder.mkdir(exist_ok=True)
            (folder / "config.pbtxt").write_text(to_pbtxt(variant))
            key = f"{name} c={concurrency}"
            if key in state:
                print(f"{SAY} Existing measurement found for run config {name}. Skipping profile", flush=True)
                result = state[key]
            else:
                served = json.loads(json.dumps(variant))  # the test docker's server has no GPU: GPU groups on the CPU
                for group in served.get("instance_group") or []:
                    group["kind"] = "KIND_CPU" if group.get("kind") == "KIND_GPU" else group.get("kind", "KIND_CPU")
                status, text = http(f"{base_url}/v2/repository/models/{model}/load",
                                    {"parameters": {"config": json.dumps(served)}})
                if status != 200:
                    print(f"{SAY} {name}: the server did not load it ({status}: {text[:200]})", flush=True)
                    continue
                result = measure(model, config, perf_flags, concurrency)
                state[key] = result
                (checkpoints / f"{len(found)}.ckpt").write_text(json.dumps(state))
            if "error" in result:
                print(f"{SAY} {name}: perf_analyzer failed: {result['error']}", flush=True)
                continue
            print(f"{SAY} {name} at concurrency {concurrency}: {result['throughput']:.1f} infer/sec, p99 "
                  f"{result['p99_ms']:.1f} ms (measured by this machine's perf_analyzer)", flush=True)
            groups = variant.get("instance_group") or [{"count": 1, "kind": "KIND_GPU"}]
            rows.append({"Model": model, "Batch": 1, "Concurrency": concurrency, "Model Config Path": name,
                         "Instance Group": "/".join(f"{g.get('count', 1)}:{str(g.get('kind', 'KIND_GPU'))[5:]}"
                                                    for g in groups),
                         "Max Batch Size": variant.get("max_batch_size", 0),
                         "Satisfies Constraints": "Yes" if constraint is None or result["p99_ms"] <= constraint else "No",
                         "Throughput (infer/sec)": round(result["throughput"], 1),
                         "p99 Latency (ms)": round(result["p99_ms"], 3)})
        http(f"{base_url}/v2/repository/models/{model}/load", {})  # the model's own config again, as it was
    if not rows:
        return fail("no variant was measured")
    rows.sort(key=lambda r: (r["Satisfies Constraints"] != "Yes", -r["Throughput (infer/sec)"]))
    results = Path(host_path(config.get("export_path", "."))) / "results"
    results.mkdir(parents=True, exist_ok=True)
    with open(results / "metrics-model-inference.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"{SAY} wrote {results / 'metrics-model-inference.csv'} ({len(rows)} rows)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
