"""Calls a type checker must refuse (the wheel test expects mypy to fail here)."""

import numpy as np

import swi

volume = np.zeros((1, 1, 8, 8, 8), np.float32)
swi.sliding_window_inference(volume, 4, "two", lambda x: x)  # sw_batch_size is an int
swi.SlidingWindowInferer(4, max_memory=1.5)  # bytes (int) or a string like "4G"
swi.segment("ct.nii.gz", model="unet.onnx", spacing="1.5")  # mm: a float or three
