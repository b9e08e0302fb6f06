#!/usr/bin/env python3
"""cli_bounds_*: swi is bounded before it allocates, and files that would block are refused.

usage: bounds.py --list | CASE SWI WORKDIR
Exit 0 passed, 1 failed, 77 skipped (a Python module or a feature of swi missing).

fifo_nnunet_card  a FIFO named nnunet.json (or a fold's model) in an nnU-Net model directory,
                  or as swi export's --card: refused by name at once (they used to block)
json_bounds       model cards, nnU-Net cards and Zarr metadata nested deeper than 64 levels
                  or larger than their cap: refused naming the file
nnunet_budget     a 16^3 NIfTI of 40 mm voxels for a 1 mm model (a 640^3 model grid) under
                  --max-memory 200M: refused naming the file and what it needs, before the grid
                  is made (it used to reach 1.1 GB); budget refusals name the input
nnunet_channels   an nnU-Net model's two channels of one size on two grids: refused naming both
plan_huge_zarr    swi plan on a .zarray claiming 4096^3 (no chunks): answers in seconds within
                  a few hundred MB (2048^3 used to take minutes: every window was read)
"""
import os
import shutil
import subprocess
import sys
import time

CASES = ["fifo_nnunet_card", "json_bounds", "nnunet_budget", "nnunet_channels", "plan_huge_zarr"]
if len(sys.argv) == 2 and sys.argv[1] == "--list":
    print("\n".join(CASES))
    sys.exit(0)
if len(sys.argv) != 4 or sys.argv[1] not in CASES:
    print(__doc__)
    sys.exit(2)
case, swi, work = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.join(sys.argv[3], sys.argv[1])

try:
    import numpy as np
    import nibabel as nib
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import clitest
except ImportError as e:
    print("skipped: %s (apt-get install python3-numpy python3-nibabel python3-onnx)" % e)
    sys.exit(77)

shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
failures, checks = [], 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def skip(why):
    print("skipped:", why)
    sys.exit(77)


class Ran:
    def __init__(self, rc, out, err, seconds, rss_mb):
        self.returncode, self.stdout, self.stderr, self.seconds, self.rss_mb = rc, out, err, seconds, rss_mb


def run(*args, timeout=60, env=None):
    """swi with args: exit status, output, wall time and the child's own peak RSS (wait4)."""
    t0 = time.monotonic()
    p = subprocess.Popen([swi, *args], stdout=open("stdout", "w"), stderr=open("stderr", "w"),
                         stdin=subprocess.DEVNULL, env=dict(os.environ, **(env or {})))
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - t0 > timeout:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            p.returncode = -999
            break
        time.sleep(0.02)
    rc = p.returncode if p.returncode == -999 else os.waitstatus_to_exitcode(status)
    p.returncode = rc  # reaped here: Popen must not wait again
    with open("stdout") as f:
        out = f.read()
    with open("stderr") as f:
        err = f.read() if rc != -999 else "timed out after %d s (a hang)" % timeout
    return Ran(rc, out, err, time.monotonic() - t0, ru.ru_maxrss / 1024.0)


def refused(r, what, *patterns):
    check(r.returncode == 1, "%s: exit %d, expected 1: %s" % (what, r.returncode, r.stderr))
    lines = r.stderr.strip().splitlines()
    check(len(lines) == 1 and all(p in r.stderr for p in patterns),
          "%s: one line with %s: %s" % (what, patterns, r.stderr))


version = run("--version").stdout
if "ONNX Runtime: not built in" in version:
    skip("swi built without ONNX Runtime")
clitest.make_models(".")
nib.save(nib.Nifti1Image(clitest.volume(), np.eye(4)), "v.nii.gz")

CARD = """{"format": "swi-nnunet", "version": 1, "configuration": "3d_fullres",
 "dataset_name": "Dataset999_Bounds", "folds": [0], "models": ["fold_0.onnx"],
 "dims": 3, "patch_size": [8, 8, 8], "window": [8, 8, 8],
 "spacing": [1.0, 1.0, 1.0], "image_reader_writer": "SimpleITKIO",
 "transpose_forward": [0, 1, 2], "transpose_backward": [0, 1, 2],
 "channels": [{"index": 0, "name": "CT", "normalization": "NoNormalization", "use_mask_for_norm": false}],
 "resampling": {"resampling_fn_data": {"fn": "resample_data_or_seg_to_shape",
   "kwargs": {"order": 3, "order_z": 0, "force_separate_z": null}},
  "resampling_fn_probabilities": {"fn": "resample_data_or_seg_to_shape",
   "kwargs": {"order": 1, "order_z": 0, "force_separate_z": null}}},
 "mirroring_axes": [0, 1, 2], "tile_step_size": 0.5, "sigma_scale": 0.125,
 "file_ending": ".nii.gz", "has_regions": false, "num_segmentation_heads": 4%s}
"""


def nnunet_dir(name, extra="", net="quant4.onnx", card=None):
    """An nnU-Net model directory as swi convert makes it: the quant4 network as fold 0."""
    os.makedirs(name)
    shutil.copy(net, os.path.join(name, "fold_0.onnx"))
    with open(os.path.join(name, "nnunet.json"), "w") as f:
        f.write((card or CARD) % extra)
    return name


