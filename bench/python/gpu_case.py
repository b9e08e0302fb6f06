"""One timed sliding-window run with the network on a CUDA device, as one JSON line.

    gpu_case.py --impl swi|monai --net linear|unet [--shape 384,384,256] [--classes 100]
                [--roi 128] [--overlap 0.25] [--mode gaussian] [--sw-batch 4]

linear: the seed case's network, x * w[c] on the device (100 classes: all cost is
stitching); unet: MONAI's UNet (1 -> classes, channels 16..128, random weights) on the
device. swi: swi.sliding_window_inference(reduce="argmax"); monai: MONAI 1.4's
sliding_window_inference on the same device, then argmax. Reported: wall time (the
device synchronised), torch.cuda.max_memory_allocated, the process's peak RSS, and
whether the two agree is left to the caller (--labels saves them).
"""

import argparse
import json
import resource
import sys
import time

import torch


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", required=True, choices=["swi", "monai"])
    ap.add_argument("--net", default="linear", choices=["linear", "unet"])
    ap.add_argument("--shape", default="384,384,256")
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--roi", type=int, default=128)
    ap.add_argument("--overlap", type=float, default=0.25)
    ap.add_argument("--mode", default="gaussian")
    ap.add_argument("--sw-batch", type=int, default=4)
    ap.add_argument("--labels", default=None)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"impl": a.impl, "net": a.net, "error": "no CUDA device"}))
        return 3
    dev = torch.device("cuda")
    shape = tuple(int(v) for v in a.shape.split(","))
    g = torch.Generator().manual_seed(0)
    x = torch.rand((1, 1) + shape, generator=g)  # on the host, as a loaded volume is
    if a.net == "linear":
        w = (torch.rand(a.classes, generator=g) + 0.5).reshape((1, a.classes, 1, 1, 1)).to(dev)

        def net(win):
            return win * w
    else:
        from monai.networks.nets import UNet

        torch.manual_seed(0)
        net = UNet(3, 1, a.classes, channels=(16, 32, 64, 128), strides=(2, 2, 2), num_res_units=2).to(dev).eval()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    t0 = time.perf_counter()
    with torch.no_grad():
        if a.impl == "swi":
            import swi

            labels = swi.sliding_window_inference(x, a.roi, a.sw_batch, net, a.overlap, a.mode, sw_device=dev,
                                                  device="cpu", reduce="argmax")
        else:
            from monai.inferers import sliding_window_inference

            scores = sliding_window_inference(x.to(dev), a.roi, a.sw_batch, net, a.overlap, a.mode)
            labels = scores.argmax(1, keepdim=True).to(torch.uint8).cpu()
            del scores
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    if a.labels:
        import numpy as np

        np.save(a.labels, labels.numpy())
    print(json.dumps({"impl": a.impl, "net": a.net, "seconds": round(dt, 3),
                      "device_peak_mb": round((torch.cuda.max_memory_allocated() - base) / 2**20, 1),
                      "host_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                      "shape": shape, "classes": a.classes, "roi": a.roi, "sw_batch": a.sw_batch,
                      "device": torch.cuda.get_device_name()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
