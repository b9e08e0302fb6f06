#!/usr/bin/env python3
"""cli_stores_*: swi bench and swi segment on chunked stores, checked with zarr and h5py.

usage: stores.py CASE SWI WORKDIR    (CASE: formats, shards, h5shards, fail, launcher, segment, mpi, outputs)
Exit 0 passed, 1 failed, 77 skipped (a reader or a feature missing).
"""
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

case, swi, work = sys.argv[1], sys.argv[2], os.path.join(sys.argv[3], sys.argv[1])
try:
    import zarr
    import h5py
    import nibabel as nib
except ImportError as e:
    print("skipped: %s (apt-get install python3-zarr python3-h5py python3-nibabel)" % e)
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


def run(*args, env=None, prefix=()):
    e = dict(os.environ)
    for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run([*prefix, swi, *args], capture_output=True, text=True, env=e)


def done():
    print("%s: %d checks, %d failures" % (case, checks, len(failures)))
    sys.exit(1 if failures or checks == 0 else 0)


# A float volume with both signs, so the synthetic predictor's argmax varies (class 0 where
# x < 0, the last class where x > 0); 150 rows = 3 chunk rows of 64.
rng = np.random.default_rng(3)
shape = (150, 37, 29)
x = (rng.normal(0, 100, shape)).astype("<f4")
classes = "4"
common = ["--classes", classes, "--roi", "24,16,16", "--mode", "gaussian", "--overlap", "0.25", "--no-floor"]


def make_inputs():
    zarr.open("v.zarr", mode="w", shape=shape, chunks=(20, 16, 10), dtype=x.dtype)[...] = x
    g = zarr.open_group("v.ome.zarr", mode="w")
    g.create_dataset("0", data=x[None], chunks=(1, 32, 32, 32))
    g.attrs["multiscales"] = [{"version": "0.4", "axes": [{"name": "c", "type": "channel"}] +
                               [{"name": a, "type": "space"} for a in "zyx"], "datasets": [{"path": "0"}]}]
    with h5py.File("v.h5", "w") as f:
        f.create_dataset("grp/data", data=x.astype(">f4"), chunks=(8, 8, 8), compression="gzip")
    nib.save(nib.Nifti1Image(x, np.eye(4)), "v.nii.gz")


# A volume over two chunks (64) along the first two axes, for grids of boxes.
def make_grid_input():
    g = np.random.default_rng(4).normal(0, 100, (150, 130, 29)).astype("<f4")
    zarr.open("g.zarr", mode="w", shape=g.shape, chunks=(20, 16, 10), dtype=g.dtype)[...] = g


def grid_cases(what):
    # 2x2x1 across the first two axes, 1x3x1 along the second alone; another loop order
    return [("2x2x1", []), ("1x3x1", [])] + ([("2x2x1", ["--order", "2,0,1"])] if what == "scores" else [])


def bench(inp, out, what="argmax", *extra):
    return run("bench", "--input", inp, "--output", what, "--output-file", out, *common, *extra)


def load(name):
    if ".h5:" in name:
        f, d = name.split(":")
        with h5py.File(f, "r") as h:
            return h[d][...]
    if name.endswith(".ome.zarr"):
        return zarr.open(name, mode="r")["0"][...]
    return zarr.open(name, mode="r")[...]


def h5_attrs(name, classes=False):
    """The dataset's attributes; without `classes`, less the labels' swi_classes (kept for good)."""
    f, d = name.split(":")
    with h5py.File(f, "r") as h:
        return {k: v for k, v in h[d].attrs.items() if classes or k != "swi_classes"}


def h5_layout(name):
    f, d = name.split(":")
    with h5py.File(f, "r") as h:
        x = h[d]
        return (x.shape, x.dtype, x.chunks, x.compression, x.compression_opts, x.shuffle, x.fillvalue)


