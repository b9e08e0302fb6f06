"""The CUDA predictor path (swi._cuda): its buffer pool on any machine, the whole path
where a CUDA device exists."""

import numpy as np
import pytest
import torch

import swi
from swi._cuda import Staging


class HostStaging(Staging):
    """The pool alone, with pageable buffers (no device needed)."""

    def __init__(self):
        self.inputs, self.outputs = {}, []

    def _alloc(self, shape):
        return torch.empty(shape, dtype=torch.float32)


def test_output_buffers_are_reused_only_once_the_engine_lets_go():
    st = HostStaging()
    t1, v1 = st._free_output((2, 3, 4))
    held = memoryview(v1)  # what the engine holds while it blends the batch
    t2, v2 = st._free_output((2, 3, 4))
    assert t2.data_ptr() != t1.data_ptr()
    t3, _ = st._free_output((5,))
    assert t3.data_ptr() not in (t1.data_ptr(), t2.data_ptr())
    del held, v1  # the engine and the caller both let go
    t4, _ = st._free_output((2, 3, 4))
    assert t4.data_ptr() == t1.data_ptr() and len(st.outputs) == 3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_predictor_matches_the_cpu_run():
    x = torch.rand(1, 1, 40, 36, 30)
    w = torch.rand(1, 5, 1, 1, 1)

    def net(d):
        return torch.sin(d * w.to(d.device) * 7)

    with torch.no_grad():
        cpu = swi.sliding_window_inference(x, 16, 3, net, 0.25, "gaussian", reduce=["argmax", "none"])
        gpu = swi.sliding_window_inference(x, 16, 3, net, 0.25, "gaussian", sw_device="cuda", device="cpu",
                                           reduce=["argmax", "none"])
    torch.testing.assert_close(gpu["none"], cpu["none"], rtol=1e-5, atol=1e-5)
    assert np.mean((gpu["argmax"] == cpu["argmax"]).numpy()) > 0.999
