"""Triton model repository: config.pbtxt built through Triton's ModelConfig protobuf and checked against the artifact."""
from __future__ import annotations

import re
import shutil
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

# File name Triton looks for in a version folder, per platform.
DEFAULT_FILENAME = {"onnxruntime_onnx": "model.onnx", "pytorch_libtorch": "model.pt", "tensorrt_plan": "model.plan"}
# Backend that serves each platform (what must exist in the server's backend directory).
PLATFORM_BACKEND = {"onnxruntime_onnx": "onnxruntime", "pytorch_libtorch": "pytorch", "tensorrt_plan": "tensorrt"}

_NUMPY_TO_TRITON = {np.dtype(np.float32): "FP32", np.dtype(np.float16): "FP16", np.dtype(np.float64): "FP64",
                    np.dtype(np.int64): "INT64", np.dtype(np.int32): "INT32", np.dtype(np.int8): "INT8",
                    np.dtype(np.uint8): "UINT8", np.dtype(np.bool_): "BOOL"}
_TRITON_TO_NUMPY = {v: k for k, v in _NUMPY_TO_TRITON.items()}
# onnx.TensorProto element types -> Triton dtype names.
_ONNX_TO_TRITON = {1: "FP32", 10: "FP16", 11: "FP64", 7: "INT64", 6: "INT32", 3: "INT8", 2: "UINT8", 9: "BOOL"}


def triton_dtype(dtype: np.dtype | type | str) -> str:
    """Triton's name (FP32, FP16, ...) for a NumPy dtype."""
    dt = np.dtype(dtype)
    if dt not in _NUMPY_TO_TRITON:
        raise ValueError(f"dtype must be one of {sorted(str(d) for d in _NUMPY_TO_TRITON)}; got {dt}")
    return _NUMPY_TO_TRITON[dt]


def numpy_dtype(triton_name: str) -> np.dtype:
    """NumPy dtype for a Triton dtype name, with or without the TYPE_ prefix."""
    key = triton_name.removeprefix("TYPE_")
    if key not in _TRITON_TO_NUMPY:
        raise ValueError(f"Triton dtype must be one of {sorted(_TRITON_TO_NUMPY)}; got {triton_name!r}")
    return _TRITON_TO_NUMPY[key]


@dataclass(frozen=True)
class TensorSpec:
    """One model input or output: name, Triton dtype (FP32, ...) and full shape, -1 for a dynamic dimension."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    def __str__(self) -> str:
        dims = "x".join("?" if d < 0 else str(d) for d in self.shape)
        return f"{self.name}: {self.dtype}[{dims}]"


def onnx_io(path: str | Path) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """Inputs and outputs an ONNX file declares (initializers excluded)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}

    def spec(v) -> TensorSpec:
        t = v.type.tensor_type
        if t.elem_type not in _ONNX_TO_TRITON:
            raise ValueError(f"{path}: tensor {v.name!r} has ONNX element type {t.elem_type}, which this series does not map")
        dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim)
        return TensorSpec(v.name, _ONNX_TO_TRITON[t.elem_type], dims)

    return [spec(v) for v in model.graph.input if v.name not in inits], [spec(v) for v in model.graph.output]


def image_format(dims: Sequence[int]) -> str:
    """The `format` an image input of these dims (batch dimension left out) declares: FORMAT_NCHW when the first of
    three dims is 1 or 3 channels, FORMAT_NHWC when the last one is, else FORMAT_NONE (not an image tensor)."""
    if len(dims) != 3:
        return "FORMAT_NONE"
    if dims[0] in (1, 3):
        return "FORMAT_NCHW"
    return "FORMAT_NHWC" if dims[-1] in (1, 3) else "FORMAT_NONE"


