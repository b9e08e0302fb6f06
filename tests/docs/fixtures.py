"""fixtures.py SOURCE_DIR OUT -- the inputs the manual's examples name, small.

Each example runs in a copy of OUT. Volumes are small (the pages show full-size ones; the
commands are the same): a CT-like phantom from `swi demo` as ct.nii.gz (and the other
scans' names), a DICOM series, a Zarr store; every ONNX model name is the bundled network
(models/demo.onnx, window 32) with its card; nnU-Net model folders are the tiny trained
ones of tests/data/nnunet-models, converted once where a page uses the converted folder
without converting it. Run with the python of the venv holding the wheel."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nibabel as nib
import numpy as np

root, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True)
NN = root / "tests" / "data" / "nnunet-models"
CT_MODEL = NN / "Dataset990_SwiTinyCT" / "nnUNetTrainer__nnUNetPlans__3d_fullres"
MR_MODEL = NN / "Dataset991_SwiTinyMR" / "nnUNetTrainer__nnUNetResEncUNetMPlans__3d_fullres"


def run(*cmd, **kw):
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL, **kw)


# volumes: the demo phantom (what the bundled network was trained on), 40x40x32 at 1.5 mm
tmp = out / ".demo"
run("swi", "demo", "--output-dir", tmp, "--size", "40,40,32", "--seed", "7", "-q")
img = nib.load(tmp / "demo_image.nii.gz")
data = np.asarray(img.dataobj, dtype=np.float32)
affine = np.diag([1.5, 1.5, 1.5, 1.0])
ct = nib.Nifti1Image(data, affine)
for name in ("ct.nii.gz", "t1.nii.gz", "t2.nii.gz", "volume.nii.gz"):
    nib.save(ct, out / name)
small = nib.Nifti1Image(data[:32, :32, :24].copy(), affine)
for d, names in (("scans", ("case_a.nii.gz", "case_b.nii.gz")), ("imagesTs", ("CASE_0000.nii.gz",))):
    (out / d).mkdir()
    for n in names:
        nib.save(small, out / d / n)
shutil.rmtree(tmp)

# a DICOM series (the oblique CT of io/tests/formats.py), and one with a slice missing
sys.path.insert(0, str(root / "io" / "tests"))
import formats  # noqa: E402

raw, _ = formats.scan()
formats.write_dicom(str(out / "CT_SERIES"), raw)
formats.write_dicom(str(out / "patient7" / "CT"), raw, drop=(3,))

# Zarr v2 stores: uint16, chunks of 16
import zarr  # noqa: E402

vol = (np.clip(data, 0, None) * 1000).astype(np.uint16)
big = np.concatenate([vol] * 4, axis=0)[:128]  # 128 rows: two output chunk rows of 64
for name in ("ct.zarr", "lustre/vol.zarr"):
    (out / name).parent.mkdir(parents=True, exist_ok=True)
    z = zarr.open(str(out / name), mode="w", shape=big.shape, chunks=(16, 16, 16), dtype="u2")
    z[:] = big

# ONNX models: the bundled network and its card under every name the pages use
card = json.loads((root / "models" / "demo.json").read_text())
for name in ("unet", "m", "fold0", "fold1", "liver", "models/demo"):
    (out / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(root / "models" / "demo.onnx", out / f"{name}.onnx")
    (out / f"{name}.json").write_text(json.dumps(card))

# a TorchScript network (4 classes, any window)
try:
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv3d(1, 4, 3, padding=1)).eval()
    torch.jit.script(net).save(str(out / "unet.pt"))
except ImportError:
    pass

# nnU-Net v2 model folders, by the names the pages give them
for dst, src in (("MODEL_DIR", CT_MODEL), ("Dataset001/nnUNetTrainer__nnUNetPlans__3d_fullres", CT_MODEL),
                 ("nnUNet_results/Dataset003_Liver/nnUNetTrainer__nnUNetPlans__3d_fullres", MR_MODEL)):
    shutil.copytree(src, out / dst)
    for fold in (out / dst).glob("fold_*"):
        shutil.copy(fold / "checkpoint_final.pth", fold / "checkpoint_best.pth")
# converted once, for the examples that use a converted folder
run(sys.executable, "-m", "swi", "convert", "nnunet", out / "MODEL_DIR", "--output", out / "OUT_DIR", "-q")
run(sys.executable, "-m", "swi", "convert", "nnunet", MR_MODEL, "--output", out / "liver-swi", "-q")
shutil.copytree(out / "OUT_DIR", out / "ds001")