def need_jansson():
    r = run("plan", "--model", nnunet_dir("probe"), "--input", "v.nii.gz")
    if "without jansson" in r.stderr:
        skip("swi built without jansson")
    check(r.returncode == 0, "a good nnU-Net directory plans: " + r.stderr)


if case == "fifo_nnunet_card":
    need_jansson()
    nnunet_dir("m")
    os.remove("m/nnunet.json")
    os.mkfifo("m/nnunet.json")
    for args in (["segment", "-q", "--model", "m", "--input", "v.nii.gz", "--output", "l.nii.gz"],
                 ["plan", "--model", "m", "--input", "v.nii.gz"],
                 ["plan", "--model", "m/nnunet.json", "--input", "v.nii.gz"]):
        r = run(*args, timeout=20)
        refused(r, " ".join(args[:3]), "m/nnunet.json: is a FIFO (named pipe), not a regular file")
        check(r.seconds < 10, "refused at once (%.1f s)" % r.seconds)
    check(not os.path.exists("l.nii.gz"), "nothing written")
    nnunet_dir("f")
    os.remove("f/fold_0.onnx")
    os.mkfifo("f/fold_0.onnx")
    r = run("segment", "-q", "--model", "f", "--input", "v.nii.gz", "--output", "l.nii.gz", timeout=20)
    refused(r, "a FIFO as a fold's model", "f/fold_0.onnx: is a FIFO (named pipe)", "fold 0's model")
    if "export: yes" in version:  # the card swi export embeds
        os.mkfifo("card.json")
        r = run("export", "--model", "quant4.onnx", "--output", "p.onnx", "--size", "20,24,16", "--card",
                "card.json", timeout=20)
        refused(r, "a FIFO as swi export's --card", "--card card.json: is a FIFO (named pipe)")

if case == "json_bounds":
    need_jansson()
    deep = "[" * 100 + "]" * 100
    # the card beside an ONNX model
    shutil.copy("quant4.onnx", "c.onnx")
    with open("c.json", "w") as f:
        f.write('{"roi": %s}' % deep)
    r = run("plan", "--model", "c.onnx", "--input", "v.nii.gz")
    refused(r, "a card nested 101 deep", "c.json: the JSON nests 101 levels deep, more than the 64")
    with open("c.json", "w") as f:
        f.write('{"roi": [8, 8, 8]' + " " * (2 << 20) + "}")
    r = run("plan", "--model", "c.onnx", "--input", "v.nii.gz")
    refused(r, "a 2 MB card", "c.json: the model card is 2.00 MiB, more than the 1.00 MiB swi reads")
    if "export: yes" in version:
        with open("e.json", "w") as f:
            f.write('{"roi": %s}' % deep)
        r = run("export", "--model", "quant4.onnx", "--output", "p.onnx", "--size", "20,24,16", "--card", "e.json")
        refused(r, "swi export's --card nested 101 deep", "--card e.json: the JSON nests 101 levels deep")
    # an nnU-Net card: nested, large (a valid card padded with 2 MB of blanks), deep within a string
    nnunet_dir("d", ', "x": %s' % deep)
    r = run("plan", "--model", "d", "--input", "v.nii.gz")
    refused(r, "an nnU-Net card nested 101 deep", "d/nnunet.json: the JSON nests 101 levels deep")
    nnunet_dir("b", " " * (2 << 20))
    r = run("plan", "--model", "b", "--input", "v.nii.gz")
    refused(r, "a 2 MB nnU-Net card", "b/nnunet.json: the nnU-Net card is 2.00 MiB, more than the 1.00 MiB")
    nnunet_dir("s", ', "x": "%s"' % deep)
    r = run("plan", "--model", "s", "--input", "v.nii.gz")
    check(r.returncode == 0, "brackets inside a string do not nest: " + r.stderr)
    # Zarr metadata
    if "Zarr" in version and "Zarr: no" not in version:
        os.makedirs("z.zarr")
        with open("z.zarr/.zarray", "w") as f:
            f.write('{"zarr_format": 2, "shape": [8, 8, 8], "chunks": [8, 8, 8], "dtype": "<f4", '
                    '"compressor": null, "fill_value": 0, "order": "C", "filters": null, "x": %s}' % deep)
        r = run("plan", "--model", "quant4.onnx", "--input", "z.zarr")
        refused(r, "a .zarray nested 101 deep", ".zarray: the array metadata nests 101 levels deep")