def set_dynamic_batching(config: mc.ModelConfig, preferred_batch_sizes: Sequence[int] | None,
                         max_queue_delay_us: int | None) -> None:
    """Replace the config's dynamic_batching block; refused for an unbatched model (max_batch_size 0)."""
    if config.max_batch_size == 0:
        raise ValueError(f"model '{config.name}' has max_batch_size 0; dynamic batching needs a batch dimension")
    config.dynamic_batching.Clear()
    config.dynamic_batching.preferred_batch_size.extend(preferred_batch_sizes or [])
    config.dynamic_batching.max_queue_delay_microseconds = max_queue_delay_us or 0


def add_warmup(config: mc.ModelConfig, batch_size: int | Sequence[int] = 1, count: int = 1) -> None:
    """Have the server run the model on zeros as it loads, `count` times at each batch size: a model that cannot run
    its declared inputs then fails to load (named, with the reason), and no measured request pays for the
    framework's first use of a batch shape (TorchScript profiles and optimizes each new shape on its first runs)."""
    config.ClearField("model_warmup")
    sizes = [batch_size] if isinstance(batch_size, int) else list(batch_size)
    for size in sizes:
        warmup = config.model_warmup.add(name=f"zeros_b{size}", batch_size=size if config.max_batch_size > 0 else 1,
                                         count=count)
        for t in config.input:
            warmup.inputs[t.name].data_type = t.data_type
            warmup.inputs[t.name].dims.extend(t.dims)
            warmup.inputs[t.name].zero_data = True


def build_config(
    name: str,
    platform: str,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    *,
    max_batch_size: int,
    instance_kind: str = "KIND_CPU",
    instance_count: int = 1,
    preferred_batch_sizes: Sequence[int] | None = None,
    max_queue_delay_us: int | None = None,
) -> mc.ModelConfig:
    """A ModelConfig from tensor specs; with max_batch_size > 0 the first (batch) dimension is left out of dims. Image
    inputs get their `format` (image_format). TorchScript configs get a zero-input warm-up (add_warmup)."""
    if platform not in DEFAULT_FILENAME:
        raise ValueError(f"platform must be one of {sorted(DEFAULT_FILENAME)}; got {platform!r}")
    if max_batch_size < 0:
        raise ValueError(f"max_batch_size must be >= 0; got {max_batch_size}")
    config = mc.ModelConfig(name=name, platform=platform, max_batch_size=max_batch_size)
    for specs, field in ((inputs, config.input), (outputs, config.output)):
        for s in specs:
            dims = s.shape[1:] if max_batch_size > 0 else s.shape
            field.add(name=s.name, data_type=mc.DataType.Value(f"TYPE_{s.dtype}"), dims=list(dims))
    for tensor in config.input:  # image inputs say their layout: Triton's image client and Model Analyzer read it
        tensor.format = mc.ModelInput.Format.Value(image_format(tensor.dims))
    config.instance_group.add(kind=mc.ModelInstanceGroup.Kind.Value(instance_kind), count=instance_count)
    if preferred_batch_sizes is not None or max_queue_delay_us is not None:
        set_dynamic_batching(config, preferred_batch_sizes, max_queue_delay_us)
    if platform == "pytorch_libtorch":  # TorchScript declares no input types: let the server try them at load
        add_warmup(config)
    return config


def config_from_onnx(name: str, onnx_path: str | Path, *, max_batch_size: int | None = None,
                     **kwargs) -> mc.ModelConfig:
    """ModelConfig for an ONNX file from its own I/O; max_batch_size 32 if its batch is dynamic, else 0."""
    inputs, outputs = onnx_io(onnx_path)
    if max_batch_size is None:
        max_batch_size = 32 if inputs[0].shape and inputs[0].shape[0] == -1 else 0
    return build_config(name, "onnxruntime_onnx", inputs, outputs, max_batch_size=max_batch_size, **kwargs)


_TENSORRT_TO_TRITON = {"FLOAT": "FP32", "HALF": "FP16", "INT8": "INT8", "INT32": "INT32", "INT64": "INT64",
                       "BOOL": "BOOL", "UINT8": "UINT8"}


