"""Predictor factories for test_dask (a module of their own, so worker processes import them)."""

import os

import numpy as np


def numpy_net(x):
    """4 classes from a fixed mix of the window's voxels and their neighbours (numpy in/out)."""
    s = x.sum(1, keepdims=True)
    return np.concatenate([np.sin(s * (c + 1)) + np.roll(s, c, axis=-1) * 0.3 * c for c in range(4)], 1)


def make_numpy_net():
    return numpy_net


def make_torch_net():
    import torch

    torch.manual_seed(0)
    return torch.nn.Conv3d(1, 3, 3, padding=1).eval()


class DieOnce:
    """Kills the worker process the first time any worker builds it (marker file absent)."""

    def __init__(self, marker):
        self.marker = marker

    def __call__(self):
        if not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)
        return numpy_net


def failing_net(x):
    raise RuntimeError("the network failed")


def make_failing_net():
    return failing_net


def other_net(x):
    """Another job's network: numpy_net's classes reversed."""
    return numpy_net(x)[:, ::-1]


def make_other_net():
    return other_net
