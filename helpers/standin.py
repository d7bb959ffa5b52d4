"""Python-backend stand-ins: serve an ONNX or TorchScript artifact with Triton's Python backend when the server
has no native backend for it, under the same name, inputs, outputs and batching, and say so."""
from __future__ import annotations

import py_compile
import shutil
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from .pyenv import python_env
from .repository import DEFAULT_FILENAME, PLATFORM_BACKEND, label_files, read_config, to_text

STANDIN_SOURCE = Path(__file__).with_name("standin_model.py")
_FORMAT = {"onnxruntime_onnx": "onnx", "pytorch_libtorch": "torchscript"}


@dataclass
class Served:
    """How one model of the repository is served."""

    name: str
    how: str  # "native", "python stand-in", or "not served"
    detail: str

    def __str__(self) -> str:
        return f"{self.name}: {self.how} ({self.detail})"


def prepare_served_repository(source: Path, target: Path, backends: list[str],
                              models: Sequence[str] | None = None, cpu_only: Collection[str] = ()) -> list[Served]:
    """Mirror `source` (only `models`, when given) into `target`: native models as links (on the CPU where their
    backend was built without GPU support), others as Python-backend stand-ins of the same artifact."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    served = []
    folders = sorted(p for p in source.iterdir() if (p / "config.pbtxt").is_file())
    for model_dir in (f for f in folders if models is None or f.name in models):
        config = read_config(model_dir)
        backend = config.backend or PLATFORM_BACKEND.get(config.platform, "")
        if config.platform == "ensemble":  # scheduled by the server itself: no backend to find
            (target / model_dir.name).symlink_to(model_dir.resolve(), target_is_directory=True)
            served.append(Served(config.name, "native", "ensemble scheduler, in the server"))
            continue
        if backend == "python" and "EXECUTION_ENV_PATH" not in config.parameters:
            # A reader's own model.py imports this environment's packages (numpy, torch): the stub must run in it,
            # as in the NGC container, where the image's Python has them. The mirror's config says so.
            _mirror_with_environment(model_dir, target / model_dir.name, config)
            served.append(Served(config.name, "native", f"python backend, EXECUTION_ENV_PATH={python_env()}"))
            continue
        if backend in backends and backend in cpu_only and any(g.kind == g.KIND_GPU for g in config.instance_group):
            # A CPU build refuses KIND_GPU ("GPU instances not supported"): the same model, its groups on the CPU.
            on_cpu = type(config)()
            on_cpu.CopyFrom(config)
            for group in on_cpu.instance_group:
                group.kind = group.KIND_CPU
                group.ClearField("gpus")
            _mirror(model_dir, target / model_dir.name, on_cpu)
            served.append(Served(config.name, "native", f"{backend} backend, CPU build: its KIND_GPU instance "
                                                        "groups run as KIND_CPU"))
            continue
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
        for key, value in {"EXECUTION_ENV_PATH": str(python_env()), "ARTIFACT": filename,
                           "ARTIFACT_FORMAT": _FORMAT[config.platform], "DEVICE": device}.items():
            standin.parameters[key].string_value = value
        out = target / model_dir.name
        out.mkdir()
        (out / "config.pbtxt").write_text(to_text(standin))
        for labels in label_files(config):
            (out / labels).symlink_to((model_dir / labels).resolve())
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


def _mirror_with_environment(model_dir: Path, out: Path, config) -> None:
    """A Python-backend model mirrored with EXECUTION_ENV_PATH set to this environment; version folders linked."""
    mirrored = type(config)()
    mirrored.CopyFrom(config)
    mirrored.parameters["EXECUTION_ENV_PATH"].string_value = str(python_env())
    for source in model_dir.glob("[0-9]*/model.py"):  # compiled now: a __pycache__ after start reloads in poll mode
        py_compile.compile(str(source), doraise=True)
    _mirror(model_dir, out, mirrored)


def _mirror(model_dir: Path, out: Path, config) -> None:
    """`model_dir` mirrored into `out` with `config` as its config.pbtxt; everything else linked."""
    out.mkdir()
    (out / "config.pbtxt").write_text(to_text(config))
    for item in model_dir.iterdir():
        if item.name != "config.pbtxt":
            (out / item.name).symlink_to(item.resolve(), target_is_directory=item.is_dir())