def config_from_engine(name: str, engine_io: dict, *, instance_kind: str = "KIND_GPU", **kwargs) -> mc.ModelConfig:
    """ModelConfig for a TensorRT engine from what the engine itself reports (convert.INSPECT_ENGINE_SCRIPT's JSON):
    its tensor names, dtypes and dims, and max_batch_size from its optimization profile."""
    tensors = engine_io["io"]
    inputs = [t for t in tensors if t["input"]]
    if not inputs:
        raise ValueError(f"engine description for '{name}' lists no inputs: {engine_io}")
    unknown = sorted({t["dtype"] for t in tensors} - set(_TENSORRT_TO_TRITON))
    if unknown:
        raise ValueError(f"engine '{name}' has tensor types {unknown}, which this series does not map")
    dynamic = inputs[0]["shape"][0] == -1
    max_batch = int(inputs[0]["profile"][2][0]) if dynamic else 0

    def specs(items):
        return [TensorSpec(t["name"], _TENSORRT_TO_TRITON[t["dtype"]], tuple(t["shape"])) for t in items]

    return build_config(name, "tensorrt_plan", specs(inputs), specs([t for t in tensors if not t["input"]]),
                        max_batch_size=max_batch, instance_kind=instance_kind, **kwargs)


def to_text(config: mc.ModelConfig) -> str:
    """config.pbtxt text of a ModelConfig."""
    return text_format.MessageToString(config)


def from_server(config_json: dict) -> mc.ModelConfig:
    """The JSON config a server returns (tritonclient get_model_config) as a ModelConfig, to print as pbtxt."""
    from google.protobuf import json_format

    return json_format.ParseDict(config_json.get("config", config_json), mc.ModelConfig(), ignore_unknown_fields=True)


def fields(config: mc.ModelConfig, ignore: Sequence[str] = ()) -> dict[str, str]:
    """Each top-level field a config sets, as one line of config text (to compare a hand-written config with what a
    server reports for another)."""
    out = {}
    for field, _ in config.ListFields():
        if field.name in ignore:
            continue
        only = mc.ModelConfig()
        only.MergeFrom(config)
        for other, _ in config.ListFields():
            if other.name != field.name:
                only.ClearField(other.name)
        out[field.name] = text_format.MessageToString(only, as_one_line=True)
    return out


class ConfigError(ValueError):
    """A config.pbtxt that is not valid ModelConfig text; the message names the file and the line."""


def read_config(path: str | Path) -> mc.ModelConfig:
    """Parse a config.pbtxt (or the model folder that holds one) into a ModelConfig."""
    path = Path(path)
    if not path.is_file():  # a model folder (or one that is missing): its config.pbtxt
        path = path if path.name == "config.pbtxt" else path / "config.pbtxt"
    if not path.parent.is_dir():
        raise ConfigError(f"model '{path.parent.name}': expected a model folder at {path.parent}, found none")
    if not path.is_file():
        raise ConfigError(f"model '{path.parent.name}': no config.pbtxt at {path}")
    return parse_config(path.read_text(), f"model '{path.parent.name}': {path}")


class ConfigWarning(UserWarning):
    """A config Triton accepts, in a way worth knowing (the message says how it will be read)."""


class ConfigMismatch(ValueError):
    """A config.pbtxt that disagrees with the artifact it describes."""


def _config_specs(config: mc.ModelConfig, field) -> list[TensorSpec]:
    batch = (-1,) if config.max_batch_size > 0 else ()
    return [TensorSpec(t.name, mc.DataType.Name(t.data_type).removeprefix("TYPE_"), batch + tuple(t.dims))
            for t in field]


