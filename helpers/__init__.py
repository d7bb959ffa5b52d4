"""Helpers behind the notebooks: export, convert, repository, server, client, perf, plots."""
# PyTorch and torchvision must be loaded before TensorFlow: importing either after TensorFlow segfaults with the
# pinned wheels (tensorflow-cpu 2.20, torch 2.14.1, torchvision 0.29.1 on Linux x86_64). Once any helper is
# imported, the first `import tensorflow` (also the one inside `import keras` or tf2onnx) loads them first, so
# notebooks import helpers before keras or tensorflow. Not at import time: a process that only starts or stops a
# server (the reliability tests start hundreds) would pay 2 s for torch it never uses.
from __future__ import annotations

import importlib.abc
import sys
import warnings

# The pinned PyTorch deprecates TorchScript: torch.jit.trace, script, save, load and freeze each warn "`torch.jit.load`
# is deprecated. Please switch to `torch.export`" (freeze: "Please use `torch.compile` instead"). Notebook 10 says why
# the series still serves TorchScript (Triton's PyTorch backend batches it; its torch_aoti platform for torch.export
# archives cannot batch yet), so this one warning is not printed again in every notebook that touches a .pt file; any
# other warning still shows.
warnings.filterwarnings("ignore", message=r"`torch\.jit\.\w+` is deprecated\. Please (switch to|use)", category=FutureWarning)


class _TorchBeforeTensorFlow(importlib.abc.MetaPathFinder):
    """Imports torch and torchvision when tensorflow is about to be imported and they are not loaded yet."""

    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow":
            sys.meta_path.remove(self)  # once, and not again while torch itself imports
            import torch  # noqa: F401  (a no-op where they are loaded already)
            import torchvision  # noqa: F401
        return None  # the regular finders import tensorflow itself


if "tensorflow" not in sys.modules and not any(isinstance(f, _TorchBeforeTensorFlow) for f in sys.meta_path):
    sys.meta_path.insert(0, _TorchBeforeTensorFlow())
