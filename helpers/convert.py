"""TensorRT engines built inside the NGC containers: trtexec and torch-tensorrt commands, and engine outputs read back."""
from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from . import ngc

CONTAINER_DIR = "/workspace/models"  # where the host folder with the ONNX file is mounted


def _shape(name: str, batch: int, dims: Sequence[int]) -> str:
    return f"{name}:{'x'.join(str(d) for d in (batch, *dims))}"


class ContainerStepFailed(RuntimeError):
    """A container step (trtexec, the engine inspection, the version read) ran and failed, or its image did not run
    or could not be pulled."""


def pulled(image: str) -> None:
    """ngc.ensure_image for a container step: a failed pull (disk full, registry unreachable, rate limit) is that
    step's failure, ContainerStepFailed with the reason first, so the notebook reports it and goes on."""
    try:
        ngc.ensure_image(image)
    except ngc.PullFailed as exc:
        raise ContainerStepFailed(str(exc)) from exc


# trtexec's flags across the TensorRT versions of the NGC tags (_TRTEXEC_SOURCE, samples/common/sampleOptions.cpp at
# the NVIDIA/TensorRT tags v10.0.1 to v11.0): every flag the series passes (--onnx, --saveEngine, --min/opt/maxShapes,
# --inputIOFormats/--outputIOFormats; for the parity run --loadEngine, --shapes, --loadInputs, --exportOutput,
# --iterations, --warmUp, --duration) is still parsed by 11.0's trtexec, except --fp16. TensorRT 10.12 deprecated
# the weakly typed APIs behind it (_TRT_10_12_NOTES), 10.14's trtexec warns "Weakly-typed networks have been
# deprecated" when it is passed, and 11.0 removed it with --bf16, --int8, --fp8, --int4 and --best (_TRT_11_TRTEXEC):
# there an ONNX model is made FP16 beforehand (ModelOpt AutoCast) and built strongly typed.
_TRTEXEC_SOURCE = "https://github.com/NVIDIA/TensorRT/blob/v11.0/samples/common/sampleOptions.cpp"
_TRT_10_12_NOTES = "https://docs.nvidia.com/deeplearning/tensorrt/latest/getting-started/release-notes-10/10.12.0.html"
_TRT_11_TRTEXEC = ("https://docs.nvidia.com/deeplearning/tensorrt/11.0.0/api/migration/"
                   "tensorrt-10x-to-11x-trtexec.html")
TRTEXEC_FP16_DEPRECATED = (10, 14)  # the first trtexec that warns on --fp16
TRTEXEC_FP16_REMOVED = 11


def trtexec_args(onnx_file: str, engine_file: str, input_name: str, dims: Sequence[int], *,
                 batches: tuple[int, int, int] = (1, 8, 32), fp16: bool = True, fp16_io: bool = False,
                 tensorrt_major: int = 10) -> list[str]:
    """trtexec arguments: dynamic-batch profile min/opt/max, FP16 kernels, FP32 I/O unless fp16_io."""
    low, opt, high = batches
    if not 1 <= low <= opt <= high:
        raise ValueError(f"batches must be min <= opt <= max, all >= 1; got {batches}")
    if fp16_io and not fp16:
        raise ValueError("fp16_io=True needs fp16=True: FP16 inputs into an FP32 engine only add casts")
    if fp16 and tensorrt_major >= TRTEXEC_FP16_REMOVED:
        raise ValueError("TensorRT 11 removed trtexec's --fp16 (weakly typed builds); with an NGC tag that ships "
                         "TensorRT 11, convert the ONNX model to FP16 first and build it strongly typed")
    args = ["trtexec", f"--onnx={onnx_file}", f"--saveEngine={engine_file}",
            f"--minShapes={_shape(input_name, low, dims)}", f"--optShapes={_shape(input_name, opt, dims)}",
            f"--maxShapes={_shape(input_name, high, dims)}"]
    if fp16:
        args.append("--fp16")
    if fp16_io:  # the engine then takes and returns FP16 tensors: the Triton config must say TYPE_FP16
        args += ["--inputIOFormats=fp16:chw", "--outputIOFormats=fp16:chw"]
    return args