if case == "nnunet_budget":
    need_jansson()
    nnunet_dir("m")
    # 6 KB on disk: 16^3 voxels of 40 mm, which the 1 mm model resamples to 640^3 (1000 MiB a channel)
    nib.save(nib.Nifti1Image(np.ones((16, 16, 16), np.float32), np.diag([40.0, 40.0, 40.0, 1.0])), "coarse.nii.gz")
    want = ("coarse.nii.gz: its model grid is 640 x 640 x 640 voxels (16 x 16 x 16 at 40 x 40 x 40 mm resampled "
            "to 1 x 1 x 1 mm), which holds 1000 MiB before the engine runs")
    for cmd in (["segment", "-q", "--output", "l.nii.gz"], ["plan"]):
        r = run(*cmd, "--model", "m", "--input", "coarse.nii.gz", "--max-memory", "200M")
        refused(r, "%s under --max-memory 200M" % cmd[0], want, "more than --max-memory 200 MiB")
        check(r.rss_mb < 150, "%s: refused before the grid is made (peak RSS %.0f MB)" % (cmd[0], r.rss_mb))
        check(r.seconds < 10, "%s: refused at once (%.1f s)" % (cmd[0], r.seconds))
        r = run(*cmd, "--model", "m", "--input", "coarse.nii.gz", env={"SWI_AVAILABLE_MEMORY": "300M"})
        refused(r, "%s with 300 MB available" % cmd[0], want, "and 300 MiB is available (SWI_AVAILABLE_MEMORY)")
        check(r.rss_mb < 150, "%s: refused before the grid is made (peak RSS %.0f MB)" % (cmd[0], r.rss_mb))
    check(not os.path.exists("l.nii.gz"), "nothing written")
    # the engine's own budget refusals name the input too
    r = run("plan", "--model", "m", "--input", "v.nii.gz", "--max-memory", "1M")
    refused(r, "the engine's smallest plan", "v.nii.gz: --max-memory is too small: 1.00 MiB is below the smallest")
    r = run("plan", "--model", "m", "--input", "v.nii.gz", env={"SWI_AVAILABLE_MEMORY": "1M"})
    check(r.returncode == 0 and "does not fit: v.nii.gz: the run needs at least" in r.stdout,
          "the plan's unfit line names the input: " + r.stdout + r.stderr)
    r = run("segment", "-q", "--model", "m", "--input", "v.nii.gz", "--output", "l.nii.gz",
            env={"SWI_AVAILABLE_MEMORY": "1M"})
    refused(r, "more than is available", "v.nii.gz: the run needs at least")
    r = run("segment", "-q", "--model", "m", "--input", "v.nii.gz", "--output", "l.nii.gz")
    check(r.returncode == 0 and os.path.exists("l.nii.gz"), "a run that fits runs: " + r.stderr)

if case == "nnunet_channels":
    need_jansson()
    two = CARD.replace('"channels": [{"index": 0, "name": "CT", "normalization": "NoNormalization", '
                       '"use_mask_for_norm": false}]',
                       '"channels": [{"index": 0, "name": "T1", "normalization": "NoNormalization", '
                       '"use_mask_for_norm": false}, {"index": 1, "name": "T2", "normalization": '
                       '"NoNormalization", "use_mask_for_norm": false}]')
    nnunet_dir("m2", net="quant4_c2.onnx", card=two)
    moved = np.eye(4)
    moved[0, 3] = 100
    nib.save(nib.Nifti1Image(clitest.volume(seed=1), moved), "moved.nii.gz")
    nib.save(nib.Nifti1Image(clitest.volume(seed=1), np.eye(4)), "same.nii.gz")
    for cmd in (["segment", "-q", "--output", "l.nii.gz"], ["plan"]):
        r = run(*cmd, "--model", "m2", "--input", "v.nii.gz", "--input", "moved.nii.gz")
        refused(r, "%s: channels on two grids" % cmd[0],
                "moved.nii.gz: origin (100, 0, 0) mm lies 100 mm from v.nii.gz's (0, 0, 0); channels must share")
    r = run("segment", "-q", "--output", "l.nii.gz", "--model", "m2", "--input", "v.nii.gz", "--input", "same.nii.gz")
    check(r.returncode == 0 and os.path.exists("l.nii.gz"), "channels on one grid run: " + r.stderr)

if case == "plan_huge_zarr":
    if "Zarr" not in version or "Zarr: no" in version:
        skip("swi built without Zarr")
    times = {}
    for n in (256, 4096):
        os.makedirs("z%d.zarr" % n)
        with open("z%d.zarr/.zarray" % n, "w") as f:
            f.write('{"zarr_format": 2, "shape": [%d, %d, %d], "chunks": [64, 64, 64], "dtype": "<f4", '
                    '"compressor": null, "fill_value": 0, "order": "C", "filters": null}' % (n, n, n))
        # roi 8: 4096^3 is 1365^3 windows; reading (or counting) each one took minutes at 2048^3
        r = run("plan", "--model", "quant4.onnx", "--input", "z%d.zarr" % n, timeout=120)
        check(r.returncode == 0 and "input                  0 B" in r.stdout,
              "%d^3: planned, the store not held in memory: %s" % (n, r.stdout[-400:] + r.stderr))
        check(r.rss_mb < 400, "%d^3: peak RSS %.0f MB" % (n, r.rss_mb))
        times[n] = r.seconds
    # generous: the plan takes ~2 s here; a plan that visits every window takes hours
    check(times[4096] < 30, "4096^3 planned in %.1f s (256^3: %.1f s)" % (times[4096], times[256]))

print("%s: %d checks, %d failed" % (case, checks, len(failures)))
sys.exit(1 if failures else 0)