def _compare(kind: str, declared: Sequence[TensorSpec], actual: Sequence[TensorSpec], config: mc.ModelConfig,
             artifact: Path, check_batch: bool) -> None:
    where = f"model '{config.name}'"
    if [s.name for s in declared] != [s.name for s in actual]:
        raise ConfigMismatch(f"{where}: {kind} names in config are {[s.name for s in declared]}, "
                             f"{artifact.name} has {[s.name for s in actual]}")
    for d, a in zip(declared, actual):
        if d.dtype != a.dtype:
            raise ConfigMismatch(f"{where}: {kind} '{d.name}' data_type is TYPE_{d.dtype} in config, "
                                 f"TYPE_{a.dtype} in {artifact.name}")
        if len(d.shape) != len(a.shape) or any(x != y and y != -1 for x, y in zip(d.shape[1:], a.shape[1:])):
            raise ConfigMismatch(f"{where}: {kind} '{d.name}' dims {list(d.shape[1:] if config.max_batch_size else d.shape)} "
                                 f"in config do not match {artifact.name}'s shape {list(a.shape)}")
        if config.max_batch_size == 0 and d.shape and d.shape[0] != a.shape[0] and a.shape[0] != -1:
            raise ConfigMismatch(f"{where}: {kind} '{d.name}' dims {list(d.shape)} in config do not match "
                                 f"{artifact.name}'s shape {list(a.shape)}")
        if check_batch and config.max_batch_size > 0 and a.shape and a.shape[0] != -1:
            raise ConfigMismatch(
                f"{where}: max_batch_size is {config.max_batch_size} but {artifact.name} fixes {kind} "
                f"'{a.name}' batch to {a.shape[0]}; a batched model needs a dynamic first dimension "
                f"(or set max_batch_size: 0 and dims {list(a.shape)})")


def _zeros(config: mc.ModelConfig, dims_list: Sequence[Sequence[int]], dtypes: Sequence[str], batched: bool):
    import torch

    batch = (1,) if batched else ()
    return [torch.zeros(batch + tuple(dims), dtype=getattr(torch, str(numpy_dtype(dtype))))
            for dims, dtype in zip(dims_list, dtypes)]


def _runs(module, args) -> object | Exception:
    import torch

    try:
        with torch.inference_mode():
            return module(*args)
    except Exception as exc:  # the module's own error says which input it rejected
        return exc


def _what_would_run(module, config: mc.ModelConfig) -> str:
    """The config change under which the module runs on zeros (batch dim, NCHW, channels, dtype), or ''."""
    dims = [list(t.dims) for t in config.input]
    dtypes = [mc.DataType.Name(t.data_type).removeprefix("TYPE_") for t in config.input]
    batched = config.max_batch_size > 0
    tries = []
    if not batched:
        tries.append(("max_batch_size > 0 (the module wants a batch dimension in front; dims stay as they are)",
                      dims, dtypes, True))
        if dims and len(dims[0]) == 4:
            tries.append((f"max_batch_size > 0 and dims {dims[0][1:]} (dims must not include the batch)",
                          [d[1:] for d in dims], dtypes, True))
    if dims and len(dims[0]) == 3 and dims[0][-1] in (1, 3, 4) and dims[0][0] not in (1, 3, 4):
        nchw = [dims[0][2], dims[0][0], dims[0][1]]
        tries.append((f"dims {nchw} (channels first, NCHW; the config has NHWC dims {dims[0]})",
                      [nchw, *dims[1:]], dtypes, batched))
    if dims and len(dims[0]) == 3:
        for channels in (3, 1, 4):
            if channels != dims[0][0]:
                fixed = [channels, *dims[0][1:]]
                tries.append((f"dims {fixed} ({channels} channels; the config says {dims[0][0]})",
                              [fixed, *dims[1:]], dtypes, batched))
    for dtype in ("FP32", "FP16", "INT64"):
        if dtypes and dtype != dtypes[0]:
            tries.append((f"data_type TYPE_{dtype} (the config says TYPE_{dtypes[0]})", dims,
                          [dtype, *dtypes[1:]], batched))
    for description, d, t, b in tries:
        if not isinstance(_runs(module, _zeros(config, d, t, b)), Exception):
            return description
    return ""


