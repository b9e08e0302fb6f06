"""What an installed wheel must do on its own: run by wheel_check.py inside the fresh venv,
from a folder outside the source tree, with the source tree (the build folders and .deps
in it) hidden. Every input is a copy in DATA.

    python wheel_doors.py DATA OUT
"""

import json
import os
import subprocess
import sys

import nibabel as nib
import numpy as np

import swi
from swi import _swi

data, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
for hidden in filter(None, os.environ.get("SWI_DOORS_HIDDEN", "").split(os.pathsep)):
    assert not os.listdir(hidden), f"{hidden} is still in view"
assert swi.__file__.startswith(sys.prefix), f"swi imported from outside the venv: {swi.__file__}"
for feature in ("segment", "plan", "report"):
    assert hasattr(_swi, feature), f"the wheel's extension lacks {feature}: built without the pipeline"

# a real-scan job: a NIfTI through the ONNX model, labels written, a review page
volume = os.path.join(data, "volume.nii.gz")
model = os.path.join(data, "unet.onnx")
common = dict(model=model, roi=32, overlap=0.25, mode="gaussian", sw_batch_size=4, threads=2)
labels_path = os.path.join(out, "labels.nii.gz")
page = os.path.join(out, "page.html")
seg = swi.segment(volume, labels_path, report=page, **common)
labels = np.asarray(nib.load(labels_path).dataobj)
golden = np.asarray(nib.load(os.path.join(data, "labels.nii.gz")).dataobj)
agree = float(np.mean(labels == golden))
assert agree > 0.999, f"labels agree with the golden case on {agree:.4%} of voxels"
html = open(page, encoding="utf-8").read()
assert "niivue" in html.lower() and len(html) > 1_000_000, "the review page lacks NiiVue"
print(f"wheel_doors: real-scan job, labels agree with the golden case on {agree:.4%}; review page {len(html)} B")

# swi.plan_job: what the job would do, nothing run
plan = swi.plan_job(volume, **common)
assert plan, "plan_job returned nothing"

# a store job: Zarr in, Zarr out, the same labels as the file's
import zarr  # noqa: E402

x = np.asarray(nib.load(volume).dataobj, dtype=np.float32)
zarr.save_array(os.path.join(out, "in.zarr"), x, chunks=(16, 16, 16))
swi.segment(os.path.join(out, "in.zarr"), os.path.join(out, "labels.zarr"), **common)
stored = zarr.open(os.path.join(out, "labels.zarr"), mode="r")[:]
assert stored.shape == labels.shape and np.array_equal(stored, labels), "the store's labels differ from the file's"
print("wheel_doors: store job, labels equal the file's")

# swi.dask with the ONNX model: each part through the wheel's own library (no swi command)
import swi.dask  # noqa: E402
from dask.distributed import Client, LocalCluster  # noqa: E402

with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster, \
        Client(cluster) as client:
    swi.dask.segment(client, os.path.join(out, "in.zarr"), os.path.join(out, "dask.zarr"), model, 32, 4,
                     overlap=0.25, mode="gaussian", grid=(2, 1, 1))
parts = zarr.open(os.path.join(out, "dask.zarr"), mode="r")[:]
assert np.array_equal(parts, labels), "swi.dask's labels differ from the file's"
print("wheel_doors: dask job in parts, labels equal the file's")

# swi.report from arrays
swi.report(labels, x, nib.load(volume).affine, classes=["background", "a", "b", "c"],
           path=os.path.join(out, "report.html"))
assert os.path.getsize(os.path.join(out, "report.html")) > 1_000_000
print("wheel_doors: swi.report written")

# the converter, as its docs run it, then its model through swi.segment
converted = os.path.join(out, "converted")
r = subprocess.run([sys.executable, "-m", "swi", "convert", "nnunet", os.path.join(data, "nnunet_model"),
                    "--output", converted], capture_output=True, text=True, timeout=600)
assert r.returncode == 0, f"python -m swi convert nnunet failed:\n{r.stdout}{r.stderr}"
card = json.load(open(os.path.join(converted, "nnunet.json")))
assert card, "the converted model has no card"
ct = np.random.default_rng(0).normal(0, 300, (40, 36, 32)).astype(np.float32)
nib.save(nib.Nifti1Image(ct, np.diag([1.5, 1.5, 2.0, 1.0])), os.path.join(out, "ct.nii.gz"))
nn = swi.segment(os.path.join(out, "ct.nii.gz"), os.path.join(out, "ct_seg.nii.gz"), model=converted, threads=2)
nn_labels = np.asarray(nib.load(os.path.join(out, "ct_seg.nii.gz")).dataobj)
assert nn_labels.shape == ct.shape
print("wheel_doors: converted an nnU-Net model and segmented with it")
print("wheel_doors: passed")
