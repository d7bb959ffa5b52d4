"""Helpers behind the notebooks: export, convert, repository, server, client, perf, plots."""
# PyTorch and torchvision must be loaded before TensorFlow: importing either after TensorFlow segfaults with the
# pinned wheels (tensorflow-cpu 2.20, torch 2.14.1, torchvision 0.29.1 on Linux x86_64). Importing any helper
# loads them first, so notebooks import helpers before keras or tensorflow.
import torch  # noqa: F401
import torchvision  # noqa: F401