def _check_torchscript_inputs(module, config: mc.ModelConfig, path: Path) -> None:
    """The PyTorch backend matches inputs to forward()'s arguments by INPUT__<index> or by argument name."""
    where = f"model '{config.name}'"
    try:
        params = [a.name for a in module.forward.schema.arguments][1:]  # without self
    except (AttributeError, RuntimeError):
        return
    names = [t.name for t in config.input]
    if len(names) != len(params):
        raise ConfigMismatch(f"{where}: {path.name}'s forward() takes {len(params)} input(s) {params}; the config "
                             f"declares {len(names)}: {names}")
    for i, name in enumerate(names):
        m = re.fullmatch(r".+__(\d+)", name)
        if m and int(m.group(1)) >= len(params):
            raise ConfigMismatch(f"{where}: input '{name}' names position {m.group(1)} (the PyTorch backend's "
                                 f"<name>__<index> convention), but forward() takes {len(params)} input(s): "
                                 f"name it INPUT__{i}")
        if not m and name not in params:  # the backend then binds by config order (GetNamingConvention, r24.10)
            warnings.warn(f"{where}: input '{name}' is neither INPUT__<index> nor one of forward()'s argument names "
                          f"{params}, so Triton's PyTorch backend binds the inputs in the config's order ('{name}' "
                          f"-> forward()'s '{params[i]}'); that works, but INPUT__{i} (or '{params[i]}') says so",
                          ConfigWarning, stacklevel=2)
            return


def _torchscript_io(config: mc.ModelConfig, path: Path) -> list[TensorSpec]:
    """Output specs of a TorchScript file found by running it on zeros shaped as the config's inputs."""
    import torch

    module = torch.jit.load(str(path), map_location="cpu").eval()
    _check_torchscript_inputs(module, config, path)
    dims = [list(t.dims) for t in config.input]
    dtypes = [mc.DataType.Name(t.data_type).removeprefix("TYPE_") for t in config.input]
    out = _runs(module, _zeros(config, dims, dtypes, config.max_batch_size > 0))
    if isinstance(out, Exception):
        fix = _what_would_run(module, config)
        first = str(out).strip().splitlines()[-1] if str(out).strip() else type(out).__name__
        raise ConfigMismatch(f"model '{config.name}': {path.name} does not run on the config's inputs "
                             f"{[str(s) for s in _config_specs(config, config.input)]}"
                             + (f"; it runs with {fix}" if fix else "") + f" (torch: {first})")
    batch = (1,) if config.max_batch_size > 0 else ()
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(outs) != len(config.output):
        raise ConfigMismatch(f"model '{config.name}': config declares {len(config.output)} outputs, "
                             f"{path.name} returns {len(outs)}")
    return [TensorSpec(t.name, triton_dtype(o.numpy().dtype), (-1,) * (config.max_batch_size > 0) + tuple(o.shape[len(batch):]))
            for t, o in zip(config.output, outs)]


def _check_format(config: mc.ModelConfig, tensor: mc.ModelInput) -> None:
    """Refuse an input whose declared image `format` its dims cannot have (Triton itself checks only the 3 dims)."""
    if tensor.format not in (mc.ModelInput.FORMAT_NCHW, mc.ModelInput.FORMAT_NHWC):
        return
    declared, dims = mc.ModelInput.Format.Name(tensor.format), list(tensor.dims)
    if len(dims) != 3:
        raise ConfigMismatch(f"model '{config.name}': input '{tensor.name}' declares {declared}, which needs 3 dims "
                             f"(one image, no batch dimension); it has {dims}")
    fits = image_format(dims)
    if fits != declared and fits != "FORMAT_NONE":
        raise ConfigMismatch(f"model '{config.name}': input '{tensor.name}' declares {declared}, but its dims {dims} "
                             f"put the channels {'first' if fits == 'FORMAT_NCHW' else 'last'}: {fits}")