def fp16_note(version: str | None) -> str:
    """What trtexec of TensorRT `version` does with --fp16, in one line ('' where it is plainly accepted)."""
    if not version:
        return ("the TensorRT version is unknown here, so these are TensorRT 10's flags; TensorRT 11 has no --fp16 "
                "and 10.14 and later warn that it is deprecated")
    release = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if release[:1] >= (TRTEXEC_FP16_REMOVED,):
        return "TensorRT 11 has no --fp16: the model must be made FP16 before the build (strongly typed)"
    if release >= TRTEXEC_FP16_DEPRECATED:
        return (f"TensorRT {version}'s trtexec accepts --fp16 but warns that weakly typed networks are deprecated "
                "(TensorRT 11 removed it)")
    return ""


def command_major(version: str | None) -> int:
    """The TensorRT major version whose trtexec flags a command is written for: `version`'s, else 10 (fp16_note says
    so when the version is unknown)."""
    return int(version.split(".")[0]) if version else 10


def in_tensorrt_container(args: Sequence[str], host_dir: str | Path, tag: str = "series",
                          gpu: int | str | None = "series") -> list[str]:
    """`docker run` of a command in the NGC TensorRT container with `host_dir` mounted at CONTAINER_DIR, on `gpu`
    (default the series' GPU, ngc.series_gpu), with Docker's init so that a Ctrl-C reaches trtexec."""
    return ngc.docker_run(ngc.image("tensorrt", tag), list(args), volumes={host_dir: CONTAINER_DIR},
                          workdir=CONTAINER_DIR, gpus=ngc.gpus_flag(gpu), as_user=True, init=True)


def tensorrt_version_in_image(tag: str = "series", pull: bool = True) -> str:
    """The TensorRT version inside the NGC TensorRT image, read from its own Python package (pulled first unless
    pull=False); ContainerStepFailed when the image cannot be pulled, does not run or says no version."""
    image = ngc.image("tensorrt", ngc.series_tag(tag))
    if pull:
        pulled(image)
    args = ngc.docker_run(image, ["python3", "-c", "import tensorrt; print(tensorrt.__version__)"], gpus=None,
                          init=True)
    out = ngc.run_container(args, capture=True)
    found = re.search(r"^(\d+\.\d+(\.\d+)*)", out.stdout.strip(), re.M)
    if out.returncode != 0 or not found:
        raise ContainerStepFailed(f"could not read TensorRT's version from {image} (exit {out.returncode}): "
                                  f"{(out.stderr or out.stdout).strip()[-400:]}")
    return found.group(1)


def tensorrt_version_of(tag: str = "series", *, read_image: bool, pull: bool = True) -> tuple[str | None, str]:
    """The TensorRT of NGC `tag` and where that comes from: with read_image, its TensorRT image's own (pulled first
    unless pull=False; then read only when the engine has it); else, or when the image does not run, the version
    helpers/ngc.py records for the tag; None when neither knows (the second value says why)."""
    tag = ngc.series_tag(tag)
    recorded = ngc.tensorrt_version(tag)
    from_table = (f"recorded for NGC {tag} in helpers/ngc.py" if recorded else
                  f"not recorded for NGC {tag}: {ngc.RELEASE_POLICY[tag].tensorrt_note or 'no release notes read'}"
                  if tag in ngc.RELEASE_POLICY else f"NGC {tag} is not in helpers/ngc.py's release table")
    if not read_image:
        return recorded, from_table
    image = ngc.image("tensorrt", tag)
    if not pull and not ngc.image_present(image):
        return recorded, f"{image} is not on this machine, so not read from it; {from_table}"
    try:
        return tensorrt_version_in_image(tag, pull=pull), f"read from {image}"
    except ContainerStepFailed as exc:
        return recorded, f"{exc}; {from_table}"


