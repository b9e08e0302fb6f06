#!/usr/bin/env python3
"""cli_guard_*: what swi must never do to a user's files, and where it must never hang.

usage: guard.py --list | CASE SWI WORKDIR
Exit 0 passed, 1 failed, 77 skipped (a Python module or a feature of swi missing).

Outputs against inputs: an output that is, contains or lies inside an input, the model, an
ensemble member, the card or another output, under any name or link, is refused before
anything runs, --force or not, naming both; the inputs stay byte for byte as they were.
Special files: a FIFO as a volume, a NRRD or MetaImage data file, a card or a model is
refused at once (a reader opening it would block forever); a MetaImage data file that is a
directory is refused. Signals: one SIGTERM ends a run while it reads a large volume, or
while a DICOM library is stuck in the reader's child (ended with it), with exit 143 and
nothing left; a forced stop during a --force store rewrite removes the hidden replacement. The card's label side files are named OUT.label.txt / OUT.ctbl;
they belong to their output: a rerun to another format or name replaces the side files swi
wrote, without --force, while a side file that is not swi's is refused without --force.
"""
import gzip
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
import zlib

CASES = [
    "out_level_image", "out_inside_store", "out_contains_input", "out_h5_dataset", "out_labels_in_image",
    "out_ensemble_member", "out_card", "out_folder_link", "out_bench", "out_optimize",
    "fifo_nifti", "fifo_nrrd_data", "fifo_nrrd_series", "fifo_meta_data", "meta_data_dir", "fifo_card",
    "fifo_model", "signal_reading", "signal_library_read", "signal_dicom_stuck", "signal_forced_store", "side_names",
    "side_rerun",
]
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
HANG = 20  # seconds: a would-be hang


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def skip(why):
    print("skipped:", why)
    sys.exit(77)