def validate(config: mc.ModelConfig, artifact: str | Path) -> None:
    """Raise ConfigMismatch naming the field where `config` disagrees with the artifact file."""
    artifact = Path(artifact)
    if not artifact.exists():
        raise FileNotFoundError(f"model '{config.name}': artifact {artifact} does not exist")
    for tensor in config.input:
        _check_format(config, tensor)
    head = artifact.read_bytes()[:4]
    if config.platform == "onnxruntime_onnx" or (config.backend == "onnxruntime"):
        ins, outs = onnx_io(artifact)
        _compare("input", _config_specs(config, config.input), ins, config, artifact, check_batch=True)
        _compare("output", _config_specs(config, config.output), outs, config, artifact, check_batch=True)
    elif config.platform == "pytorch_libtorch" or config.backend == "pytorch":
        if head != b"PK\x03\x04":
            raise ConfigMismatch(f"model '{config.name}': platform pytorch_libtorch needs a TorchScript archive; "
                                 f"{artifact.name} is not one")
        actual = _torchscript_io(config, artifact)
        _compare("output", _config_specs(config, config.output), actual, config, artifact, check_batch=False)
    elif config.platform == "tensorrt_plan" or config.backend == "tensorrt":
        if head == b"PK\x03\x04":
            raise ConfigMismatch(
                f"model '{config.name}': platform tensorrt_plan needs a serialized TensorRT engine, but "
                f"{artifact.name} is a zip archive (a TorchScript module, as torch.jit.save writes). "
                "The TensorRT backend cannot load it; build an engine (trtexec --saveEngine or "
                "torch_tensorrt.convert_method_to_trt_engine) or serve the module with the pytorch backend")
    else:
        raise ConfigMismatch(f"model '{config.name}': cannot check platform {config.platform!r} / "
                             f"backend {config.backend!r} against {artifact.name}")


def add_model(repository: str | Path, config: mc.ModelConfig, artifact: str | Path, version: int = 1,
              check: bool = True) -> Path:
    """Validate (unless check=False), then write `<name>/config.pbtxt` and copy the artifact into its version folder."""
    if check:
        validate(config, artifact)
    elif not Path(artifact).exists():
        raise FileNotFoundError(f"model '{config.name}': artifact {artifact} does not exist")
    model_dir = _place_artifact(repository, config, artifact, version)
    (model_dir / "config.pbtxt").write_text(to_text(config))
    return model_dir


def label_files(config: mc.ModelConfig) -> list[str]:
    """The label files a config's outputs name (`label_filename`), which live in the model folder beside it."""
    return sorted({t.label_filename for t in config.output if t.label_filename})


def _place_artifact(repository: str | Path, config: mc.ModelConfig, artifact: str | Path, version: int) -> Path:
    """Copy the artifact into <repository>/<name>/<version>/ under the file name Triton looks for; the model folder."""
    model_dir = Path(repository) / config.name
    version_dir = model_dir / str(version)
    version_dir.mkdir(parents=True, exist_ok=True)
    target = version_dir / (config.default_model_filename or DEFAULT_FILENAME[config.platform])
    if Path(artifact).resolve() != target.resolve():
        shutil.copyfile(artifact, target)
    described = Path(artifact).with_name("engine.json")  # a TensorRT engine's own description (its TensorRT version)
    if config.platform == "tensorrt_plan" and described.is_file() \
            and described.resolve() != (version_dir / "engine.json").resolve():
        shutil.copyfile(described, version_dir / "engine.json")  # launchers.stale_engines reads it before serving
    return model_dir


def tree(repository: str | Path) -> str:
    """The repository as an indented tree with file sizes, like `tree` would print."""
    root = Path(repository)
    lines = [f"{root}/"]

    def walk(folder: Path, depth: int) -> None:
        for p in sorted(folder.iterdir()):
            if p.name.startswith(".") or p.name == "README.md" or p.name == "__pycache__":
                continue
            size = "" if p.is_dir() else f"  ({p.stat().st_size / 1e6:.1f} MB)" if p.stat().st_size > 1e5 else ""
            lines.append("    " * depth + f"|-- {p.name}{'/' if p.is_dir() else ''}{size}")
            if p.is_dir():
                walk(p, depth + 1)

    walk(root, 1)
    return "\n".join(lines)


