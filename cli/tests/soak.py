#!/usr/bin/env python3
"""Soak test of `swi segment`: many runs over small cases, good and hostile mixed.

    soak.py RUN_RSS SWI WORK [CASES]    CASES defaults to $SWI_SOAK_CASES, else 60

RUN_RSS is cli/tests/run_rss.c built: it runs each case and reports that run's own peak.

Every good case must produce exactly the outputs of the reference run of the same case
(made once, before the loop, and checked against numpy); every hostile one must exit 1
with one line on stderr naming the file, leave its input untouched and leave nothing in
the output folder. Memory must stay put: the mean peak RSS of the last 50 runs (each
child's own, from wait4) within 5 % of the first 50's. The cases cycle with a period of
10, so both windows hold the same mix. Exit 0 pass, 1 fail, 77 skipped.
"""
import hashlib
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import numpy as np
    import nibabel as nib
    sys.path.insert(0, HERE)
    import clitest
except ImportError as e:  # numpy, nibabel or onnx missing
    print(f"SKIPPED: {e} (run scripts/install-deps.sh)")
    sys.exit(77)

PERIOD = 10
WINDOW = 50
TOLERANCE = 0.05


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def make_data(d):
    """The model, four good volumes of different shapes and the hostile files."""
    os.makedirs(d, exist_ok=True)
    clitest.make_models(d)
    A = clitest.AFFINE
    shapes = [(20, 24, 16), (9, 13, 17), (32, 8, 8), (5, 6, 7)]
    for i, s in enumerate(shapes):
        nib.save(nib.Nifti1Image(clitest.volume(s, seed=10 + i), A), os.path.join(d, f"good{i}.nii.gz"))
    nib.save(nib.Nifti1Image(clitest.volume(shapes[0], seed=10), A), os.path.join(d, "good0.nii"))
    v = clitest.volume(shapes[1], seed=20)
    z = v.copy()
    v[2, 3, 4] = v[0, 0, 0] = np.nan
    z[2, 3, 4] = z[0, 0, 0] = 0
    nib.save(nib.Nifti1Image(v, A), os.path.join(d, "somenan.nii.gz"))
    nib.save(nib.Nifti1Image(z, A), os.path.join(d, "somenan_zero.nii.gz"))
    nib.save(nib.Nifti1Image(np.full(shapes[2], np.nan, np.float32), A), os.path.join(d, "allnan.nii.gz"))
    good = open(os.path.join(d, "good0.nii"), "rb").read()
    with open(os.path.join(d, "truncated.nii"), "wb") as f:
        f.write(good[: len(good) // 2])
    dims = bytearray(good)
    dims[40:42] = (9).to_bytes(2, "little")  # dim[0] = 9
    with open(os.path.join(d, "wrongdims.nii"), "wb") as f:
        f.write(bytes(dims))
    with open(os.path.join(d, "random.nii.gz"), "wb") as f:
        f.write(np.random.default_rng(3).bytes(3000))


# One period of cases: (name, kind, input, extra outputs, expected stderr pattern).
# good: exit 0; warn: exit 0 with one warning line; bad: exit 1 naming the input.
CYCLE = [
    ("labels", "good", "good0.nii.gz", [], None),
    ("truncated", "bad", "truncated.nii", [], "truncated"),
    ("scores", "good", "good1.nii.gz", ["--scores", "s.nii"], None),
    ("wrongdims", "bad", "wrongdims.nii", [], "dim"),
    ("preview", "good", "good2.nii.gz", ["--preview", "p.png"], None),
    ("allnan", "bad", "allnan.nii.gz", ["--nonfinite", "fail"], "NaN or infinite"),
    ("plain", "good", "good3.nii.gz", [], None),
    ("notnifti", "bad", "random.nii.gz", [], "NIfTI"),
    ("somenan", "warn", "somenan.nii.gz", ["--scores", "s.nii.gz"], "2 of 1989 voxels are NaN"),
    ("samefile", "same", "good0.nii", [], "is the same file as --input"),
]


RUN_RSS = None


def run_swi(swi, args, err_path):
    """Run swi; returns (exit status, peak RSS in KiB of that run)."""
    rss_file = err_path + ".rss"
    with open(err_path, "wb") as err:
        rc = subprocess.call([RUN_RSS, rss_file, swi] + args, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=err)
    with open(rss_file) as f:
        return rc, int(f.read())


def case_args(data, out, case):
    name, kind, inp, extra, _ = case
    output = os.path.join(out, "l.nii" if name == "plain" else "l.nii.gz")
    if kind == "same":
        # the output names the input through another path, with --force: must be refused
        inp_path = os.path.join(out, "..", "in", inp)
        output = os.path.join(out, "..", "in", ".", inp)
        extra = ["--force"]
    else:
        inp_path = os.path.join(data, inp)
    outs = [x if not x.endswith((".nii", ".gz", ".png")) else os.path.join(out, x) for x in extra]
    return (["segment", "-q", "--threads", "1", "--model", os.path.join(data, "quant4.onnx"),
             "--input", inp_path, "--output", output] + outs, inp_path)


def main(argv):
    global RUN_RSS
    if len(argv) < 4:
        print(__doc__)
        return 2
    RUN_RSS, swi, work = argv[1], argv[2], argv[3]
    # sanitizer builds: ONNX Runtime's process-lifetime allocations are not ours to report
    lsan = os.environ.get("LSAN_OPTIONS", "")
    os.environ["LSAN_OPTIONS"] = (lsan + ":" if lsan else "") + \
        f"suppressions={HERE}/lsan.supp:print_suppressions=0"
    n = int(argv[4]) if len(argv) > 4 else int(os.environ.get("SWI_SOAK_CASES", "60"))
    if n < PERIOD:
        print(f"FAIL: at least {PERIOD} cases")
        return 1
    ver = subprocess.run([swi, "--version"], capture_output=True, text=True).stdout
    if "NIfTI (niftilib): yes" not in ver or "ONNX Runtime: not" in ver:
        print("SKIPPED: swi built without NIfTI or ONNX Runtime")
        return 77
    if "PNG (libpng): yes" not in ver:  # the preview case then writes labels only
        CYCLE[4] = ("preview", "good", "good2.nii.gz", [], None)
    data, out, ref = (os.path.join(work, x) for x in ("data", "out", "ref"))
    shutil.rmtree(work, ignore_errors=True)
    make_data(data)
    os.makedirs(os.path.join(work, "in"))
    shutil.copy(os.path.join(data, "good0.nii"), os.path.join(work, "in", "good0.nii"))
    same_hash = sha(os.path.join(work, "in", "good0.nii"))
    err = os.path.join(work, "stderr")

    # the references: one run of each good case, checked against numpy
    refs = {}
    for case in CYCLE:
        name, kind, inp = case[:3]
        if kind not in ("good", "warn"):
            continue
        os.makedirs(out)
        args, _ = case_args(data, out, case)
        rc, _ = run_swi(swi, args, err)
        if rc != 0:
            print(f"FAIL: reference run of {name} exited {rc}: {open(err).read()}")
            return 1
        truth = os.path.join(data, "somenan_zero.nii.gz" if kind == "warn" else inp)
        lab = [f for f in os.listdir(out) if f.startswith("l.")][0]
        if clitest.check_labels(os.path.join(out, lab), [truth]) != 0:
            print(f"FAIL: the reference labels of {name} are wrong")
            return 1
        refs[name] = {f: sha(os.path.join(out, f)) for f in os.listdir(out)}
        shutil.move(out, os.path.join(ref, name))

    rss, failures, counts = [], [], {"good": 0, "bad": 0}
    for i in range(n):
        case = CYCLE[i % PERIOD]
        name, kind, inp, _, pat = case
        os.makedirs(out)
        args, inp_path = case_args(data, out, case)
        before = sha(inp_path)
        rc, peak = run_swi(swi, args, err)
        rss.append(peak)
        msg = open(err, errors="replace").read()
        lines = msg.splitlines()
        left = sorted(os.listdir(out))
        why = None
        if sha(inp_path) != before:
            why = "the input changed"
        elif kind in ("good", "warn"):
            counts["good"] += 1
            got = {f: sha(os.path.join(out, f)) for f in left}
            if rc != 0:
                why = f"exit {rc}"
            elif got != refs[name]:
                why = f"outputs {sorted(got)} differ from the reference's {sorted(refs[name])}"
            elif kind == "good" and msg:
                why = "stderr not empty"
            elif kind == "warn" and (len(lines) != 1 or pat not in msg or "warning" not in msg):
                why = "not one warning line"
        else:
            counts["bad"] += 1
            if rc != 1:
                why = f"exit {rc}, expected 1"
            elif len(lines) != 1 or pat not in msg or os.path.basename(inp) not in msg:
                why = f"stderr is not one line naming {inp} and '{pat}'"
            elif left:
                why = f"left behind: {left}"
        if kind == "same" and (sha(inp_path) != same_hash or
                               sorted(os.listdir(os.path.join(work, "in"))) != ["good0.nii"]):
            why = "the input folder changed"
        if why:
            failures.append(f"case {i} ({name}): {why}; stderr: {msg.strip()[:300]}")
        shutil.rmtree(out)

    w = min(WINDOW, n // 2 // PERIOD * PERIOD)
    first, last = sum(rss[:w]) / w, sum(rss[-w:]) / w
    drift = (last - first) / first
    print(f"{n} runs ({counts['good']} good, {counts['bad']} hostile): peak RSS per run "
          f"min {min(rss) / 1024:.1f} MB, max {max(rss) / 1024:.1f} MB; mean of the first {w} "
          f"{first / 1024:.2f} MB, of the last {w} {last / 1024:.2f} MB ({drift * 100:+.2f} %)")
    for f in failures[:20]:
        print("FAIL:", f)
    if failures:
        print(f"FAIL: {len(failures)} of {n} cases")
        return 1
    if abs(drift) > TOLERANCE:
        print(f"FAIL: peak RSS drifted by {drift * 100:+.2f} % (limit {TOLERANCE * 100:.0f} %)")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