def run(*args, timeout=HANG):
    try:
        return subprocess.run([swi, *args], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:  # subprocess.run has killed it
        return subprocess.CompletedProcess(args, -999, "", "timed out after %d s (a hang)" % timeout)


def tree_sum(path):
    """Names, kinds and contents of everything under path (links not followed)."""
    h = hashlib.sha1()
    if not os.path.lexists(path):
        return None
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for n in sorted(files) + sorted(dirs):
            p = os.path.join(root, n)
            h.update(p.encode())
            if os.path.islink(p):
                h.update(os.readlink(p).encode())
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    if os.path.isfile(path):
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


version = run("--version").stdout
if "ONNX Runtime: not built in" in version:
    skip("swi built without ONNX Runtime")
clitest.make_models(".")
vol = clitest.volume()
nib.save(nib.Nifti1Image(vol, clitest.AFFINE), "v.nii.gz")
SEG = ["segment", "-q", "--model", "quant4.onnx"]


def need_zarr():
    try:
        import zarr
        return zarr
    except ImportError:
        skip("python3-zarr missing")


def refused(args, pattern, guard, what):
    """With and without --force: exit 1, one line matching pattern, guard unchanged."""
    before = {p: tree_sum(p) for p in guard}
    for force in ([], ["--force"]):
        r = run(*args, *force)
        check(r.returncode == 1, "%s %s: exit %d, expected 1: %s" % (what, force, r.returncode, r.stderr))
        check(len(r.stderr.strip().splitlines()) == 1 and pattern in r.stderr,
              "%s %s: one line with %r: %s" % (what, force, pattern, r.stderr))
        for p in guard:
            check(tree_sum(p) == before[p], "%s %s: %s changed" % (what, force, p))


def make_ome(name, v):
    zarr = need_zarr()
    g = zarr.open_group(name, mode="w")
    g.create_dataset("0", data=v[None], chunks=(1, 8, 8, 8))
    g.attrs["multiscales"] = [{"version": "0.4", "axes": [{"name": "c", "type": "channel"}] +
                               [{"name": a, "type": "space"} for a in "zyx"], "datasets": [{"path": "0"}]}]


def make_zarr(name, v):
    zarr = need_zarr()
    zarr.open(name, mode="w", shape=v.shape, chunks=(8, 8, 8), dtype="<f4")[...] = v


def mkfifo(p):
    os.mkfifo(p)
    return p


def fifo_refused(args, name, what):
    t0 = time.time()
    r = run(*args)
    check(r.returncode == 1, "%s: exit %d, expected 1 (%.1f s): %s" % (what, r.returncode, time.time() - t0,
                                                                          r.stderr))
    check(len(r.stderr.strip().splitlines()) == 1 and name in r.stderr and "FIFO" in r.stderr,
          "%s: one line naming %s as a FIFO: %s" % (what, name, r.stderr))
    check(not [f for f in os.listdir("o")], "%s: nothing written: %s" % (what, os.listdir("o")))


def signal_while_reading(name, what):
    """SIGTERM, then SIGINT, just after the run starts reading name: exit 143 / 130 within
    1.5 s, saying so, nothing left."""
    for sig, want in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
        shutil.rmtree("o")
        os.makedirs("o")
        p = subprocess.Popen([swi, "segment", "-q", "--model", "quant4_dyn.onnx", "--roi", "64", "--input", name,
                              "--output", "o/l.nii.gz", "--threads", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        t0 = time.time()
        while not os.listdir("o") and p.poll() is None and time.time() - t0 < HANG:
            time.sleep(0.005)  # the temporary appears just before the volume is read
        time.sleep(0.1)
        sent = time.time()
        p.send_signal(sig)
        try:
            _, err = p.communicate(timeout=HANG)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        took = time.time() - sent
        at = "%s while reading %s" % (sig.name, what)
        check(p.returncode == want, "%s: exit %s, expected %d: %s" % (at, p.returncode, want, err))
        check(took < 1.5, "%s: stopped after %.2f s (within 1.5 s wanted)" % (at, took))
        check("interrupted" in err and sig.name in err, "%s: says so: %s" % (at, err))
        check(not os.listdir("o"), "%s: nothing left: %s" % (at, os.listdir("o")))
        print("%s: exit %s after %.2f s" % (at, p.returncode, took))


os.makedirs("o")

if case == "out_level_image":
    # the image whose level 0 is the input, as the output: its level would be replaced
    make_ome("img.ome.zarr", vol)
    refused([*SEG, "--input", "img.ome.zarr/0", "--output", "img.ome.zarr"],
            "--output img.ome.zarr contains --input img.ome.zarr/0", ["img.ome.zarr"], "level 0 -> its image")
    os.symlink("img.ome.zarr", "alias.ome.zarr")
    refused([*SEG, "--input", "img.ome.zarr/0", "--output", "o/x.zarr", "--scores", "alias.ome.zarr"],
            "--scores alias.ome.zarr contains --input img.ome.zarr/0", ["img.ome.zarr"], "through a link")

if case == "out_inside_store":
    make_zarr("in.zarr", vol)
    os.symlink("in.zarr", "link.zarr")
    refused([*SEG, "--input", "in.zarr", "--output", "in.zarr/new/seg.zarr"],
            "--output in.zarr/new/seg.zarr lies inside --input in.zarr", ["in.zarr"], "inside, below new folders")
    refused([*SEG, "--input", "link.zarr", "--output", "in.zarr/seg.zarr"],
            "lies inside --input link.zarr", ["in.zarr"], "inside, the input through a link")
    refused([*SEG, "--input", "in.zarr", "--output", "in.zarr/x.h5:/labels"],
            "lies inside --input in.zarr", ["in.zarr"], "an HDF5 file inside the store")
    refused([*SEG, "--input", "in.zarr", "--output", "in.zarr"], "is the same file as --input in.zarr",
            ["in.zarr"], "the store itself")
    # beside it is fine
    r = run(*SEG, "--input", "in.zarr", "--output", "in.zarr.out.zarr")
    check(r.returncode == 0, "an output beside the store: " + r.stderr)

if case == "out_contains_input":
    # a store written where a folder holds the input (or the model)
    os.makedirs("w.zarr")
    shutil.copy("v.nii.gz", "w.zarr/v.nii.gz")
    need_zarr()
    refused([*SEG, "--input", "w.zarr/v.nii.gz", "--output", "w.zarr"], "--output w.zarr contains --input",
            ["w.zarr"], "a folder holding the input")
    os.makedirs("m.zarr")
    shutil.copy("quant4.onnx", "m.zarr/m.onnx")
    refused(["segment", "-q", "--model", "m.zarr/m.onnx", "--input", "v.nii.gz", "--output", "m.zarr"],
            "--output m.zarr contains --model m.zarr/m.onnx", ["m.zarr"], "a folder holding the model")

if case == "out_h5_dataset":
    try:
        import h5py
    except ImportError:
        skip("python3-h5py missing")
    if "HDF5" in version and "HDF5: no" in version:
        skip("swi built without HDF5")
    with h5py.File("d.h5", "w") as f:
        f.create_dataset("v", data=vol, chunks=(8, 8, 8))
        f.create_dataset("keep", data=np.arange(5))
    os.symlink("d.h5", "e.h5")
    refused([*SEG, "--input", "d.h5:/v", "--output", "e.h5:/v"], "--output e.h5:/v is the same dataset as",
            ["d.h5"], "the input dataset through a linked file")
    refused([*SEG, "--input", "d.h5:/v", "--output", "o/l.zarr", "--scores", "d.h5://v/"],
            "--scores d.h5://v/ is the same dataset as --input d.h5:/v", ["d.h5"], "the dataset spelled otherwise")
    refused([*SEG, "--input", "d.h5:/v", "--output", "d.h5:/v/x"], "lies inside --input d.h5:/v", ["d.h5"],
            "below the input dataset")
    # an HDF5 output into a file that is a NIfTI input, a NIfTI output over an HDF5 input
    os.symlink("v.nii.gz", "n.h5")
    refused([*SEG, "--input", "v.nii.gz", "--output", "n.h5:/labels"], "is the same file as --input v.nii.gz",
            ["v.nii.gz"], "an HDF5 output into the NIfTI input")
    os.symlink("d.h5", "h.nii")
    refused([*SEG, "--input", "d.h5:/v", "--output", "h.nii"], "is the same file as --input d.h5:/v", ["d.h5"],
            "a NIfTI output over the HDF5 input")

if case == "out_labels_in_image":
    # the labels group of the input image belongs inside it
    make_ome("img.ome.zarr", vol)
    r = run(*SEG, "--input", "img.ome.zarr", "--output", "img.ome.zarr/labels/seg")
    check(r.returncode == 0 and os.path.isdir("img.ome.zarr/labels/seg/0"), "labels in the input image: " +
          r.stderr)
    # not inside the level array, not over the labels being read
    refused([*SEG, "--input", "img.ome.zarr/0", "--output", "img.ome.zarr/0/labels/seg"], "lies inside",
            ["img.ome.zarr"], "labels inside the level array")
    refused([*SEG, "--input", "img.ome.zarr/labels/seg/0", "--output", "img.ome.zarr/labels/seg"], "contains",
            ["img.ome.zarr"], "labels over the labels read")

if case == "out_ensemble_member":
    shutil.copy("quant4.onnx", "fold1.nii")  # ONNX Runtime reads the model by content
    refused(["segment", "-q", "--model", "quant4.onnx", "--model", "fold1.nii", "--input", "v.nii.gz", "--output",
             "fold1.nii"], "--output fold1.nii is the same file as --model fold1.nii", ["fold1.nii"],
            "the second --model")
    os.symlink("fold1.nii", "link.nii.gz")
    refused(["segment", "-q", "--model", "quant4.onnx", "--model", "fold1.nii", "--input", "v.nii.gz", "--output",
             "o/l.nii.gz", "--scores", "link.nii.gz"], "--scores link.nii.gz is the same file as --model fold1.nii",
            ["fold1.nii"], "a member through a link")
    shutil.copy("quant4.onnx", "m.onnx")
    with open("m.json", "w") as f:
        f.write('{"members": ["fold1.nii"]}')
    r = run("info", "--model", "m.onnx")
    if r.returncode != 0 or "fold1.nii" not in r.stdout:
        skip("swi built without model cards (jansson): " + r.stderr)
    refused(["segment", "-q", "--model", "m.onnx", "--input", "v.nii.gz", "--output", "fold1.nii"],
            "--output fold1.nii is the same file as the card's ensemble member", ["fold1.nii", "m.onnx", "m.json"],
            "a member named by the card")

if case == "out_card":
    shutil.copy("quant4.onnx", "m.onnx")
    with open("m.json", "w") as f:
        f.write('{"overlap": 0.5}')
    r = run("info", "--model", "m.onnx")
    if r.returncode != 0 or "overlap" not in r.stdout:
        skip("swi built without model cards (jansson): " + r.stderr)
    os.symlink("m.json", "c.nii")
    refused(["segment", "-q", "--model", "m.onnx", "--input", "v.nii.gz", "--output", "c.nii"],
            "--output c.nii is the same file as the model card m.json", ["m.json"], "the card through a link")

if case == "out_folder_link":
    # folder mode: a case's output that is (a link to) its input, or to the model
    os.makedirs("in")
    shutil.copy("v.nii.gz", "in/a.nii.gz")
    shutil.copy("v.nii.gz", "in/b.nii.gz")
    os.makedirs("out")
    os.symlink("../in/a.nii.gz", "out/a.nii.gz")
    before = tree_sum("in")
    r = run(*SEG, "--input-dir", "in", "--output-dir", "out", "--force")
    check(r.returncode == 1 and "is the same file as --input" in r.stderr and "a.nii.gz" in r.stderr,
          "folder mode: the linked case refused: " + r.stderr)
    check(tree_sum("in") == before, "folder mode: the input folder changed")
    check(os.path.isfile("out/b.nii.gz"), "folder mode: the other case done: " + r.stderr)

if case == "out_bench":
    make_zarr("in.zarr", vol)
    make_ome("img.ome.zarr", vol)
    common = ["bench", "--classes", "4", "--roi", "8", "--no-floor"]
    for inp, out, pat in [("in.zarr", "in.zarr/new/x.zarr", "lies inside --input in.zarr"),
                          ("img.ome.zarr/0", "img.ome.zarr", "contains --input img.ome.zarr/0")]:
        before = tree_sum(inp.split("/")[0])
        for force in ([], ["--force"]):
            r = run(*common, "--input", inp, "--output-file", out, *force)
            check(r.returncode == 1 and pat in r.stderr, "bench %s -> %s %s: %s" % (inp, out, force, r.stderr))
            check(tree_sum(inp.split("/")[0]) == before, "bench %s -> %s %s: the input changed" % (inp, out, force))

if case == "out_optimize":
    shutil.copy("quant4.onnx", "m.onnx")
    os.symlink("m.onnx", "link.onnx")
    os.link("m.onnx", "hard.onnx")
    for out in ("link.onnx", "hard.onnx", "./m.onnx"):
        refused(["optimize", "-q", "--model", "m.onnx", "--output", out], "is the same file as --model m.onnx",
                ["m.onnx"], "optimize --output " + out)

if case == "fifo_nifti":
    fifo_refused([*SEG, "--input", mkfifo("f.nii.gz"), "--output", "o/l.nii.gz"], "f.nii.gz", ".nii.gz FIFO")
    fifo_refused([*SEG, "--input", mkfifo("f.nii"), "--output", "o/l.nii.gz"], "f.nii", ".nii FIFO")
    os.symlink("f.nii.gz", "link.nii.gz")
    fifo_refused([*SEG, "--input", "link.nii.gz", "--output", "o/l.nii.gz"], "link.nii.gz", "a link to a FIFO")
    fifo_refused(["plan", "--model", "quant4.onnx", "--input", "f.nii.gz"], "f.nii.gz", "swi plan on a FIFO")

HDR = "NRRD0004\ntype: float\ndimension: 3\nsizes: 16 24 20\nencoding: %s\nendian: little\ndata file: %s\n\n"


def need_itk():
    r = run(*SEG, "--input", "none.nrrd", "--output", "o/x.nii.gz")
    if "without" in r.stderr and ("ITK" in r.stderr or "NRRD" in r.stderr):
        skip("swi built without ITK")


if case == "fifo_nrrd_data":
    need_itk()
    mkfifo("raw.fifo")
    for enc in ("raw", "gzip"):
        with open("d_%s.nhdr" % enc, "w") as f:
            f.write(HDR % (enc, "raw.fifo"))
        fifo_refused([*SEG, "--input", "d_%s.nhdr" % enc, "--output", "o/l.nii.gz"], "raw.fifo",
                     "NRRD %s data file FIFO" % enc)
    os.makedirs("sub")
    with open("sub/h.nhdr", "w") as f:
        f.write(HDR % ("raw", "../raw.fifo"))
    fifo_refused([*SEG, "--input", "sub/h.nhdr", "--output", "o/l.nii.gz"], "raw.fifo",
                 "a data file relative to the header's folder")
    with open("list.nhdr", "w") as f:
        f.write("NRRD0004\ntype: float\ndimension: 3\nsizes: 16 24 20\nencoding: raw\nendian: little\n"
                "data file: LIST 2\n" + "".join("s%02d.raw\n" % k for k in range(20)))
    for k in range(20):
        if k != 7:
            with open("s%02d.raw" % k, "wb") as f:
                f.write(vol[k].astype("<f4").tobytes())
    mkfifo("s07.raw")
    fifo_refused([*SEG, "--input", "list.nhdr", "--output", "o/l.nii.gz"], "s07.raw", "a LIST entry FIFO")
    # the screen takes a name as teem does: the whole value, blanks included
    with open("my data.raw", "wb") as f:
        f.write(vol.astype("<f4").tobytes())
    with open("blank.nhdr", "w") as f:
        f.write(HDR % ("raw", "my data.raw"))
    r = run(*SEG, "--input", "blank.nhdr", "--output", "o/b.nii.gz")
    check(r.returncode == 0 and os.path.isfile("o/b.nii.gz"), "a data file name with a blank is read: " + r.stderr)

if case == "fifo_nrrd_series":
    need_itk()
    with open("s.nhdr", "w") as f:
        f.write(HDR.replace("data file: %s\n", "data file: p%%02d.raw 0 19 1 2\n") % "raw")
    for k in range(20):
        if k != 11:
            with open("p%02d.raw" % k, "wb") as f:
                f.write(vol[k].astype("<f4").tobytes())
    mkfifo("p11.raw")
    fifo_refused([*SEG, "--input", "s.nhdr", "--output", "o/l.nii.gz"], "p11.raw", "a numbered series FIFO")

MHD = ("ObjectType = Image\nNDims = 3\nDimSize = 16 24 20\nElementType = MET_FLOAT\n%s"
       "ElementDataFile = %s\n")

if case == "fifo_meta_data":
    need_itk()
    mkfifo("raw.fifo")
    with open("c.mhd", "w") as f:
        f.write(MHD % ("CompressedData = True\nCompressedDataSize = 1000\n", "raw.fifo"))
    fifo_refused([*SEG, "--input", "c.mhd", "--output", "o/l.nii.gz"], "raw.fifo", "compressed MetaImage FIFO")
    with open("u.mhd", "w") as f:
        f.write(MHD % ("", "raw.fifo"))
    fifo_refused([*SEG, "--input", "u.mhd", "--output", "o/l.nii.gz"], "raw.fifo", "raw MetaImage FIFO")
    # a numbered series and a file LIST with a FIFO among their files
    for k in range(20):
        if k != 5:
            with open("m%02d.raw" % k, "wb") as f:
                f.write(vol[k].astype("<f4").tobytes())
    mkfifo("m05.raw")
    with open("s.mhd", "w") as f:
        f.write(MHD % ("", "m%02d.raw 0 19 1"))
    fifo_refused([*SEG, "--input", "s.mhd", "--output", "o/l.nii.gz"], "m05.raw", "a numbered series FIFO")
    with open("l.mhd", "w") as f:
        f.write(MHD % ("", "LIST 2D") + "".join("m%02d.raw\n" % k for k in range(20)))
    fifo_refused([*SEG, "--input", "l.mhd", "--output", "o/l.nii.gz"], "m05.raw", "a file LIST FIFO")

if case == "meta_data_dir":
    # a directory as the data file would leave the voxels unread (uninitialised memory)
    need_itk()
    os.makedirs("data.raw")
    for extra in ("", "CompressedData = True\nCompressedDataSize = 100\n"):
        with open("d.mhd", "w") as f:
            f.write(MHD.replace("16 24 20", "2 2 2") % (extra, "data.raw"))
        r = run(*SEG, "--input", "d.mhd", "--output", "o/l.nii.gz", "--roi", "8")
        check(r.returncode == 1 and "data.raw" in r.stderr and "directory" in r.stderr,
              "a directory as the data file (%s): %s" % (extra.strip() or "raw", r.stderr))
        check(not os.listdir("o"), "nothing written")

if case == "fifo_card":
    shutil.copy("quant4.onnx", "m.onnx")
    mkfifo("m.json")
    fifo_refused(["segment", "-q", "--model", "m.onnx", "--input", "v.nii.gz", "--output", "o/l.nii.gz"],
                 "m.json", "a FIFO as the card")
    fifo_refused(["info", "--model", "m.onnx"], "m.json", "swi info with a FIFO card")

if case == "fifo_model":
    mkfifo("m.onnx")
    fifo_refused(["segment", "-q", "--model", "m.onnx", "--no-card", "--input", "v.nii.gz", "--output",
                  "o/l.nii.gz"], "m.onnx", "a FIFO as the model")
    fifo_refused(["segment", "-q", "--model", "m.onnx", "--input", "v.nii.gz", "--output", "o/l.nii.gz"],
                 "m.onnx", "a FIFO as the model (its card looked for)")
    fifo_refused(["segment", "-q", "--model", "quant4.onnx", "--model", "m.onnx", "--input", "v.nii.gz",
                  "--output", "o/l.nii.gz"], "m.onnx", "a FIFO as an ensemble member")

if case == "signal_reading":
    # A 384 MB float64 volume as 48 gzip members (as swi writes them), made cheaply: one
    # member repeated. Reading it takes seconds; one SIGTERM while it is read ends the run.
    shape, members = (768, 256, 256), 48
    hdr = nib.Nifti1Image(np.zeros((1, 1, 1), np.float64), clitest.AFFINE).header.copy()
    hdr.set_data_shape(shape)
    hdr.set_data_dtype(np.float64)
    hdr["vox_offset"] = 352
    head = hdr.binaryblock + b"\0" * 4
    # bytes from 64 values: Huffman-coded literals, slow to inflate (finite doubles: the
    # top byte of each stays below 0x40)
    block = np.random.default_rng(1).integers(0, 64, shape[0] * shape[1] * shape[2] // members * 8, np.uint8)
    member = gzip.compress(block.tobytes(), compresslevel=1)
    with open("big.nii.gz", "wb") as f:
        f.write(gzip.compress(head, compresslevel=1))
        for _ in range(members):
            f.write(member)
    signal_while_reading("big.nii.gz", "a .nii.gz")
    os.remove("big.nii.gz")

if case == "signal_library_read":
    # A 256 MB gzip NRRD: teem inflates it in one call that swi cannot interrupt; the signal
    # thread ends the run when it does not stop by itself.
    need_itk()
    shape, members = (512, 512, 256), 16
    block = np.random.default_rng(1).integers(0, 64, shape[0] * shape[1] * shape[2] * 4 // members, np.uint8)
    member = gzip.compress(block.tobytes(), compresslevel=1)
    with open("big.raw.gz", "wb") as f:
        for _ in range(members):
            f.write(member)
    with open("big.nhdr", "w") as f:
        f.write("NRRD0004\ntype: float\ndimension: 3\nsizes: %d %d %d\nencoding: gzip\nendian: little\n"
                "data file: big.raw.gz\n\n" % shape[::-1])
    signal_while_reading("big.nhdr", "a gzip NRRD (inside teem)")
    os.remove("big.raw.gz")

if case == "signal_dicom_stuck":
    # The DICOM reader (a child process) stuck for good in a library reading a slice's header
    # (a stand-in preloaded, from io/tests/dicom_files.py): one SIGTERM ends the run with 143
    # within 2 s, the reader ended with it, nothing written.
    need_itk()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "io", "tests"))
    try:
        import dicom_files
        import pydicom  # noqa: F401
    except ImportError as e:
        skip("%s (apt-get install python3-pydicom)" % e)
    src = dicom_files.test_files()
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not src or not cc:
        skip("pydicom's test files or a C compiler missing")
    with open("stuck.c", "w") as f:
        f.write(dicom_files.ABORT_SO)
    if subprocess.run([cc, "-shared", "-fPIC", "-o", "stuck.so", "stuck.c", "-ldl"]).returncode != 0:
        skip("the stand-in library did not build")
    d = dicom_files.make_series(".", "series", os.path.join(src, "CT_small.dcm"))
    os.rename(os.path.join(d, "s02.dcm"), os.path.join(d, "s02_HANG_HERE.dcm"))
    env = dict(os.environ, LD_PRELOAD=os.path.abspath("stuck.so"),
               ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
    env.pop("SWI_DICOM_STALL_SECONDS", None)  # the default (60 s): only the signal ends it here

    def children(pid):  # of every thread
        out = []
        try:
            for t in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                    out += [int(x) for x in f.read().split()]
        except OSError:
            pass
        return out

    def alive(pid):  # a zombie is not a reader left behind
        try:
            with open("/proc/%d/stat" % pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    for sig, want in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
        shutil.rmtree("o")
        os.makedirs("o")
        p = subprocess.Popen([swi, "segment", "-q", "--model", "quant4_dyn.onnx", "--roi", "64", "--input", d,
                              "--output", "o/l.nii.gz", "--threads", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        t0, reader = time.time(), []
        while not reader and p.poll() is None and time.time() - t0 < HANG:
            time.sleep(0.01)
            reader = children(p.pid)
        time.sleep(1.0)  # the reader is past the first two slices and stuck on the third
        sent = time.time()
        p.send_signal(sig)
        try:
            _, err = p.communicate(timeout=HANG)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        took = time.time() - sent
        at = "%s while the DICOM reader is stuck" % sig.name
        check(reader, "%s: the reader started (a child of swi): %s" % (at, err))
        check(p.returncode == want, "%s: exit %s, expected %d: %s" % (at, p.returncode, want, err))
        check(took < 2, "%s: stopped after %.2f s (within 2 s wanted)" % (at, took))
        time.sleep(0.2)
        left = [c for c in reader if alive(c)]
        check(not left, "%s: no reader left behind: %s" % (at, left))
        for c in left:
            os.kill(c, signal.SIGKILL)
        check(not os.listdir("o"), "%s: nothing written: %s" % (at, os.listdir("o")))
        print("%s: exit %s after %.2f s" % (at, p.returncode, took))

if case == "signal_forced_store":
    # A --force rewrite of a Zarr store and of an HDF5 dataset, stopped by SIGTERM while teem
    # inflates a 256 MB gzip NRRD input in one call (no cancellation point): the signal
    # thread's forced stop removes the writer's hidden replacement (.l.zarr.swi-new-*, the
    # HDF5 copy's .l.h5.swi-* folder) and the old output is as it was.
    need_itk()
    need_zarr()
    shape, members = (512, 512, 256), 16
    block = np.random.default_rng(1).integers(0, 64, shape[0] * shape[1] * shape[2] * 4 // members, np.uint8)
    member = gzip.compress(block.tobytes(), compresslevel=1)
    with open("big.raw.gz", "wb") as f:
        for _ in range(members):
            f.write(member)
    with open("big.nhdr", "w") as f:
        f.write("NRRD0004\ntype: float\ndimension: 3\nsizes: %d %d %d\nencoding: gzip\nendian: little\n"
                "data file: big.raw.gz\n\n" % shape[::-1])
    for out, leaf in (("l.zarr", "l.zarr"), ("l.h5:/labels", "l.h5")):
        r = run(*SEG, "--input", "v.nii.gz", "--output", out)
        if r.returncode != 0 and "without" in r.stderr:
            print("note: %s not built in: %s" % (out, r.stderr.strip()))
            continue
        check(r.returncode == 0, "%s: the output to rewrite: %s" % (out, r.stderr))
        before = tree_sum(leaf)
        p = subprocess.Popen([swi, "segment", "-q", "--model", "quant4_dyn.onnx", "--roi", "64", "--input", "big.nhdr",
                              "--output", out, "--force", "--threads", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        hidden = lambda: [f for f in os.listdir(".") if f.startswith("." + leaf + ".swi-")]  # noqa: E731
        def reading(pid):  # teem has the gzip data file open: the one call with no cancellation point
            try:
                return any(os.readlink("/proc/%d/fd/%s" % (pid, fd)).endswith("big.raw.gz")
                           for fd in os.listdir("/proc/%d/fd" % pid))
            except OSError:
                return False

        # The hidden replacement can appear before the input is read (a loaded machine may still
        # be opening the model then, where the signal is honoured at once): wait for teem itself.
        t0, seen, inside = time.time(), [], False
        while not (seen and inside) and p.poll() is None and time.time() - t0 < HANG:
            time.sleep(0.005)
            seen = seen or hidden()
            inside = inside or reading(p.pid)
        time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        try:
            _, err = p.communicate(timeout=HANG)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        at = "SIGTERM during a --force rewrite of %s, inside teem" % out
        check(seen, "%s: the writer's hidden replacement appeared: %s" % (at, err))
        check(inside, "%s: the signal came while teem read the input: %s" % (at, err))
        check(p.returncode == 143 and "did not stop by itself" in err,
              "%s: exit %s, expected 143 through the forced stop: %s" % (at, p.returncode, err))
        check(not hidden(), "%s: nothing left beside it: %s" % (at, hidden()))
        check(tree_sum(leaf) == before, "%s: the old output as it was" % at)
        print("%s: exit %s, left %s" % (at, p.returncode, hidden()))
    os.remove("big.raw.gz")

if case == "side_names":
    shutil.copy("quant4.onnx", "m.onnx")
    with open("m.json", "w") as f:
        f.write('{"classes": ["background", "a", "b", "c"]}')
    r = run("info", "--model", "m.onnx")
    if r.returncode != 0 or "class" not in r.stdout:
        skip("swi built without model cards (jansson): " + r.stderr)
    outs = {"seg.nii.gz": "seg", "seg.nii": "seg", "seg.nrrd": "seg", "seg.mha": "seg", "x.y.nrrd": "x.y"}
    for out, stem in outs.items():
        if out.endswith((".nrrd", ".mha")):
            probe = run("segment", "-q", "--model", "quant4.onnx", "--input", "v.nii.gz", "--output", "o/p_" + out)
            if probe.returncode != 0:
                continue  # built without ITK
        shutil.rmtree("o")
        os.makedirs("o")
        r = run("segment", "-q", "--model", "m.onnx", "--input", "v.nii.gz", "--output", "o/" + out)
        want = sorted([out, stem + ".label.txt", stem + ".ctbl"])
        check(r.returncode == 0 and sorted(os.listdir("o")) == want,
              "--output %s writes %s: %s %s" % (out, want, sorted(os.listdir("o")), r.stderr))
    # a side file that is the input is refused like any output
    shutil.rmtree("o")
    os.makedirs("o")
    os.symlink("../v.nii.gz", "o/l.ctbl")
    r = run("segment", "-q", "--model", "m.onnx", "--input", "v.nii.gz", "--output", "o/l.nii.gz", "--force")
    check(r.returncode == 1 and "the color table o/l.ctbl is the same file as --input v.nii.gz" in r.stderr,
          "a side file that is the input: " + r.stderr)

if case == "side_rerun":
    shutil.copy("quant4.onnx", "m.onnx")

    def card(*names):
        with open("m.json", "w") as f:
            f.write('{"classes": ["background", %s]}' % ", ".join('"%s"' % n for n in names))

    def read(p):
        with open(p) as f:
            return f.read()

    card("a", "b", "c")
    r = run("info", "--model", "m.onnx")
    if r.returncode != 0 or "class" not in r.stdout:
        skip("swi built without model cards (jansson): " + r.stderr)
    seg = ["segment", "-q", "--model", "m.onnx", "--input", "v.nii.gz", "--output"]
    r = run(*seg, "o/l.nii.gz")
    check(r.returncode == 0 and '"a"' in read("o/l.label.txt"), "first run: " + r.stderr)
    # the same name in another format: swi's side files are replaced with the new output
    card("liver", "kidney", "spleen")
    r = run(*seg, "o/l.nii")
    check(r.returncode == 0, "a rerun to l.nii without --force: exit %d: %s" % (r.returncode, r.stderr))
    check(sorted(os.listdir("o")) == ["l.ctbl", "l.label.txt", "l.nii", "l.nii.gz"], "files: %s" % os.listdir("o"))
    check('"liver"' in read("o/l.label.txt") and " liver " in read("o/l.ctbl"), "the side files are the rerun's")
    # the output itself is still refused without --force, its side files untouched
    card("x", "y", "z")
    r = run(*seg, "o/l.nii")
    check(r.returncode == 1 and "l.nii: already exists" in r.stderr, "an existing output: " + r.stderr)
    check('"liver"' in read("o/l.label.txt"), "a refused run changed the side file")
    # a side file that is not swi's is never overwritten without --force
    for name, mine in (("k.label.txt", "my notes\n"), ("k.ctbl", "# 3D Slicer color table\n0 bg 0 0 0 0\n")):
        for p in ("o/k.label.txt", "o/k.ctbl", "o/k.nii.gz"):
            if os.path.exists(p):
                os.remove(p)
        with open("o/" + name, "w") as f:
            f.write(mine)
        r = run(*seg, "o/k.nii.gz")
        check(r.returncode == 1 and name + ": already exists" in r.stderr, "a foreign %s: %s" % (name, r.stderr))
        check(read("o/" + name) == mine and not os.path.exists("o/k.nii.gz"), "a foreign %s: changed" % name)
        r = run(*seg, "o/k.nii.gz", "--force")
        check(r.returncode == 0 and '"x"' in read("o/k.label.txt"), "--force replaces %s: %s" % (name, r.stderr))
    # nor a link to swi's own side file
    os.remove("o/k.nii.gz")
    os.rename("o/k.label.txt", "o/mine.label.txt")
    os.symlink("mine.label.txt", "o/k.label.txt")
    r = run(*seg, "o/k.nii.gz")
    check(r.returncode == 1 and "k.label.txt: already exists" in r.stderr, "a link as side file: " + r.stderr)
    check(os.path.islink("o/k.label.txt"), "the link was replaced")

print("%s: %d checks, %d failures" % (case, checks, len(failures)))
sys.exit(1 if failures or checks == 0 else 0)
