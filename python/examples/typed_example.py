"""swi's public API as a type checker sees it (checked with mypy --strict by the wheel test)."""

import numpy as np
import numpy.typing as npt

import swi


def predictor(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    return np.concatenate([x, -x], axis=1)


volume = np.random.default_rng(0).random((1, 1, 40, 36, 30), dtype=np.float32)
labels = swi.sliding_window_inference(volume, (16, 16, 16), 4, predictor, 0.25, "gaussian", reduce="argmax")
conf = swi.sliding_window_inference(volume, 16, 2, predictor, overlap=(0.5, 0.25, 0.25),
                                    reduce=["argmax", "confidence"], max_memory="1G", threads=2, order="auto")
p = swi.plan((1, 1, 40, 36, 30), 16, 2, reduce="argmax", out_channels=2, max_memory=1 << 30)
peak: int = p["bytes_peak"]
inferer = swi.SlidingWindowInferer((16, 16, 16), 4, 0.25, "gaussian", reduce="argmax")
adapt = swi.SlidingWindowInfererAdapt(16, 8)
out = inferer(volume, predictor)


def keep_margin(scores: npt.NDArray[np.float32], region: swi.Region) -> None:
    print(region.index, scores.shape)


swi.sliding_window_inference(volume, 16, 1, predictor, reduce=keep_margin)


def segment_scan(path: str) -> swi.Segmentation:
    """A whole job (not run here: there is no scan)."""
    seg = swi.segment(path, "seg.nii.gz", predictor=predictor, classes=2, roi=16, part=None, progress=True)
    job = swi.plan_job(path, model=["fold0.onnx", "fold1.onnx"], spacing=(1.5, 1.5, 2.0), max_memory="2G")
    print(seg.outputs, job["describe"])
    return swi.segment(path, model="unet.onnx", orientation="RAS", spacing=1.5, scores=True)


print(peak, labels.shape, conf, out.shape, adapt)