def shard_procs(inp, out, what, parts, n, *extra, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return [subprocess.Popen([swi, "bench", "--input", inp, "--output", what, "--output-file", out, *common, *extra,
                              "--shard", "%d/%d" % (i, n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=e) for i in parts]


def finish(procs):
    outs = [p.communicate(timeout=300) for p in procs]
    return all(p.returncode == 0 for p in procs), [o[1] for o in outs]


def tree(root):
    """Every file under root with its bytes: a store exactly as it was."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            with open(os.path.join(d, f), "rb") as h:
                out[os.path.relpath(os.path.join(d, f), root)] = h.read()
    return out


def mtimes(root):
    return {os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns for d, _, fs in os.walk(root) for f in fs}


def writing(root, snap):
    """Has a rewrite of root begun: a chunk in its hidden replacement, or one of its own files changed?"""
    head, leaf = os.path.split(root)
    for f in os.listdir(head or "."):
        if f.startswith("." + leaf + ".swi-new"):
            try:
                if any(c[0].isdigit() for c in os.listdir(os.path.join(head, f))):
                    return True
            except FileNotFoundError:
                pass
    try:
        return mtimes(root) != snap
    except FileNotFoundError:
        return True


def no_temporaries():
    return not [f for f in os.listdir(".") if ".tmp-" in f or ".swi-" in f]


if case == "formats":
    make_inputs()
    ref = {}
    for what in ("argmax", "scores"):
        for i, inp in enumerate(["v.nii.gz", "v.zarr", "v.ome.zarr", "v.h5:/grp/data"]):
            out = "%s_%d.zarr" % (what, i)
            r = bench(inp, out, what)
            check(r.returncode == 0, "bench %s -> %s: %s" % (inp, out, r.stderr))
            if r.returncode:
                continue
            check(not os.path.exists(out + "/.swi-incomplete"), "complete: " + out)
            got = load(out)
            if what not in ref:
                ref[what] = got
            check(np.array_equal(got, ref[what]), "%s from %s bitwise equal to NIfTI's" % (what, inp))
        # the same result into HDF5 and OME-Zarr outputs
        for out in ["%s.h5:/out/result" % what, "%s.ome.zarr" % what]:
            r = bench("v.zarr", out, what)
            check(r.returncode == 0, "bench -> %s: %s" % (out, r.stderr))
            if r.returncode == 0 and what in ref:
                check(np.array_equal(load(out), ref[what]), "%s written to %s equal" % (what, out))
    w = np.linspace(0.5, 1.5, int(classes)).astype(np.float32)
    s = ref.get("scores")
    check(s is not None and s.shape == (4,) + shape and s.dtype == np.float32, "scores [classes, D, H, W] float32")
    if s is not None:
        # the blend of equal predictions is the prediction: values in place, to rounding
        check(np.allclose(s, x[None] * w[:, None, None, None], rtol=1e-5, atol=1e-3), "scores are x * w[c]")
    lab = ref.get("argmax")
    check(lab is not None and lab.dtype == np.uint8 and np.array_equal(lab, np.where(x < 0, 0, 3)),
          "labels: class 0 where x < 0, else 3")
    a = zarr.open("argmax.ome.zarr", mode="r")
    check(a.attrs["multiscales"][0]["datasets"][0]["path"] == "0" and "image-label" in a.attrs,
          "OME-Zarr labels metadata")
    # labels inside the input's OME-Zarr image, as its labels group
    r = bench("v.ome.zarr", "v.ome.zarr/labels/synthetic", "argmax")
    g = zarr.open_group("v.ome.zarr", mode="r")
    check(r.returncode == 0 and list(g["labels"].attrs["labels"]) == ["synthetic"] and
          np.array_equal(g["labels/synthetic/0"][...], lab), "labels group in the image: " + r.stderr)
    # an existing output is refused (nothing changes), --force rewrites it
    r = bench("v.zarr", "argmax_1.zarr")
    check(r.returncode == 1 and "exists" in r.stderr, "existing output refused: " + r.stderr)
    r = bench("v.zarr", "argmax_1.zarr", "argmax", "--force")
    check(r.returncode == 0 and np.array_equal(load("argmax_1.zarr"), lab), "--force rewrites: " + r.stderr)
    r = run("bench", "--input", "nope.zarr", "--output-file", "o.zarr", *common)
    check(r.returncode == 1 and "nope.zarr" in r.stderr and not os.path.exists("o.zarr"), "missing input: " + r.stderr)
    r = run("bench", "--input", "v.zarr", "--output-file", "o.nii.gz", *common)
    check(r.returncode == 2 and "--output-file" in r.stderr, "non-store output is a usage error: " + r.stderr)
    # --predictor atlas: compact regions, half background, and scores as documented (a voxel's
    # class 2..4, every other class -3..-1.5)
    atlas = ["--shape", "96,80,64", "--classes", "6", "--roi", "32", "--no-floor", "--predictor", "atlas"]
    r = run("bench", *atlas, "--output-file", "atlas.zarr")
    r2 = run("bench", *atlas, "--output", "scores", "--output-file", "atlas_s.zarr")
    check(r.returncode == 0 and r2.returncode == 0, "bench --predictor atlas: " + r.stderr + r2.stderr)
    if r.returncode == 0 and r2.returncode == 0:
        lab, sc = load("atlas.zarr"), load("atlas_s.zarr")
        check(0.3 < np.mean(lab == 0) < 0.7 and len(np.unique(lab)) >= 5,
              "atlas: half background, most classes (%.2f, %s)" % (np.mean(lab == 0), np.unique(lab)))
        same = [np.mean(np.diff(lab.astype(int), axis=a) == 0) for a in range(3)]
        check(min(same) > 0.85, "atlas: compact regions (neighbours equal: %s)" % same)
        own = np.take_along_axis(sc, lab[None].astype(np.int64), 0)[0]
        others = np.where(np.arange(6)[:, None, None, None] == lab[None], -np.inf, sc).max(0)
        check(np.array_equal(np.argmax(sc, 0), lab) and own.min() >= 2 - 1e-4 and own.max() < 4 + 1e-4 and
              others.max() < -1.5 + 1e-4 and others.min() >= -3 - 1e-4, "atlas: scores 2..4 and -3..-1.5")
    r = run("bench", *atlas[:-1], "noise")
    check(r.returncode == 2 and "--predictor" in r.stderr, "unknown predictor refused: " + r.stderr)
    r = run("bench", "--input", "v.zarr", *common, "--predictor", "atlas")
    check(r.returncode == 2 and "--input" in r.stderr, "atlas with --input refused: " + r.stderr)
    done()

if case == "shards":
    make_inputs()
    for what in ("argmax", "scores"):
        r = bench("v.zarr", what + "_1.zarr", what)
        check(r.returncode == 0, "one process: " + r.stderr)
        ref = load(what + "_1.zarr")
        for n in (1, 2, 3):
            out = "%s_sh%d.zarr" % (what, n)
            if n == 2:  # metadata beforehand, as a job array's first step would
                r = bench("v.zarr", out, what, "--shard", "init")
                check(r.returncode == 0 and os.path.exists(out + "/.swi-incomplete"), "--shard init: " + r.stderr)
            procs = [subprocess.Popen([swi, "bench", "--input", "v.zarr", "--output", what, "--output-file", out,
                                       *common, "--shard", "%d/%d" % (i, n)], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True) for i in range(n)]
            outs = [p.communicate() for p in procs]
            check(all(p.returncode == 0 for p in procs), "%d shards: %s" % (n, [o[1] for o in outs]))
            check(not os.path.exists(out + "/.swi-incomplete"), "%d shards complete the store" % n)
            check(not [f for f in os.listdir(out) if f.startswith(".swi-part") or "tmp" in f],
                  "no part markers or temporaries left")
            check(np.array_equal(load(out), ref), "%s: %d shards bitwise equal to one process" % (what, n))
            if n == 3:
                rep = [l for o in outs for l in o[0].splitlines() if l.startswith("shard:")]
                check(len(rep) == 3 and all("duplicated" in l for l in rep), "shards report duplication: %s" % rep)
    # any loop order: the output slabs follow the engine's outermost axis
    for order in ("1,2,0", "2,0,1"):
        r = bench("v.zarr", "o%s_1.zarr" % order[0], "scores", "--order", order)
        check(r.returncode == 0, "order %s: %s" % (order, r.stderr))
        ref = load("o%s_1.zarr" % order[0])
        out = "o%s_sh3.zarr" % order[0]
        procs = [subprocess.Popen([swi, "bench", "--input", "v.zarr", "--output", "scores", "--output-file", out,
                                   *common, "--order", order, "--shard", "%d/3" % i], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for i in range(3)]
        outs = [p.communicate() for p in procs]
        check(all(p.returncode == 0 for p in procs) and np.array_equal(load(out), ref),
              "order %s: 3 shards bitwise one process: %s" % (order, [o[1] for o in outs]))
    # a shard alone leaves the store incomplete; its rerun after the others completes it
    out = "lone.zarr"
    r = bench("v.zarr", out, "argmax", "--shard", "0/2")
    check(r.returncode == 0 and os.path.exists(out + "/.swi-incomplete"), "one of two shards: still incomplete")
    r = run("bench", "--input", out, *common)
    check(r.returncode == 1 and "incomplete" in r.stderr, "an incomplete store is refused as input: " + r.stderr)
    r = bench("v.zarr", out, "argmax", "--shard", "1/2")
    check(r.returncode == 0 and not os.path.exists(out + "/.swi-incomplete") and
          np.array_equal(load(out), load("argmax_1.zarr")), "the second shard completes it")
    # shards of another geometry cannot join (an incomplete store: one of three parts written)
    r = bench("v.zarr", "mix.zarr", "argmax", "--shard", "0/3")
    check(r.returncode == 0 and os.path.exists("mix.zarr/.swi-incomplete"), "one part of three: " + r.stderr)
    before = tree("mix.zarr")
    r = run("bench", "--input", "v.zarr", "--output-file", "mix.zarr", "--classes", "300", "--roi", "16",
            "--shard", "1/3", "--no-floor")
    check(r.returncode == 1 and "--shard 1/3" in r.stderr and ("another job" in r.stderr or ".zarray" in r.stderr)
          and tree("mix.zarr") == before, "a shard of another dtype refused, the store untouched: " + r.stderr)
    # --force with shards over a complete store: the parts write a hidden replacement, which
    # takes the store's place when the last part commits; until then the old store is whole
    before = tree("argmax_sh3.zarr")
    ok, errs = finish(shard_procs("v.zarr", "argmax_sh3.zarr", "argmax", [0, 1], 3, "--force"))
    check(ok and tree("argmax_sh3.zarr") == before and os.path.isdir(".argmax_sh3.zarr.swi-next"),
          "two of three forced parts: the complete store unchanged: %s" % errs)
    r = run("bench", "--input", "v.zarr", "--output-file", "argmax_sh3.zarr", "--classes", "300", "--roi", "16",
            "--shard", "2/3", "--force", "--no-floor")
    check(r.returncode == 1 and "another job" in r.stderr and tree("argmax_sh3.zarr") == before,
          "a forced part of another job refused: " + r.stderr)
    ok, errs = finish(shard_procs("v.zarr", "argmax_sh3.zarr", "argmax", [2], 3, "--force"))
    check(ok and not os.path.exists(".argmax_sh3.zarr.swi-next") and
          not os.path.exists("argmax_sh3.zarr/.swi-incomplete") and
          np.array_equal(load("argmax_sh3.zarr"), load("argmax_1.zarr")) and
          not [f for f in os.listdir(".") if ".swi-" in f], "the last forced part swaps it in: %s" % errs)
    r = run("bench", "--input", "v.zarr", "--output-file", "x.h5:/a", *common, "--shard", "0/2")
    check(r.returncode == 0 and "swi_incomplete" in h5_attrs("x.h5:/a"),
          "an HDF5 shard writes its part, the file stays incomplete: " + r.stderr)
    r = run("bench", "--input", "v.zarr", *common, "--shard", "0/2")
    check(r.returncode == 2 and "--output-file" in r.stderr, "--shard needs --output-file")
    for bad in ("2/2", "x", "1/0", "-1/3"):
        r = run("bench", "--input", "v.zarr", "--output-file", "y.zarr", *common, "--shard", bad)
        check(r.returncode == 2 and "--shard" in r.stderr, "--shard %s refused: %s" % (bad, r.stderr))
    # grids of boxes (--shard-grid): cut at chunk boundaries on every axis, each box its own process
    make_grid_input()
    for what in ("argmax", "scores"):
        for grid, extra in grid_cases(what):
            n = int(np.prod([int(k) for k in grid.split("x")]))
            tag = "".join(extra).replace(",", "").replace("-", "")
            r = bench("g.zarr", "g%s_1%s.zarr" % (what, tag), what, *extra, "--force")
            check(r.returncode == 0, "grid input, one process: " + r.stderr)
            ref = load("g%s_1%s.zarr" % (what, tag))
            out = "g%s_%s%s.zarr" % (what, grid, tag)
            procs = [subprocess.Popen([swi, "bench", "--input", "g.zarr", "--output", what, "--output-file", out,
                                       *common, *extra, "--shard", "%d/%d" % (i, n), "--shard-grid", grid],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(n)]
            outs = [p.communicate() for p in procs]
            check(all(p.returncode == 0 for p in procs), "grid %s %s: %s" % (grid, extra, [o[1] for o in outs]))
            check(not os.path.exists(out + "/.swi-incomplete"), "grid %s completes the store" % grid)
            check(not [f for f in os.listdir(out) if f.startswith(".swi-part") or "tmp" in f],
                  "grid %s: no part markers or temporaries left" % grid)
            check(np.array_equal(load(out), ref), "%s: grid %s %s bitwise equal to one process" % (what, grid, extra))
            rep = [l for o in outs for l in o[0].splitlines() if l.startswith("shard:")]
            check(len(rep) == n and all(("of grid " + grid) in l and "duplicated" in l for l in rep),
                  "grid %s: each box reports its box and the duplication: %s" % (grid, rep))
    # one box alone leaves the store incomplete
    r = bench("g.zarr", "glone.zarr", "argmax", "--shard", "3/4", "--shard-grid", "2x2x1")
    check(r.returncode == 0 and os.path.exists("glone.zarr/.swi-incomplete") and
          "box [64, 150) x [64, 130) x [0, 29)" in r.stdout, "one box of four: still incomplete: " + r.stdout)
    for args, what in [(["--shard", "0/4", "--shard-grid", "2x2"], "--shard-grid"),
                       (["--shard", "0/4", "--shard-grid", "2x0x2"], "--shard-grid"),
                       (["--shard", "0/4", "--shard-grid", "2x2x1x1"], "--shard-grid"),
                       (["--shard", "0/4", "--shard-grid", "ax2x1"], "--shard-grid"),
                       (["--shard", "0/4", "--shard-grid", "2x2x"], "--shard-grid"),
                       (["--shard", "0/3", "--shard-grid", "2x2x1"], "N must be the grid's 4 boxes"),
                       (["--shard", "4/4", "--shard-grid", "2x2x1"], "--shard"),
                       (["--shard-grid", "2x2x1"], "--shard-grid needs --shard")]:
        r = run("bench", "--input", "g.zarr", "--output-file", "gbad.zarr", *common, *args)
        check(r.returncode == 2 and what in r.stderr and not os.path.exists("gbad.zarr"),
              "%s refused (exit 2, nothing written): %d %s" % (args, r.returncode, r.stderr))
    done()

if case == "h5shards":
    # shards and ranks into one HDF5 dataset: each part writes its rows under the file's lock
    make_inputs()
    # the first part creates the file in a temporary that is never a planted link (the name
    # it used to take, .NAME.tmp-HOST-PID with PID the process's own, points at a victim)
    import socket
    with open("victim.txt", "w") as f:
        f.write("precious")
    host = socket.gethostname()[:64]
    r = subprocess.run(["sh", "-c", 'ln -s victim.txt ".planted.h5.tmp-$1-$$"; shift; exec "$@"', "sh", host, swi,
                        "bench", "--input", "v.zarr", "--output-file", "planted.h5:/seg", *common, "--shard", "0/2"],
                       capture_output=True, text=True)
    check(r.returncode == 0 and open("victim.txt", "rb").read() == b"precious" and
          "swi_incomplete" in h5_attrs("planted.h5:/seg"), "a part's temporary never follows a planted link: " + r.stderr)
    for f in os.listdir("."):
        if f.startswith(".planted.h5.tmp-"):
            os.unlink(f)
    for what in ("argmax", "scores"):
        one = what + "_1.h5:/seg"
        r = bench("v.zarr", one, what)
        check(r.returncode == 0, "one process: " + r.stderr)
        ref = load(one)
        r = bench("v.zarr", what + "_1.zarr", what)
        check(r.returncode == 0 and np.array_equal(ref, load(what + "_1.zarr")),
              "%s: the HDF5 output equals the Zarr one: %s" % (what, r.stderr))
        # 3 processes one after the other, then 2 at once and the third after, then all 3 at once
        for mode in ("serial", "two", "three"):
            out = "%s_%s.h5:/g/seg" % (what, mode)
            if mode == "serial":
                ok, errs = True, []
                for i in range(3):
                    o, e = finish(shard_procs("v.zarr", out, what, [i], 3))
                    ok, errs = ok and o, errs + e
                    if i < 2:
                        check("swi_incomplete" in h5_attrs(out), "%s: incomplete after %d of 3 parts" % (what, i + 1))
            elif mode == "two":
                ok, errs = finish(shard_procs("v.zarr", out, what, [0, 1], 3))
                check(ok and list(h5_attrs(out).get("swi_parts_done", [])) == [1, 1, 0],
                      "%s: two concurrent parts done, the third not: %s" % (what, h5_attrs(out)))
                o, e = finish(shard_procs("v.zarr", out, what, [2], 3))
                ok, errs = ok and o, errs + e
            else:
                r = bench("v.zarr", out, what, "--shard", "init")
                check(r.returncode == 0 and "swi_incomplete" in h5_attrs(out), "--shard init: " + r.stderr)
                ok, errs = finish(shard_procs("v.zarr", out, what, range(3), 3))
            check(ok, "%s %s: 3 shards: %s" % (what, mode, errs))
            check(h5_attrs(out) == {}, "%s %s: complete, no swi_ attributes left: %s" % (what, mode, h5_attrs(out)))
            check(np.array_equal(load(out), ref), "%s %s: 3 shards bitwise equal to one process" % (what, mode))
            check(h5_layout(out) == h5_layout(one), "%s %s: the same shape, dtype, chunks, filters and fill value "
                  "as one writer's: %s %s" % (what, mode, h5_layout(out), h5_layout(one)))
            check(no_temporaries(), "no temporary files left")
    # the boxes of a 2x2x1 grid, all at once, into one HDF5 dataset
    make_grid_input()
    for what in ("argmax", "scores"):
        r = bench("g.zarr", "g%s_1.h5:/seg" % what, what)
        gref = load("g%s_1.h5:/seg" % what)
        out = "g%s_grid.h5:/seg" % what
        ok, errs = finish(shard_procs("g.zarr", out, what, range(4), 4, "--shard-grid", "2x2x1"))
        check(ok and h5_attrs(out) == {} and np.array_equal(load(out), gref),
              "%s: a 2x2x1 grid of boxes into HDF5 bitwise equal to one process: %s" % (what, errs))
    ref = load("argmax_1.h5:/seg")
    # a failing part (its input chunk is corrupt) leaves the file incomplete; h5py still reads
    # it; swi refuses it as an input; rerunning that part alone completes it
    shutil.copytree("v.zarr", "bad.zarr")
    with open("bad.zarr/6.2.2", "r+b") as f:
        f.truncate(7)
    out = "part.h5:/seg"
    ok, errs = finish(shard_procs("v.zarr", out, "argmax", [0, 1], 3))
    check(ok, "parts 0 and 1: %s" % errs)
    r = run("bench", "--input", "bad.zarr", "--output-file", out, *common, "--shard", "2/3")
    check(r.returncode == 1 and "6.2.2" in r.stderr and "incomplete" in r.stderr,
          "the failing part exits 1 naming the chunk and the incomplete output: " + r.stderr)
    a = h5_attrs(out)
    check("swi_incomplete" in a and list(a.get("swi_parts_done", [])) == [1, 1, 0],
          "the file stays marked incomplete, parts 0 and 1 done: %s" % a)
    got = load(out)
    check(got.shape == ref.shape and np.array_equal(got[:128], ref[:128]), "h5py reads the finished parts' rows")
    r = run("bench", "--input", out, *common)
    check(r.returncode == 1 and "incomplete" in r.stderr, "swi refuses the incomplete dataset as input: " + r.stderr)
    r = run("bench", "--input", "v.zarr", "--output-file", out, *common, "--shard", "2/3")
    check(r.returncode == 0 and h5_attrs(out) == {} and np.array_equal(load(out), ref),
          "rerunning the failed part completes the file: " + r.stderr)
    # a part rerun after it had finished: its done flag is cleared until it finishes again
    out = "rerun.h5:/seg"
    finish(shard_procs("v.zarr", out, "argmax", [1], 2))
    finish(shard_procs("bad.zarr", out, "argmax", [1], 2))
    check(list(h5_attrs(out).get("swi_parts_done", [])) == [0, 0], "a failed rerun of a part undoes its done flag")
    ok, errs = finish(shard_procs("v.zarr", out, "argmax", [0, 1], 2))
    check(ok and h5_attrs(out) == {} and np.array_equal(load(out), ref), "and its reruns complete it: %s" % errs)
    # the parts of one job name its input as each process sees it (.hdf5, relative here,
    # absolute there): the same input, so they join the same output (a Zarr store compares the parts' jobs)
    shutil.copyfile("v.h5", "v.hdf5")
    out = "named.zarr"
    ok, errs = finish(shard_procs("v.hdf5:/grp/data", out, "argmax", [0], 2) +
                      shard_procs(os.path.abspath("v.hdf5") + ":/grp/data", out, "argmax", [1], 2))
    check(ok and np.array_equal(load(out), ref),
          "parts naming one .hdf5 input relatively and absolutely join: %s" % errs)
    # mismatched joins are refused, the file unchanged
    before = open("argmax_three.h5", "rb").read()
    for args, why, what in [
            (["--shard", "1/3"], "already exists", "a complete file without --force"),
            (["--classes", "300", "--force", "--shard", "1/3"], "another shape, chunk or dtype", "another dtype"),
            (["--output", "scores", "--force", "--shard", "1/3"], "another shape, chunk or dtype", "another shape")]:
        r = run("bench", "--input", "v.zarr", "--output-file", "argmax_three.h5:/g/seg", *common, *args)
        check(r.returncode == 1 and why in r.stderr and "argmax_three.h5" in r.stderr,
              "%s refused: %s" % (what, r.stderr))
    r = run("bench", "--input", "v.zarr", "--output-file", "argmax_1.h5:/seg", *common, "--shard", "0/2")
    check(r.returncode == 1 and "already exists" in r.stderr and h5_attrs("argmax_1.h5:/seg") == {},
          "a single writer's output is not joined without --force: " + r.stderr)
    check(open("argmax_three.h5", "rb").read() == before, "refused joins leave the file byte for byte")
    # a dataset the file lacks is added beside the others, which stay as they were
    r = run("bench", "--input", "v.zarr", "--output-file", "argmax_three.h5:/other", *common, "--shard", "0/3")
    check(r.returncode == 0 and "swi_incomplete" in h5_attrs("argmax_three.h5:/other") and
          h5_attrs("argmax_three.h5:/g/seg") == {} and np.array_equal(load("argmax_three.h5:/g/seg"), ref),
          "a new dataset in an existing file: " + r.stderr)
    # --force: the parts rewrite a complete file of the same layout
    out = "argmax_three.h5:/g/seg"
    ok, errs = finish(shard_procs("v.zarr", out, "argmax", range(3), 3, "--force"))
    check(ok and h5_attrs(out) == {} and np.array_equal(load(out), ref), "--force rewrites: %s" % errs)
    # HDF5's own lock: forced on by the environment it would conflict with the part's lock
    r = run("bench", "--input", "v.zarr", "--output-file", "env.h5:/seg", *common, "--shard", "0/2",
            env={"HDF5_USE_FILE_LOCKING": "TRUE"})
    check(r.returncode == 1 and "HDF5_USE_FILE_LOCKING=FALSE" in r.stderr and not os.path.exists("env.h5"),
          "HDF5_USE_FILE_LOCKING=TRUE refused before anything is written: " + r.stderr)
    ok, errs = finish(shard_procs("v.zarr", "env.h5:/seg", "argmax", range(2), 2,
                                  env={"HDF5_USE_FILE_LOCKING": "FALSE"}))
    check(ok and np.array_equal(load("env.h5:/seg"), ref), "HDF5_USE_FILE_LOCKING=FALSE works: %s" % errs)
    # a reader holding the file open (HDF5 takes its lock shared) makes a part wait, not fail
    out = "wait.h5:/seg"
    r = bench("v.zarr", out, "argmax", "--shard", "init")
    h = h5py.File("wait.h5", "r")
    procs = shard_procs("v.zarr", out, "argmax", range(2), 2)
    try:
        procs[0].wait(timeout=3)
        waited = False
    except subprocess.TimeoutExpired:
        waited = True
    h.close()
    ok, errs = finish(procs)
    check(waited and ok and np.array_equal(load(out), ref), "a part waits for a reader to close: %s" % errs)
    check(no_temporaries(), "no temporary files left")
    done()

if case == "fail":
    make_inputs()
    # the reader fails midway: a chunk near the end is corrupt
    with open("v.zarr/6.2.2", "r+b") as f:
        f.truncate(7)
    prefix = ()
    # leaks: valgrind, unless swi is built with AddressSanitizer (its LeakSanitizer checks then)
    ldd = subprocess.run(["ldd", swi], capture_output=True, text=True).stdout if shutil.which("ldd") else ""
    if shutil.which("valgrind") and "libasan" not in ldd and "ASAN_OPTIONS" not in os.environ:
        prefix = ("valgrind", "-q", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
                  "--error-exitcode=99")
    for out in ("f.zarr", "f.h5:/x"):
        r = run("bench", "--input", "v.zarr", "--output-file", out, *common, prefix=prefix)
        check(r.returncode == 1, "failing reader exits 1 (99: valgrind found a leak): %d %s" % (r.returncode, r.stderr))
        left = "incomplete" if out.endswith(".zarr") else "as it was before the run"
        check("6.2.2" in r.stderr and "corrupt" in r.stderr and left in r.stderr,
              "the message names the chunk and what is left of the output: " + r.stderr)
    check(os.path.exists("f.zarr/.swi-incomplete"), "the Zarr output is marked incomplete")
    check(not os.path.exists("f.h5") and not [f for f in os.listdir(".") if f.startswith(".f.h5")],
          "the HDF5 output is not left")
    r = run("bench", "--input", "f.zarr", *common)
    check(r.returncode == 1 and "incomplete" in r.stderr, "the incomplete output is refused as an input")
    done()

if case == "launcher":
    make_inputs()
    r = run("--version")
    mpi = "MPI: yes" in r.stdout
    check("MPI:" in r.stdout, "--version says whether MPI is built in: " + r.stdout)
    if not mpi:
        for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
            r = run("bench", "--input", "v.zarr", "--output-file", "m.zarr", *common, env={var: "3"})
            check(r.returncode == 1 and "without MPI" in r.stderr and not os.path.exists("m.zarr"),
                  "%s=3 without MPI: refused before anything is written: %s" % (var, r.stderr))
            r = run("segment", "--model", "none.onnx", "--input-dir", ".", "--output-dir", "mo", env={var: "3"})
            check(r.returncode == 1 and "without MPI" in r.stderr and not os.path.exists("mo"),
                  "%s=3 without MPI: folder mode refused too: %s" % (var, r.stderr))
    r = run("bench", "--input", "v.zarr", "--output-file", "m1.zarr", *common, env={"OMPI_COMM_WORLD_SIZE": "1"})
    check(r.returncode == 0, "one rank runs: " + r.stderr)
    done()

if case == "mpi":
    mpirun = shutil.which("mpirun")
    r = run("--version")
    if not mpirun or "MPI: yes" not in r.stdout:
        print("skipped: swi built without MPI or no mpirun (mpirun: %s; swi --version exit %d: %s %s)" %
              (mpirun, r.returncode, r.stdout.strip().replace("\n", "; "), r.stderr.strip()))
        sys.exit(77)
    make_inputs()
    extra = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    for what in ("argmax", "scores"):
        r = bench("v.zarr", what + "_1.zarr", what)
        ref = load(what + "_1.zarr")
        for n in (1, 2, 3):
            out = "%s_mpi%d.zarr" % (what, n)
            r = subprocess.run([mpirun, *extra, "-n", str(n), swi, "bench", "--input", "v.zarr", "--output", what,
                                "--output-file", out, *common], capture_output=True, text=True)
            check(r.returncode == 0, "mpirun -n %d: %s" % (n, r.stderr[-2000:]))
            check(not os.path.exists(out + "/.swi-incomplete"), "mpirun -n %d completes the store" % n)
            check(os.path.exists(out + "/.zarray") and np.array_equal(load(out), ref),
                  "%s: %d ranks bitwise equal to one process" % (what, n))
            out = "%s_mpi%d.h5:/seg" % (what, n)
            r = subprocess.run([mpirun, *extra, "-n", str(n), swi, "bench", "--input", "v.zarr", "--output", what,
                                "--output-file", out, *common], capture_output=True, text=True, timeout=300)
            check(r.returncode == 0 and h5_attrs(out) == {} and np.array_equal(load(out), ref),
                  "%s: %d ranks into HDF5 bitwise equal to one process: %s" % (what, n, r.stderr[-2000:]))
    # the ranks as the boxes of a grid
    make_grid_input()
    for what in ("argmax", "scores"):
        r = bench("g.zarr", "g%s_1.zarr" % what, what)
        ref = load("g%s_1.zarr" % what)
        for grid, n in (("2x2x1", 4), ("1x3x1", 3)):
            out = "g%s_mpi%s.zarr" % (what, grid)
            r = subprocess.run([mpirun, *extra, "-n", str(n), swi, "bench", "--input", "g.zarr", "--output", what,
                                "--output-file", out, *common, "--shard-grid", grid], capture_output=True,
                               text=True, timeout=300)
            check(r.returncode == 0, "mpirun -n %d --shard-grid %s: %s" % (n, grid, r.stderr[-2000:]))
            check(not os.path.exists(out + "/.swi-incomplete") and os.path.exists(out + "/.zarray") and
                  np.array_equal(load(out), ref), "%s: mpirun -n %d grid %s bitwise equal to one process" %
                  (what, n, grid))
    r = subprocess.run([mpirun, *extra, "-n", "3", swi, "bench", "--input", "g.zarr", "--output-file", "gm.zarr",
                        *common, "--shard-grid", "2x2x1"], capture_output=True, text=True, timeout=120)
    check(r.returncode == 2 and "mpirun -n 4" in r.stderr and not os.path.exists("gm.zarr"),
          "mpirun -n 3 with a grid of 4 boxes refused: %d %s" % (r.returncode, r.stderr[-2000:]))
    # a rank fails (its rows' chunk is corrupt): the job fails, the store stays incomplete
    shutil.copytree("v.zarr", "bad.zarr")
    with open("bad.zarr/6.2.2", "r+b") as f:
        f.truncate(7)
    r = subprocess.run([mpirun, *extra, "-n", "3", swi, "bench", "--input", "bad.zarr", "--output-file", "mf.zarr",
                        *common], capture_output=True, text=True, timeout=120)
    check(r.returncode != 0 and "6.2.2" in r.stderr, "a failing rank fails the job: %s" % r.stderr[-2000:])
    check("ranks failed" in r.stderr, "rank 0 says how many ranks failed: %s" % r.stderr[-2000:])
    check(os.path.exists("mf.zarr/.swi-incomplete"), "the store stays incomplete")
    r = subprocess.run([mpirun, *extra, "-n", "3", swi, "bench", "--input", "bad.zarr", "--output-file", "mf.h5:/s",
                        *common], capture_output=True, text=True, timeout=120)
    check(r.returncode != 0 and "6.2.2" in r.stderr and "swi_incomplete" in h5_attrs("mf.h5:/s"),
          "a failing rank leaves the HDF5 output incomplete: %s" % r.stderr[-2000:])
    # folder mode: the ranks divide the cases (rank I of N as --part I/N)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import clitest
    if "ONNX Runtime: not built in" not in run("--version").stdout:
        clitest.make_models(work)
        os.makedirs("cases")
        for i in range(5):
            nib.save(nib.Nifti1Image(clitest.volume(shape=(30, 20, 17), seed=10 + i), np.eye(4)),
                     "cases/c%d.nii.gz" % i)
        seg = ["segment", "--model", "quant4.onnx", "-q", "--input-dir", "cases"]
        r = run(*seg, "--output-dir", "f1")
        check(r.returncode == 0 and len(os.listdir("f1")) == 5, "folder, one process: " + r.stderr)
        r = subprocess.run([mpirun, *extra, "-n", "2", swi, *seg, "--output-dir", "f2"], capture_output=True,
                           text=True, timeout=300)
        check(r.returncode == 0 and sorted(os.listdir("f2")) == sorted(os.listdir("f1")),
              "folder under mpirun -n 2: every case once: %s %s" % (os.listdir("f2"), r.stderr[-2000:]))
        for f in os.listdir("f1"):
            if os.path.exists("f2/" + f):
                check(np.array_equal(np.asarray(nib.load("f1/" + f).dataobj),
                                     np.asarray(nib.load("f2/" + f).dataobj)), "folder under mpirun: %s equal" % f)
        # rank 0 reports for all: one table of every case, progress (logged) of its own cases only
        loud = [a for a in seg if a != "-q"]
        env = dict(os.environ, SWI_PROGRESS_PERIOD="0.001")
        r = subprocess.run([mpirun, *extra, "-n", "2", swi, *loud, "--output-dir", "f5"], capture_output=True,
                           text=True, timeout=300, env=env)
        lines = r.stderr.splitlines()
        heads = [x for x in lines if x.startswith("case ")]
        sums = [x for x in lines if " done, " in x and " skipped in " in x]
        rows = sorted(x.split()[0] for x in lines if x.split()[:1] and x.split()[0] in
                      ["c%d" % i for i in range(5)])
        rank1 = [x for x in lines if x.startswith("swi segment: c1") or x.startswith("swi segment: c3") or
                 "] c1:" in x or "] c3:" in x]
        check(r.returncode == 0 and len(heads) == 1 and len(sums) == 1 and "5 done, 0 failed" in sums[0] and
              "by 2 ranks" in sums[0] and rows == ["c%d" % i for i in range(5)] and not rank1 and
              any("] c0: done" in x for x in lines),
              "folder under mpirun -n 2: one table by rank 0, rank 1 silent: %s" % r.stderr[-3000:])
        r = subprocess.run([mpirun, *extra, "-n", "2", swi, *seg, "--output-dir", "f3", "--part", "0/2"],
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 2 and "leave --part out" in r.stderr and not os.path.exists("f3"),
              "--part under mpirun refused: %s" % r.stderr[-2000:])
        # a case that fails on one rank: the job's status is 1 and rank 0 says a rank failed
        with open("cases/c3.nii.gz", "wb") as f:
            f.write(b"not a volume")
        r = subprocess.run([mpirun, *extra, "-n", "2", swi, *seg, "--output-dir", "f4"], capture_output=True,
                           text=True, timeout=300)
        check(r.returncode == 1 and "1 of 2 ranks failed" in r.stderr and len(os.listdir("f4")) == 4,
              "a failed case fails the job, the other cases written: %d %s" % (r.returncode, r.stderr[-2000:]))
    done()

if case == "outputs":
    import json
    import signal
    import time
    make_inputs()
    # a folder of the user's files named as the output: refused with and without --force, untouched
    os.makedirs("mine.zarr/data")
    with open("mine.zarr/data/notes.txt", "w") as f:
        f.write("not a store\n")
    before = tree("mine.zarr")
    for extra in ([], ["--force"], ["--force", "--shard", "0/2"]):
        r = bench("v.zarr", "mine.zarr", "argmax", *extra)
        check(r.returncode == 1 and "mine.zarr" in r.stderr and "not a Zarr array" in r.stderr and
              tree("mine.zarr") == before, "a folder of files as output %s refused, untouched: %s" % (extra, r.stderr))
    # an OME image whose level is not named 0: not replaced without --force, .zattrs as it was
    g = zarr.open_group("img.ome.zarr", mode="w")
    g.create_dataset("s0", data=x[None], chunks=(1, 32, 32, 32))
    g.attrs["multiscales"] = [{"version": "0.4", "axes": [{"name": "c", "type": "channel"}] +
                               [{"name": a, "type": "space"} for a in "zyx"], "datasets": [{"path": "s0"}]}]
    before = tree("img.ome.zarr")
    r = bench("v.zarr", "img.ome.zarr", "argmax")
    check(r.returncode == 1 and "exists" in r.stderr and tree("img.ome.zarr") == before,
          "an OME image (level s0) as output refused without --force, untouched: " + r.stderr)
    # labels into it: the image's metadata and level untouched
    r = bench("img.ome.zarr", "img.ome.zarr/labels/seg", "argmax")
    after = {k: v for k, v in tree("img.ome.zarr").items() if not k.startswith("labels")}
    check(r.returncode == 0 and after == before and
          np.array_equal(zarr.open("img.ome.zarr/labels/seg/0", mode="r")[...], np.where(x < 0, 0, 3)),
          "labels into an image with level s0, the image untouched: " + r.stderr)

    # SIGTERM during a --force rewrite of a complete store: the store exactly as it was
    big = ["bench", "--shape", "384,256,256", "--classes", "4", "--roi", "32", "--no-floor", "--output-file", "big.zarr"]
    r = run(*big)
    check(r.returncode == 0, "a complete store: " + r.stderr)
    before = tree("big.zarr")
    p = subprocess.Popen([swi, *big[:-2], "--predictor", "atlas", "--output-file", "big.zarr", "--force"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0, seen, snap = time.time(), False, mtimes("big.zarr")
    while time.time() - t0 < 60 and not seen and p.poll() is None:
        seen = writing("big.zarr", snap)
        time.sleep(0.01)
    p.send_signal(signal.SIGTERM)  # swi bench does not catch it: killed as by any signal
    _, err = p.communicate(timeout=60)
    check(seen and p.returncode != 0 and tree("big.zarr") == before,
          "killed mid --force rewrite (chunks written: %s): the old store as it was: rc %s %s" %
          (seen, p.returncode, err))
    for f in os.listdir("."):
        if f.startswith(".big.zarr.swi-new"):  # what a killed process leaves: its hidden replacement
            shutil.rmtree(f)
    r = run(*big[:-2], "--predictor", "atlas", "--output-file", "big.zarr", "--force")
    check(r.returncode == 0 and tree("big.zarr") != before and not [f for f in os.listdir(".") if ".swi-" in f],
          "the --force rewrite completes and replaces it: " + r.stderr)

    # shards of different inputs never combine
    y = (-x).astype("<f4")
    zarr.open("w.zarr", mode="w", shape=shape, chunks=(20, 16, 10), dtype=y.dtype)[...] = y
    r = bench("v.zarr", "sh.zarr", "argmax", "--shard", "0/2")
    check(r.returncode == 0, "part 0 of v.zarr: " + r.stderr)
    before = tree("sh.zarr")
    for inp, extra in [("w.zarr", []), ("v.zarr", ["--overlap", "0.5"])]:
        r = run("bench", "--input", inp, "--output", "argmax", "--output-file", "sh.zarr", *common, *extra,
                "--shard", "1/2")
        check(r.returncode == 1 and "--shard 1/2: sh.zarr was started by another job" in r.stderr and
              "v.zarr" in r.stderr and tree("sh.zarr") == before,
              "part 1 of %s %s refused, the store untouched: %s" % (inp, extra, r.stderr))
    r = bench("v.zarr", "sh.zarr", "argmax", "--shard", "1/2")
    check(r.returncode == 0 and not os.path.exists("sh.zarr/.swi-incomplete"), "part 1 of the same job: " + r.stderr)

    # an OME-Zarr image named x.zarr is read as one; a Zarr v3 fill_value NaN is warned about
    g = zarr.open_group("pub.zarr", mode="w")
    g.create_dataset("s0", data=x[None], chunks=(1, 32, 32, 32))
    g.attrs["multiscales"] = [{"version": "0.4", "axes": [{"name": "c", "type": "channel"}] +
                               [{"name": a, "type": "space"} for a in "zyx"], "datasets": [{"path": "s0"}]}]
    r = bench("pub.zarr", "pub_l.zarr", "argmax")
    check(r.returncode == 0 and np.array_equal(load("pub_l.zarr"), np.where(x < 0, 0, 3)),
          "an OME-Zarr image named pub.zarr read as OME-Zarr: " + r.stderr)
    os.makedirs("nan.zarr")
    meta = {"zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": "float32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [64, 64, 64]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": "NaN", "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}
    with open("nan.zarr/zarr.json", "w") as f:
        json.dump(meta, f)
    r = bench("nan.zarr", "nan_l.zarr", "argmax")
    check(r.returncode == 0 and "warning" in r.stderr and "nan.zarr" in r.stderr and "fill_value NaN" in r.stderr,
          "fill_value NaN warned about: " + r.stderr)
    done()

if case == "segment":
    import json
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import clitest
        clitest.make_models(work)
    except ImportError as e:
        print("skipped: %s" % e)
        sys.exit(77)
    r = run("--version")
    if "ONNX Runtime: not built in" in r.stdout:
        print("skipped: swi built without ONNX Runtime")
        sys.exit(77)
    # quant4: labels = the nearest of 0..3 to the voxel value; 8^3 windows
    v = clitest.volume(shape=(150, 20, 17), seed=5)
    zarr.open("q.zarr", mode="w", shape=v.shape, chunks=(32, 8, 8), dtype="<f4")[...] = v
    with h5py.File("q.h5", "w") as f:
        f.create_dataset("v", data=v, chunks=(16, 16, 16), compression="gzip")
    nib.save(nib.Nifti1Image(v, np.eye(4)), "q.nii.gz")
    seg = ["segment", "--model", "quant4.onnx", "--mode", "gaussian", "--overlap", "0.5", "-q"]
    r = run(*seg, "--input", "q.nii.gz", "--output", "ref.nii.gz", "--scores", "ref_s.nii.gz")
    check(r.returncode == 0, "segment NIfTI: " + r.stderr)
    ref = np.asarray(nib.load("ref.nii.gz").dataobj)
    ref_s = np.asarray(nib.load("ref_s.nii.gz").dataobj)
    for i, inp in enumerate(["q.zarr", "q.h5:/v", "q.nii.gz"]):
        out, sc = "l%d.zarr" % i, "s%d.zarr" % i
        r = run(*seg, "--input", inp, "--output", out, "--scores", sc)
        check(r.returncode == 0, "segment %s -> stores: %s" % (inp, r.stderr))
        if r.returncode == 0:
            check(np.array_equal(load(out), ref), "labels from %s equal NIfTI's" % inp)
            check(np.array_equal(np.moveaxis(load(sc), 0, -1), ref_s), "scores from %s equal NIfTI's" % inp)
    r = run(*seg, "--input", "q.zarr", "--output", "l_n.nii.gz")
    check(r.returncode == 0 and np.array_equal(np.asarray(nib.load("l_n.nii.gz").dataobj), ref),
          "store input, NIfTI output: " + r.stderr)
    r = run(*seg, "--input", "q.zarr", "--output", "l_h.h5:/seg")
    check(r.returncode == 0 and np.array_equal(load("l_h.h5:/seg"), ref), "HDF5 output: " + r.stderr)
    # labels and scores as two datasets of one HDF5 file, one process; again: refused, --force: rewritten
    both = ["--input", "q.zarr", "--output", "one.h5:/labels", "--scores", "one.h5:/scores"]
    r = run(*seg, *both)
    check(r.returncode == 0 and h5_attrs("one.h5:/labels") == {} and h5_attrs("one.h5:/scores") == {} and
          np.array_equal(load("one.h5:/labels"), ref) and np.array_equal(load("one.h5:/scores"), load("s0.zarr")),
          "labels and scores in one HDF5 file: " + r.stderr)
    r = run(*seg, *both)
    check(r.returncode == 1 and "--force" in r.stderr and np.array_equal(load("one.h5:/labels"), ref),
          "one HDF5 file again without --force refused, untouched: " + r.stderr)
    r = run(*seg, *both, "--force")
    check(r.returncode == 0 and np.array_equal(load("one.h5:/labels"), ref) and h5_attrs("one.h5:/scores") == {},
          "one HDF5 file rewritten with --force: " + r.stderr)
    # --force on one dataset of a user's file rewrites that dataset only (the input another file)
    with h5py.File("user.h5", "w") as f:
        f.attrs["study"] = "mine"
        f.create_dataset("ct", data=v, chunks=(16, 16, 16), compression="gzip")
        f["ct"].attrs["units"] = "HU"
        f.create_group("notes").attrs["who"] = "me"
    run(*seg, "--input", "q.zarr", "--output", "user.h5:/labels")
    r = run(*seg, "--input", "q.zarr", "--output", "user.h5:/labels", "--force")
    with h5py.File("user.h5", "r") as f:
        kept = (f.attrs.get("study") == "mine" and "ct" in f and np.array_equal(f["ct"][...], v) and
                f["ct"].attrs.get("units") == "HU" and "notes" in f and f["notes"].attrs.get("who") == "me")
        check(r.returncode == 0 and kept and np.array_equal(f["labels"][...], ref) and no_temporaries(),
              "--force on user.h5:/labels keeps the file's other datasets and attributes: " + r.stderr)
    # labels and scores into the input's own file: written beside the input, which is untouched
    shutil.copy("q.h5", "qi.h5")
    try:
        r = subprocess.run([swi, *seg, "--input", "qi.h5:/v", "--output", "qi.h5:/labels", "--scores",
                            "qi.h5:/scores"], capture_output=True, text=True, timeout=120)
        with h5py.File("qi.h5", "r") as f:
            check(r.returncode == 0 and np.array_equal(f["v"][...], v) and "labels" in f and "scores" in f and
                  np.array_equal(f["labels"][...], ref) and np.array_equal(f["scores"][...], load("s0.zarr")) and
                  no_temporaries(),
                  "labels and scores into the input's own HDF5 file: " + r.stderr)
    except subprocess.TimeoutExpired:
        check(False, "labels and scores into the input's own HDF5 file hang")
    before = open("qi.h5", "rb").read()
    r = run(*seg, "--input", "qi.h5:/v", "--output", "qi.h5:/v", "--force")
    # refused by the command's check of outputs against inputs (pipeline/samefile.c), before the writer
    check(r.returncode == 1 and "is the same dataset as --input qi.h5:/v" in r.stderr and
          open("qi.h5", "rb").read() == before,
          "the input dataset as --output is refused, --force or not: " + r.stderr)
    try:
        r = subprocess.run([swi, *seg, "--input", "qi.h5:/v", "--output", "qi.h5:/l2", "--shard", "0/2"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 1 and "also an input of this run" in r.stderr and open("qi.h5", "rb").read() == before,
              "parts into the input's own HDF5 file refused at once: " + r.stderr)
    except subprocess.TimeoutExpired:
        check(False, "parts into the input's own HDF5 file hang")
    # SIGTERM during a --force rewrite: the file stays exactly as it was, nothing left
    big = clitest.volume(shape=(160, 96, 96), seed=6)
    zarr.open("big.zarr", mode="w", shape=big.shape, chunks=(32, 32, 32), dtype="<f4")[...] = big
    before = open("user.h5", "rb").read()
    p = subprocess.Popen([swi, *seg, "--input", "big.zarr", "--output", "user.h5:/labels", "--scores",
                          "user.h5:/scores", "--force", "--overlap", "0.75"], stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    while no_temporaries() and p.poll() is None and time.time() - t0 < 60:
        time.sleep(0.02)
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)
    try:
        err = p.communicate(timeout=30)[1]
        check(p.returncode == 143 and open("user.h5", "rb").read() == before and no_temporaries(),
              "SIGTERM during a --force rewrite leaves the HDF5 file as it was: %d %s" % (p.returncode, err))
    except subprocess.TimeoutExpired:
        p.kill()
        check(False, "SIGTERM does not stop a run writing HDF5")
    for n in (2, 3):
        out, sc = "lsh%d.zarr" % n, "ssh%d.zarr" % n
        procs = [subprocess.Popen([swi, *seg, "--input", "q.zarr", "--output", out, "--scores", sc,
                                   "--shard", "%d/%d" % (i, n)], stderr=subprocess.PIPE, text=True)
                 for i in range(n)]
        errs = [p.communicate()[1] for p in procs]
        check(all(p.returncode == 0 for p in procs), "segment %d shards: %s" % (n, errs))
        check(np.array_equal(load(out), ref) and np.array_equal(load(sc), load("s0.zarr")),
              "segment: %d shards bitwise equal to one process" % n)
    # labels and scores as two datasets of one HDF5 file, 3 parts at once
    procs = [subprocess.Popen([swi, *seg, "--input", "q.zarr", "--output", "sh.h5:/labels", "--scores",
                               "sh.h5:/scores", "--shard", "%d/3" % i], stderr=subprocess.PIPE, text=True)
             for i in range(3)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    check(all(p.returncode == 0 for p in procs), "segment 3 shards into one HDF5 file: %s" % errs)
    if all(p.returncode == 0 for p in procs):
        with h5py.File("sh.h5", "r") as h:
            check(list(h["labels"].attrs.keys()) == ["swi_classes"] and not h["scores"].attrs.keys() and
                  np.array_equal(h["labels"][...], ref) and np.array_equal(h["scores"][...], load("s0.zarr")),
                  "segment: 3 shards into HDF5 bitwise equal to one process")
    # a grid of boxes (the second axis holds one chunk: two of the boxes are empty)
    procs = [subprocess.Popen([swi, *seg, "--input", "q.zarr", "--output", "lg.zarr", "--scores", "sg.zarr",
                               "--shard", "%d/4" % i, "--shard-grid", "2x2x1"], stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    errs = [p.communicate()[1] for p in procs]
    check(all(p.returncode == 0 for p in procs) and np.array_equal(load("lg.zarr"), ref) and
          np.array_equal(load("sg.zarr"), load("s0.zarr")), "segment: a 2x2x1 grid bitwise one process: %s" % errs)
    r = run(*seg, "--input", "q.zarr", "--output", "lgb.zarr", "--shard", "0/3", "--shard-grid", "2x2x1")
    check(r.returncode == 2 and "4 boxes" in r.stderr, "segment: N other than the grid's refused: " + r.stderr)
    r = run(*seg, "--input", "q.zarr", "--output", "lgb.zarr", "--shard-grid", "2x2x1")
    check(r.returncode == 2 and "--shard-grid" in r.stderr, "segment: --shard-grid alone refused: " + r.stderr)
    # NaN/Inf voxels: read as 0 as from NIfTI, or refused with --nonfinite fail
    vn = v.copy()
    vn[3, 4, 5], vn[100, 10, 2] = np.nan, np.inf
    zarr.open("qn.zarr", mode="w", shape=v.shape, chunks=(32, 8, 8), dtype="<f4")[...] = vn
    nib.save(nib.Nifti1Image(vn, np.eye(4)), "qn.nii.gz")
    r1 = run(*seg, "--input", "qn.nii.gz", "--output", "ln_ref.nii.gz")
    r2 = run(*seg, "--input", "qn.zarr", "--output", "ln.zarr")
    check(r1.returncode == 0 and r2.returncode == 0 and
          np.array_equal(load("ln.zarr"), np.asarray(nib.load("ln_ref.nii.gz").dataobj)),
          "NaN/Inf read as 0 from a store as from NIfTI: " + r2.stderr)
    r = run(*seg, "--input", "qn.zarr", "--output", "lnf.zarr", "--nonfinite", "fail")
    check(r.returncode == 1 and "--nonfinite fail" in r.stderr and os.path.exists("lnf.zarr/.swi-incomplete"),
          "--nonfinite fail refuses a store input: " + r.stderr)
    # an OME-Zarr input's scale and translation become the affine of NIfTI and NRRD outputs
    # (store axes z, y, x are i, j, k, each its own world axis, unflipped); labels written
    # into the image carry them too
    g = zarr.open_group("geo.zarr", mode="w")  # OME-Zarr by its metadata, named x.zarr
    g.create_dataset("s0", data=v[None], chunks=(1, 32, 8, 8))
    g.attrs["multiscales"] = [{"version": "0.4", "axes": [{"name": "c", "type": "channel"}] +
                               [{"name": a, "type": "space", "unit": "millimeter"} for a in "zyx"],
                               "datasets": [{"path": "s0", "coordinateTransformations": [
                                   {"type": "scale", "scale": [1, 2.0, 0.5, 0.75]},
                                   {"type": "translation", "translation": [0, 10.0, -3.0, 4.5]}]}]}]
    want = np.array([[2.0, 0, 0, 10.0], [0, 0.5, 0, -3.0], [0, 0, 0.75, 4.5], [0, 0, 0, 1]])
    r = run(*seg, "--input", "geo.zarr", "--output", "geo.nii.gz")
    check(r.returncode == 0 and np.allclose(nib.load("geo.nii.gz").affine, want) and
          np.array_equal(np.asarray(nib.load("geo.nii.gz").dataobj), ref),
          "NIfTI output of an OME-Zarr input: its affine from scale and translation: %s %s" %
          (r.stderr, nib.load("geo.nii.gz").affine.tolist() if r.returncode == 0 else ""))
    r = run(*seg, "--input", "geo.zarr", "--output", "geo.nrrd")
    if "without" not in r.stderr:  # built with ITK
        hdr = open("geo.nrrd", "rb").read(2000).split(b"\n\n")[0].decode("latin-1") if r.returncode == 0 else ""
        check("space origin: (-10,3,4.5)" in hdr and "space directions: (-2,-0,0) (-0,-0.5,0) (-0,-0,0.75)" in hdr,
              "NRRD output carries spacing and origin (LPS): %s %s" % (r.stderr, hdr))
    r = run(*seg, "--input", "geo.zarr", "--output", "geo.zarr/labels/quant")
    ct = json.load(open("geo.zarr/labels/quant/.zattrs"))["multiscales"][0]["datasets"][0]["coordinateTransformations"] \
        if r.returncode == 0 else None
    # (and its c axis, of size 1: the image-label convention)
    check(ct == [{"type": "scale", "scale": [1.0, 2.0, 0.5, 0.75]},
                 {"type": "translation", "translation": [0.0, 10.0, -3.0, 4.5]}],
          "labels in the image carry its level's transformations: %s %s" % (r.stderr, ct))

    # SIGTERM during a --force rewrite of a complete store: the store exactly as it was, and
    # nothing left beside it (the run aborts its writer)
    import signal
    import time
    vb = clitest.volume(shape=(256, 96, 96), seed=6)
    zarr.open("qb.zarr", mode="w", shape=vb.shape, chunks=(64, 96, 96), dtype="<f4")[...] = vb
    r = run(*seg, "--input", "qb.zarr", "--output", "lb.zarr", "--threads", "1")
    check(r.returncode == 0, "a complete store: " + r.stderr)
    before = tree("lb.zarr")
    p = subprocess.Popen([swi, *seg, "--input", "qb.zarr", "--output", "lb.zarr", "--force", "--threads", "1",
                          "--overlap", "0.75"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0, seen, snap = time.time(), False, mtimes("lb.zarr")
    while time.time() - t0 < 120 and not seen and p.poll() is None:
        seen = writing("lb.zarr", snap)
        time.sleep(0.01)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    check(seen and p.returncode == 143 and tree("lb.zarr") == before and
          not [f for f in os.listdir(".") if f.startswith(".lb.zarr")],
          "SIGTERM mid --force rewrite (chunks written: %s): the old store as it was, nothing left: rc %s %s" %
          (seen, p.returncode, err))
    mpirun = shutil.which("mpirun")
    if mpirun and "MPI: yes" in run("--version").stdout:
        extra = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
        r = subprocess.run([mpirun, *extra, "-n", "3", swi, *seg, "--input", "q.zarr", "--output", "lmpi.zarr",
                            "--scores", "smpi.zarr"], capture_output=True, text=True, timeout=300)
        check(r.returncode == 0 and np.array_equal(load("lmpi.zarr"), ref) and
              np.array_equal(load("smpi.zarr"), load("s0.zarr")), "mpirun -n 3 swi segment: " + r.stderr[-2000:])
        # rank 0 alone reports (not quiet): one summary line, no progress from the others
        loud = [a for a in seg if a != "-q"]
        r = subprocess.run([mpirun, *extra, "-n", "3", swi, *loud, "--input", "q.zarr", "--output", "lmpi2.zarr"],
                           capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, SWI_PROGRESS_PERIOD="0.001"))
        summaries = [x for x in r.stderr.splitlines() if "peak RSS" in x]
        check(r.returncode == 0 and len(summaries) == 1, "mpirun -n 3: one summary: " + r.stderr[-2000:])
    for args, what in [(["--input", "q.zarr", "--input", "q.nii.gz"], "a mix"),
                       (["--input", "q.zarr", "--zscore"], "--zscore"),
                       (["--input", "q.zarr", "--output", "a.zarr", "--scores", "b.nii.gz"], "both"),
                       (["--input", "q.nii.gz", "--output", "a.nii.gz", "--shard", "0/2"], "--shard")]:
        if "--output" not in args:
            args = args + ["--output", "z.zarr"]
        r = run(*seg, *args)
        check(r.returncode == 2 and what in r.stderr, "usage error for %s: %s" % (what, r.stderr))
    done()

if case == "meaning":
    # outputs that carry their meaning: the card's class names and colours in every store
    import json
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import clitest
        clitest.make_models(work)
    except ImportError as e:
        print("skipped: %s" % e)
        sys.exit(77)
    r = run("--version")
    if "ONNX Runtime: not built in" in r.stdout:
        print("skipped: swi built without ONNX Runtime")
        sys.exit(77)
    shutil.copy("quant4.onnx", "named.onnx")
    names = ["background", "liver", "spleen", "kidney right"]
    with open("named.json", "w") as f:
        json.dump({"classes": names}, f)
    v = clitest.volume(shape=(40, 20, 17), seed=5)
    zarr.open("q.zarr", mode="w", shape=v.shape, chunks=(16, 8, 8), dtype="<f4")[...] = v
    seg = ["segment", "--model", "named.onnx", "-q", "--input", "q.zarr"]
    for out in ("l.zarr", "l.ome.zarr", "l.h5:/seg"):
        r = run(*seg, "--output", out)
        check(r.returncode == 0, "segment -> %s: %s" % (out, r.stderr))
    want = [n for n in names]
    cl = zarr.open("l.zarr", mode="r").attrs.get("swi_classes", [])
    check([c["name"] for c in cl] == want and [c["label-value"] for c in cl] == [0, 1, 2, 3] and
          cl[0]["rgba"][3] == 0 and all(len(c["rgba"]) == 4 and c["rgba"][3] == 255 for c in cl[1:]),
          "Zarr labels carry swi_classes: %s" % cl)
    il = zarr.open("l.ome.zarr", mode="r").attrs.get("image-label", {})
    props = il.get("properties", [])
    check([p["name"] for p in props] == want and [p["label-value"] for p in props] == [0, 1, 2, 3] and
          [c["rgba"] for c in il.get("colors", [])] == [c["rgba"] for c in cl[1:]],
          "OME-Zarr image-label properties name every label, colours as Zarr's: %s" % il)
    h5c = json.loads(h5_attrs("l.h5:/seg", classes=True).get("swi_classes", "[]"))
    check(h5c == cl, "HDF5 labels carry swi_classes as JSON text: %s" % h5c)
    # without a card: background and label_N
    r = run("segment", "--model", "quant4.onnx", "-q", "--input", "q.zarr", "--output", "u.zarr")
    check(r.returncode == 0 and [c["name"] for c in zarr.open("u.zarr", mode="r").attrs["swi_classes"]] ==
          ["background", "label_1", "label_2", "label_3"], "no card: default names: " + r.stderr)

    # labels of a tczyx image keep its t and c axes (of size 1), as the image-label convention
    for axes in ("tczyx", "czyx"):
        img = "img_%s.ome.zarr" % axes
        g = zarr.open_group(img, mode="w")
        lead = (1,) * (len(axes) - 3)
        g.create_dataset("0", data=v.reshape(lead + v.shape), chunks=lead + (16, 8, 8))
        kinds = {"t": "time", "c": "channel"}
        g.attrs["multiscales"] = [{"version": "0.4", "name": "img",
                                   "axes": [{"name": a, "type": kinds.get(a, "space")} for a in axes],
                                   "datasets": [{"path": "0", "coordinateTransformations": [
                                       {"type": "scale", "scale": [1.0] * len(axes)}]}]}]
        out = img + "/labels/seg"
        r = run("segment", "--model", "named.onnx", "-q", "--input", img, "--output", out)
        ok = r.returncode == 0
        if ok:
            la = zarr.open_group(out, mode="r")
            ms = la.attrs["multiscales"][0]
            ok = ([a["name"] for a in ms["axes"]] == list(axes) and la["0"].shape == lead + v.shape and
                  len(ms["datasets"][0]["coordinateTransformations"][0]["scale"]) == len(axes) and
                  np.array_equal(la["0"][...].reshape(v.shape), load("l.zarr")) and
                  [p["name"] for p in la.attrs["image-label"]["properties"]] == names)
        check(ok, "%s image: labels with axes %s, t and c of size 1: %s" % (axes, axes, r.stderr))

    # output chunks: the store input's, or --chunks; labels and scores alike, every kind of store
    for out in ("c_in.zarr", "c_in.ome.zarr", "c_in.h5:/seg"):
        r = run(*seg, "--output", out)
        if out.endswith(".h5:/seg"):
            with h5py.File("c_in.h5", "r") as h:
                ch = h["seg"].chunks
        else:
            a = zarr.open(out, mode="r")
            ch = (a["0"] if out.endswith(".ome.zarr") else a).chunks
        check(r.returncode == 0 and tuple(ch) == (16, 8, 8), "%s: the input's chunks (16, 8, 8): %s %s" % (out, ch, r.stderr))
    with h5py.File("q5.h5", "w") as f:
        f.create_dataset("v", data=v, chunks=(10, 5, 17), compression="gzip")
    r = run(*seg[:-1], "q5.h5:/v", "--output", "c_h.zarr")
    check(r.returncode == 0 and zarr.open("c_h.zarr", mode="r").chunks == (10, 5, 17),
          "an HDF5 input's chunks: " + r.stderr)
    r = run(*seg, "--output", "c_f.zarr", "--scores", "c_fs.zarr", "--chunks", "8,20,5")
    check(r.returncode == 0 and zarr.open("c_f.zarr", mode="r").chunks == (8, 20, 5) and
          zarr.open("c_fs.zarr", mode="r").chunks == (1, 8, 20, 5) and
          np.array_equal(load("c_f.zarr"), load("l.zarr")), "--chunks 8,20,5 for labels and scores: " + r.stderr)
    r = run(*seg, "--output", "c_big.zarr", "--chunks", "100,100,100")
    check(r.returncode == 0 and zarr.open("c_big.zarr", mode="r").chunks == v.shape, "--chunks clipped to the size")
    for bad in ("8,8", "0,8,8", "a,b,c"):
        r = run(*seg, "--output", "c_bad.zarr", "--chunks", bad)
        check(r.returncode == 2 and "--chunks" in r.stderr, "--chunks %s refused: %s" % (bad, r.stderr))
    r = run("segment", "--model", "named.onnx", "-q", "--input", "q.zarr", "--output", "c.nii.gz", "--chunks", "8,8,8")
    check(r.returncode == 2 and "--chunks" in r.stderr, "--chunks with a file output refused: " + r.stderr)

    # --statistics: per class, against numpy over the written labels and the input as read
    def want_stats(lab, x, affine):
        vox = abs(np.linalg.det(affine[:3, :3]))
        out = {}
        for c, name in enumerate(names):
            m = lab == c
            st = {"label-value": c, "voxels": int(m.sum()), "volume_ml": m.sum() * vox / 1000}
            if m.any():
                v = x[m].astype(np.float64)
                idx = np.argwhere(m)
                lo, hi = idx.min(0), idx.max(0)
                corners = np.array([[(hi if (k >> d) & 1 else lo)[d] for d in range(3)] + [1] for k in range(8)])
                w = (affine @ corners.T)[:3]
                st.update(intensity=v.mean(), intensity_std=v.std(), intensity_min=v.min(), intensity_max=v.max(),
                          bbox_voxels=[lo.tolist(), hi.tolist()], bbox_mm=[w.min(1).tolist(), w.max(1).tolist()])
            out[name] = st
        return out

    def same_stats(path, want, what):
        try:
            got = json.load(open(path))["classes"]
        except (OSError, ValueError) as e:
            check(False, "%s: %s" % (what, e))
            return
        ok = list(got) == list(want)
        for name, w in want.items():
            g = got.get(name, {})
            for k, v in w.items():
                gv = g.get(k)
                if isinstance(v, list):
                    ok &= gv is not None and np.allclose(np.array(gv, float), np.array(v, float), rtol=1e-6, atol=1e-6)
                else:
                    ok &= gv is not None and np.isclose(gv, v, rtol=1e-6, atol=1e-9)
            if not w["voxels"]:
                ok &= g.get("intensity") is None and g.get("bbox_mm") is None
        check(ok, "%s: statistics as numpy's: %s\nwant %s" % (what, got, want))

    aff = np.diag([0.8, 1.2, 2.0, 1.0])
    aff[:3, 3] = [-10, 5, 3]
    nib.save(nib.Nifti1Image(v * 100 - 50, aff), "hu.nii.gz")
    x = np.asarray(nib.load("hu.nii.gz").dataobj).astype(np.float32)
    faff = nib.load("hu.nii.gz").affine
    base = ["segment", "--model", "named.onnx", "-q", "--scale", "-50,310,0,3.6"]
    for extra, tag in (((), "plain"), (("--orientation", "LPS"), "oriented"), (("--spacing", "1,1,1.5"), "resampled")):
        r = run(*base, "--input", "hu.nii.gz", "--output", "st_%s.nii.gz" % tag, "--statistics", "st_%s.json" % tag, *extra)
        check(r.returncode == 0, "--statistics %s: %s" % (tag, r.stderr))
        if r.returncode == 0:
            lab = np.asarray(nib.load("st_%s.nii.gz" % tag).dataobj)
            check(len(np.unique(lab)) > 1, "%s: several classes" % tag)
            same_stats("st_%s.json" % tag, want_stats(lab, x, faff), "--statistics %s (NIfTI)" % tag)
    # a store input: its intensities read again, labels to a store and to a file
    zarr.open("hu.zarr", mode="w", shape=x.shape, chunks=(16, 8, 8), dtype="<f4")[...] = x
    for out in ("st.zarr", "st_z.nii.gz"):
        r = run(*base, "--input", "hu.zarr", "--output", out, "--statistics", out + ".json", "--threads", "3")
        check(r.returncode == 0, "--statistics store -> %s: %s" % (out, r.stderr))
        if r.returncode == 0:
            lab = load(out) if out.endswith(".zarr") else np.asarray(nib.load(out).dataobj)
            same_stats(out + ".json", want_stats(lab, x, np.eye(4)), "--statistics store input -> " + out)
    # --masks DIR: one binary mask a class, named by the card, the folder whole or not at all
    r = run(*base, "--input", "hu.nii.gz", "--output", "mk.nii.gz", "--masks", "mk")
    lab = np.asarray(nib.load("mk.nii.gz").dataobj) if r.returncode == 0 else None
    check(r.returncode == 0 and sorted(os.listdir("mk")) == sorted(n + ".nii.gz" for n in names[1:]),
          "--masks: one file a class: %s %s" % (os.listdir("mk") if os.path.isdir("mk") else None, r.stderr))
    for c, n in enumerate(names[1:], 1):
        if lab is None:
            break
        m = nib.load(os.path.join("mk", n + ".nii.gz"))
        check(m.get_data_dtype() == np.uint8 and np.array_equal(np.asarray(m.dataobj), (lab == c).astype(np.uint8)) and
              np.allclose(m.affine, nib.load("mk.nii.gz").affine), "mask %s is labels == %d" % (n, c))
    r = run(*base, "--input", "hu.nii.gz", "--output", "mk2.nii.gz", "--masks", "mk")
    check(r.returncode == 1 and "--force" in r.stderr and not os.path.exists("mk2.nii.gz"),
          "--masks over a folder of masks refused without --force: " + r.stderr)
    os.makedirs("mine", exist_ok=True)
    open("mine/notes.txt", "w").write("mine")
    r = run(*base, "--input", "hu.nii.gz", "--output", "mk3.nii.gz", "--masks", "mine", "--force")
    check(r.returncode == 1 and os.listdir("mine") == ["notes.txt"], "--masks never replaces a user's folder: " + r.stderr)
    r = run(*base, "--input", "hu.nii.gz", "--output", "mk.nii.gz", "--masks", "mk", "--force")
    check(r.returncode == 0 and len(os.listdir("mk")) == 3 and not [f for f in os.listdir(".") if ".swi-" in f],
          "--masks --force replaces the folder, nothing left beside: " + r.stderr)
    r = run(*base, "--input", "hu.nii.gz", "--output", "mk4.nii.gz", "--masks", ".", "--force")
    check(r.returncode != 0 and not os.path.exists("mk4.nii.gz"), "--masks holding the input refused: " + r.stderr)
    r = run(*seg, "--output", "mk.zarr", "--masks", "mkz")
    check(r.returncode == 2 and "--masks" in r.stderr, "--masks with a store output refused: " + r.stderr)

    # the figures do not depend on the threads' timing: byte for byte the same file
    r = run(*base, "--input", "hu.zarr", "--output", "st1.zarr", "--statistics", "st1.json", "--threads", "1")
    same = r.returncode == 0 and os.path.exists("st.zarr.json")
    if same:
        a, b = json.load(open("st1.json")), json.load(open("st.zarr.json"))
        same = a["classes"] == b["classes"]
    check(same, "--statistics with 1 and 3 threads: the same figures: " + r.stderr)
    r = run(*base, "--input", "hu.zarr", "--output", "sh.zarr", "--statistics", "sh.json", "--shard", "0/2")
    check(r.returncode == 2 and "--statistics" in r.stderr and not os.path.exists("sh.zarr"),
          "--statistics with --shard refused: " + r.stderr)

    # the output rules: never over an input, an existing file refused without --force
    r = run(*base, "--input", "hu.nii.gz", "--output", "st2.nii.gz", "--statistics", "hu.nii.gz", "--force")
    check(r.returncode != 0 and not os.path.exists("st2.nii.gz"), "--statistics over the input refused: " + r.stderr)
    r = run(*base, "--input", "hu.nii.gz", "--output", "st3.nii.gz", "--statistics", "st_plain.json")
    check(r.returncode != 0 and "--force" in r.stderr and not os.path.exists("st3.nii.gz"),
          "--statistics over an existing file refused without --force: " + r.stderr)
    done()

if case == "race":
    # Two runs of different jobs (and two runs of one job) creating the same new store at
    # once: exactly one succeeds and the store holds exactly its labels, complete; the
    # other is refused ("another run created it meanwhile" or "already exists"), whoever
    # wins. Parts of one job (--shard I/N) started together still join.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import clitest
        clitest.make_models(work)
    except ImportError as e:
        print("skipped: %s" % e)
        sys.exit(77)
    r = run("--version")
    if "ONNX Runtime: not built in" in r.stdout:
        print("skipped: swi built without ONNX Runtime")
        sys.exit(77)
    v = clitest.volume(shape=(40, 20, 17), seed=5)
    for name, data in (("ra.zarr", v), ("rb.zarr", 3.0 - v)):
        zarr.open(name, mode="w", shape=v.shape, chunks=(16, 8, 8), dtype="<f4")[...] = data
    seg = ["segment", "--model", "quant4.onnx", "--overlap", "0.25", "-q", "--threads", "1"]
    refs = []
    for name in ("ra.zarr", "rb.zarr"):
        r = run(*seg, "--input", name, "--output", "ref-" + name)
        check(r.returncode == 0, "reference of %s: %s" % (name, r.stderr))
        refs.append(load("ref-" + name))
    check(not np.array_equal(refs[0], refs[1]), "the two jobs' labels differ")
    for rnd in range(4):
        for kind, inputs, extra in (("two jobs", ("ra.zarr", "rb.zarr"), []),
                                    ("one job twice", ("ra.zarr", "ra.zarr"), [])):
            out = "race%d-%s.zarr" % (rnd, kind.replace(" ", "").replace(",", "").replace("-", ""))
            procs = [subprocess.Popen([swi, *seg, "--input", i, "--output", out, *extra], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True) for i in inputs]
            res = [(p.returncode, e) for p, (o, e) in ((p, p.communicate(timeout=120)) for p in procs)]
            won = [k for k, (rc, _e) in enumerate(res) if rc == 0]
            msgs = " | ".join(e.strip() for _rc, e in res)
            check(len(won) == 1, "%s, round %d: exactly one run succeeds: %s" % (kind, rnd, msgs))
            if len(won) == 1:
                lost = res[1 - won[0]][1]
                check("meanwhile" in lost or "already exists" in lost or "incomplete" in lost,
                      "%s, round %d: the other is refused naming why: %s" % (kind, rnd, lost))
                ref = refs[0] if inputs[won[0]] == "ra.zarr" else refs[1]
                check(not os.path.exists(os.path.join(out, ".swi-incomplete")) and np.array_equal(load(out), ref),
                      "%s, round %d: the store holds exactly the winner's labels, complete" % (kind, rnd))
            check(not [n for n in os.listdir(".") if n.startswith("." + out)],
                  "%s, round %d: no temporaries are left" % (kind, rnd))
    # parts of one job started together join one store
    procs = [subprocess.Popen([swi, *seg, "--input", "ra.zarr", "--output", "parts.zarr", "--shard", "%d/3" % i],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(3)]
    ok, errs = finish(procs)
    check(ok and np.array_equal(load("parts.zarr"), refs[0]), "three parts of one job join: %s" % errs)
    # a part of another job is refused
    procs = [subprocess.Popen([swi, *seg, "--input", i, "--output", "mixed.zarr", "--shard", "%d/2" % k],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k, i in enumerate(("ra.zarr", "rb.zarr"))]
    ok, errs = finish(procs)
    check(not ok and any("another job" in e for e in errs), "parts of two jobs do not join: %s" % errs)
    done()

print("unknown case", case)
sys.exit(2)