def derive(repository: str | Path, source: str, name: str, *, target: str | Path | None = None,
           preferred_batch_sizes: Sequence[int] | None = None, max_queue_delay_us: int | None = None,
           instance_count: int | None = None, instance_kind: str | None = None,
           gpus: Sequence[int] | None = None, parameters: Mapping[str, str] | None = None,
           warmup_batch_sizes: Sequence[int] | None = None) -> mc.ModelConfig:
    """Copy model `source` as `name` (into `target`, default the same repository) with dynamic batching, instance
    count, instance kind (KIND_CPU / KIND_GPU), the GPUs of a KIND_GPU group (`count` instances on *each*), backend
    `parameters` (e.g. the PyTorch backend's INFERENCE_MODE) or a `model_warmup` of zeros at each batch size changed."""
    src_dir = Path(repository) / source
    config = read_config(src_dir)
    config.name = name
    if preferred_batch_sizes is not None or max_queue_delay_us is not None:
        set_dynamic_batching(config, preferred_batch_sizes, max_queue_delay_us)
    if instance_count is not None:
        if instance_count < 1:
            raise ValueError(f"instance_count must be >= 1; got {instance_count}")
        for group in config.instance_group:
            group.count = instance_count
    if instance_kind is not None:
        for group in config.instance_group:
            group.kind = mc.ModelInstanceGroup.Kind.Value(instance_kind)
    if gpus is not None:
        for group in config.instance_group:
            if group.kind != group.KIND_GPU:
                raise ValueError(f"model '{name}': gpus {list(gpus)} need instance_kind KIND_GPU; the group is "
                                 f"{mc.ModelInstanceGroup.Kind.Name(group.kind)}")
            group.ClearField("gpus")
            group.gpus.extend(gpus)
    for key, value in (parameters or {}).items():
        config.parameters[key].string_value = str(value)
    if warmup_batch_sizes is not None:
        config.ClearField("model_warmup")
        for size in warmup_batch_sizes:
            if not 1 <= size <= max(config.max_batch_size, 1):
                raise ValueError(f"model '{name}': warm-up batch size {size} is outside 1..{config.max_batch_size}")
            warmup = config.model_warmup.add(name=f"batch{size}", batch_size=size, count=2)  # twice: profile, then optimize
            for tensor in config.input:
                warmup.inputs[tensor.name].data_type = tensor.data_type
                warmup.inputs[tensor.name].dims.extend(tensor.dims)
                warmup.inputs[tensor.name].zero_data = True
    versions = sorted((p for p in src_dir.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    if not versions:
        raise FileNotFoundError(f"model '{source}' has no version folder in {src_dir}")
    artifact = versions[-1] / (config.default_model_filename or DEFAULT_FILENAME[config.platform])
    model_dir = add_model(target or repository, config, artifact, version=int(versions[-1].name))
    for labels in label_files(config):  # the classification labels travel with the model
        if (src_dir / labels).resolve() != (model_dir / labels).resolve():
            shutil.copyfile(src_dir / labels, model_dir / labels)
    return config


def parse_config(text: str, where: str = "config text") -> mc.ModelConfig:
    """A config.pbtxt written by hand, parsed into a ModelConfig; a typo names the line, column and field."""
    try:
        return text_format.Parse(text, mc.ModelConfig())
    except text_format.ParseError as exc:
        raise ConfigError(f"{where} is not a valid model config: {exc} (field names and values: Triton's "
                          "model_config.proto)") from None


def add_model_text(repository: str | Path, text: str, artifact: str | Path | None = None, version: int = 1) -> Path:
    """Write a hand-written config.pbtxt as it is, after parsing it (ModelConfig) and checking it against `artifact`
    (copied into the version folder). Python-backend models and ensembles have no artifact: their version folder is
    created (a Python model's model.py goes there)."""
    config = parse_config(text, "the config")
    if not config.name:
        raise ConfigError("the config has no name: Triton needs `name: \"<folder name>\"` to find the model")
    if artifact is not None:
        validate(config, artifact)
        _place_artifact(repository, config, artifact, version)
    elif config.platform in DEFAULT_FILENAME:
        raise ValueError(f"model '{config.name}': platform {config.platform} needs its artifact (artifact=...)")
    model_dir = Path(repository) / config.name
    (model_dir / str(version)).mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(text)
    return model_dir
