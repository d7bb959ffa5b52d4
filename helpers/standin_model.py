"""Triton Python-backend model that serves an ONNX or TorchScript artifact when its native backend is missing.

Copied as `model.py` into a served model's version folder by helpers.server; reads its config parameters:
ARTIFACT (file in the version folder), ARTIFACT_FORMAT (onnx | torchscript), DEVICE (cpu | cuda).
Requests that Triton's dynamic batcher hands over together are concatenated and run as one batch.
The model runs three times on zeros when it loads, so that the first measured requests are not warm-up.
"""
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Runs the artifact with ONNX Runtime or TorchScript, keeping the config's names, dtypes and batching."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        path = os.path.join(args["model_repository"], args["model_version"], params["ARTIFACT"])
        self.batched = config.get("max_batch_size", 0) > 0
        self.input_names = [t["name"] for t in config["input"]]
        self.outputs = [(t["name"], t["data_type"]) for t in config["output"]]
        fmt, device = params["ARTIFACT_FORMAT"], params.get("DEVICE", "cpu")
        if fmt == "onnx":
            import onnxruntime as ort

            session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            names = [name for name, _ in self.outputs]
            self.run = lambda arrays: session.run(names, dict(zip(self.input_names, arrays)))
            self.from_triton = lambda tensor: tensor.as_numpy()
            self.to_triton = lambda name, out: pb_utils.Tensor(name, np.ascontiguousarray(out))
            self.concat = np.concatenate
            self.zeros = np.zeros
        elif fmt == "torchscript":
            import torch
            from torch.utils import dlpack

            module = torch.jit.load(path, map_location=device).eval()
            self.from_triton = lambda tensor: dlpack.from_dlpack(tensor.to_dlpack())  # no NumPy: its ABI may differ
            self.to_triton = lambda name, out: pb_utils.Tensor.from_dlpack(name, dlpack.to_dlpack(out.contiguous()))
            self.concat = torch.cat

            def run(tensors):
                with torch.inference_mode():
                    out = module(*[t.to(device) for t in tensors])
                return [o.cpu() for o in (out if isinstance(out, (tuple, list)) else [out])]

            self.run = run
            self.zeros = lambda shape, dtype: torch.zeros(shape, dtype=getattr(torch, np.dtype(dtype).name))
        else:
            raise pb_utils.TritonModelException(f"ARTIFACT_FORMAT must be onnx or torchscript; got {fmt!r}")
        # Warm up (TorchScript optimizes on its first calls, CUDA initializes lazily) so that the first measured
        # requests are not the slowest.
        batch = [1] if self.batched else []
        zeros = [self.zeros(batch + [max(int(d), 1) for d in t["dims"]], pb_utils.triton_string_to_numpy(t["data_type"]))
                 for t in config["input"]]
        for _ in range(3):
            self.run(zeros)

    def execute(self, requests):
        per_request = [[self.from_triton(pb_utils.get_input_tensor_by_name(r, n)) for n in self.input_names]
                       for r in requests]
        try:
            if self.batched:
                sizes = [tensors[0].shape[0] for tensors in per_request]
                batch = [self.concat([tensors[i] for tensors in per_request]) for i in range(len(self.input_names))]
                results = self.run(batch)
                bounds = np.cumsum([0] + sizes)
                split = [[r[bounds[k]:bounds[k + 1]] for r in results] for k in range(len(requests))]
            else:
                split = [self.run(tensors) for tensors in per_request]
        except Exception as exc:  # report the failure on every request of the batch instead of crashing the stub
            error = pb_utils.TritonError(f"{type(exc).__name__}: {exc}")
            return [pb_utils.InferenceResponse(output_tensors=[], error=error) for _ in requests]
        return [pb_utils.InferenceResponse(output_tensors=[self.to_triton(name, out)
                                                           for (name, _), out in zip(self.outputs, outs)])
                for outs in split]