# Runs in the NGC TensorRT container: what the built engine really takes and returns, and its batch profile,
# so that the Triton config is written from the engine rather than from the flags we meant to pass.
INSPECT_ENGINE_SCRIPT = '''\
import json, sys
import tensorrt as trt
engine = trt.Runtime(trt.Logger(trt.Logger.ERROR)).deserialize_cuda_engine(open(sys.argv[1], "rb").read())
io = []
for i in range(engine.num_io_tensors):
    name = engine.get_tensor_name(i)
    is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
    entry = {"name": name, "input": is_input, "dtype": str(engine.get_tensor_dtype(name)).split(".")[-1],
             "shape": [int(d) for d in engine.get_tensor_shape(name)]}
    if is_input:
        entry["profile"] = [[int(d) for d in s] for s in engine.get_tensor_profile_shape(name, 0)]
    io.append(entry)
json.dump({"tensorrt": trt.__version__, "io": io}, open(sys.argv[2], "w"), indent=1)
print("wrote", sys.argv[2])
'''


def inspect_engine_command(engine_file: str, output_json: str, host_dir: str | Path, tag: str = "series",
                           gpu: int | str | None = "series") -> list[str]:
    """`docker run` that writes the engine's I/O and profile as JSON (needs inspect_engine.py in host_dir)."""
    return in_tensorrt_container(["python3", "inspect_engine.py", engine_file, output_json], host_dir, tag, gpu)


def in_pytorch_container(args: Sequence[str], host_dir: str | Path, tag: str = "series",
                         gpu: int | str | None = "series") -> list[str]:
    """`docker run` of a command in the NGC PyTorch container (it ships torch-tensorrt) with `host_dir` mounted."""
    return ngc.docker_run(ngc.image("pytorch", tag), list(args), volumes={host_dir: CONTAINER_DIR},
                          workdir=CONTAINER_DIR, gpus=ngc.gpus_flag(gpu), as_user=True, init=True,
                          extra=["--ipc=host"])


def engine_outputs_args(engine_file: str, input_name: str, input_file: str, shape: Sequence[int],
                        output_json: str) -> list[str]:
    """trtexec arguments that run an engine once on an input saved with ndarray.tofile and export its outputs."""
    return ["trtexec", f"--loadEngine={engine_file}", f"--shapes={input_name}:{'x'.join(map(str, shape))}",
            f"--loadInputs={input_name}:{input_file}", f"--exportOutput={output_json}", "--iterations=1",
            "--warmUp=0", "--duration=0"]


def read_trtexec_outputs(path: str | Path) -> dict[str, np.ndarray]:
    """Outputs that `trtexec --exportOutput` wrote: name -> array shaped by its `dimensions` field."""
    records = json.loads(Path(path).read_text())
    out = {}
    for rec in records:
        dims = [int(d) for d in str(rec["dimensions"]).split("x")]
        out[rec["name"]] = np.asarray(rec["values"], dtype=np.float32).reshape(dims)
    return out


def run_checked(args: Sequence[str], log_file: str | Path) -> None:
    """Run a container command (its image pulled first, with progress), its output to `log_file`; raise
    ContainerStepFailed with the log's tail when it fails, or with the reason when its image cannot be pulled. A
    `docker run` runs named, and a Ctrl-C or an error removes its container (ngc.run_container), so an interrupted
    trtexec cannot write model.plan after the notebook moved on."""
    container = list(args[:2]) == ["docker", "run"]
    log_file = Path(log_file)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    if container:
        try:
            pulled(ngc.image_of(args))
        except ContainerStepFailed as exc:
            log_file.write_text(f"{ngc.as_shell(args)}\nnot run: {exc}\n")
            raise
    with open(log_file, "w") as log:
        run = ngc.run_container if container else subprocess.run
        code = run(list(args), stdout=log, stderr=subprocess.STDOUT).returncode
    if code != 0:
        tail = "\n".join(log_file.read_text(errors="replace").splitlines()[-20:])
        raise ContainerStepFailed(f"command failed with exit code {code}: {ngc.as_shell(args)}\n{tail}")


def run_optional(args: Sequence[str], log_file: str | Path) -> str:
    """run_checked for a step the rest does not need: returns '' when it worked, else the failure in one line (the
    log keeps the rest), so the notebook records it and goes on."""
    try:
        run_checked(args, log_file)
        return ""
    except ContainerStepFailed as exc:
        return summary(exc)


def summary(exc: Exception) -> str:
    """A failed step in one line: its first line (the command and exit code) and the last line of its log's tail."""
    lines = str(exc).splitlines() or [type(exc).__name__]
    return f"{lines[0]} ... {lines[-1].strip()}" if len(lines) > 1 else lines[0]


# Runs in the NGC PyTorch container: the article's torch_tensorrt.compile, saved under the name it really has.
# The result is TorchScript with TensorRT inside: the PyTorch backend serves it (as model.pt), the TensorRT
# backend cannot (the article saved it as model.plan). The module is made FP16 *before* compiling (FP32 at its
# edges): from NGC 26.06 the TorchScript frontend builds strongly typed networks and only logs a message for
# enabled_precisions={torch.half}, so passing that flag alone would silently give an FP32 engine.
TORCH_TENSORRT_SCRIPT = '''\
import sys, torch, torch_tensorrt
src, out = sys.argv[1:3]
low, opt, high = (int(b) for b in sys.argv[3:6])
fp32 = torch.jit.load(src).eval().cuda()


class HalfInside(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner.half()

    def forward(self, x):
        return self.inner(x.half()).float()


example = torch.randn(opt, 3, 224, 224, device="cuda")
with torch.inference_mode():
    reference = fp32(example)
    module = torch.jit.trace(HalfInside(torch.jit.load(src).eval().cuda()), example)  # a second copy: .half() is in place
spec = [torch_tensorrt.Input(min_shape=(low, 3, 224, 224), opt_shape=(opt, 3, 224, 224),
                             max_shape=(high, 3, 224, 224), dtype=torch.float32)]
compiled = torch_tensorrt.compile(module, ir="ts", inputs=spec, enabled_precisions={torch.half, torch.float})
with torch.inference_mode():
    diff = (compiled(example) - reference).abs().max().item()
torch.jit.save(compiled, out)
print(f"wrote {out}; torch_tensorrt {torch_tensorrt.__version__}; max abs diff against FP32: {diff:.2e}")
'''


def optimized_stand_in(runtime: str, device: str) -> tuple[str, str]:
    """(model name, why) of the 'optimized' ResNet18 the series can build with this runtime and device."""
    if runtime == "docker":
        return "resnet18_trt", "TensorRT FP16 engine (trtexec in the NGC TensorRT container), TensorRT backend"
    precision = "FP16 on CUDA" if device == "cuda" else "FP32 on CPU"
    return "resnet18_opt", (f"no TensorRT here: the TorchScript variant ({precision}) that notebook 12 kept after "
                            "measuring them on the server (the winner beyond noise, else the simpler) stands in for the engine")


def torchscript_candidates(device: str) -> dict[str, dict[str, bool]]:
    """Variants of the baseline TorchScript that may stand in for a TensorRT engine: name -> to_torchscript options."""
    if device == "cuda":  # FP16 is most of what TensorRT buys on this network; NHWC feeds the tensor cores
        return {"fp16": {"fp16": True}, "fp16_frozen": {"fp16": True, "freeze": True},
                "fp16_nhwc_frozen": {"fp16": True, "freeze": True, "channels_last": True}}
    return {"fp32_frozen": {"freeze": True}, "fp32_nhwc_frozen": {"freeze": True, "channels_last": True}}
