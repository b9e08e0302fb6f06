"""A deterministic mutation fuzzer for the nnU-Net converter's inputs (swi._nnunet_inputs):
plans.json, dataset.json and checkpoints of the tiny model folders, mutated (bit flips,
truncations, huge numbers, deep nesting, type swaps, tensors re-shaped, re-strided or
re-typed, data.pkl bytes, zip entries dropped, resized or compressed). Every case must
convert or be refused with one line, within a time and an address-space bound: never a
traceback, a crash or a hang.

The cases run in one worker process (the converter's main, in process: importing torch
once) under RLIMIT_AS; SIGALRM bounds each case. SWI_CONVERT_FUZZ_CASES (default 240)
and SWI_CONVERT_FUZZ_SEED choose the run; scripts/ci-fuzz.sh runs a longer one."""

import io
import json
import os
import random
import shutil
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "nnunet-models"
MODELS = [
    "Dataset990_SwiTinyCT/nnUNetTrainer__nnUNetPlans__3d_fullres",
    "Dataset990_SwiTinyCT/nnUNetTrainer__nnUNetPlans__2d",
    "Dataset991_SwiTinyMR/nnUNetTrainer__nnUNetResEncUNetMPlans__3d_fullres",
]
LIMIT_AS = 3 << 29  # the interpreter with torch and onnx takes ~700 MiB of it
CASE_SECONDS = 20
PREFIX = "swi convert nnunet: "

# ---- mutations ---------------------------------------------------------------------
ODD_VALUES = [None, True, False, 0, -1, 1, 2 ** 31, 2 ** 63, -(2 ** 63), 0.0, -0.5, 1e308, float("nan"),
              float("inf"), "", "x", "3d_fullres", [], {}, [1, 2], [[3, 3, 3]], {"a": 1}, [None], [0.5, 1, 2]]


def _paths(v, prefix=()):
    out = [prefix]
    if isinstance(v, dict):
        for k, x in v.items():
            out += _paths(x, prefix + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += _paths(x, prefix + (i,))
    return out


def _get(v, path):
    for k in path:
        v = v[k]
    return v


def mutate_json(rng, text):
    """A mutated JSON document (text): structural or byte-level."""
    kind = rng.randrange(10)
    if kind == 0:  # bit flip
        b = bytearray(text.encode())
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == 1:  # truncation
        return text.encode()[: rng.randrange(len(text))]
    d = json.loads(text)
    paths = [p for p in _paths(d) if p]
    p = rng.choice(paths)
    parent, key = _get(d, p[:-1]), p[-1]
    if kind == 2:  # a huge integer in place of a number or anything
        parent[key] = "@@"
        return json.dumps(d).replace('"@@"', rng.choice(["9" * rng.choice([50, 5000, 100000]), "-" + "1" * 4400,
                                                          "1e999999", "-0.0", "1" + "0" * 400 + ".5"]))
    if kind == 3:  # deep nesting
        parent[key] = "@@"
        n = rng.choice([65, 1000, 100000])
        return json.dumps(d).replace('"@@"', "[" * n + "]" * n)
    if kind == 4 and isinstance(parent, dict):  # a field removed
        del parent[key]
        return json.dumps(d)
    if kind == 5 and isinstance(parent[key], (int, float)) and not isinstance(parent[key], bool):
        parent[key] = rng.choice([0, -parent[key], parent[key] * 1000, parent[key] + 0.5, float("nan")])
        return json.dumps(d)
    if kind == 6 and isinstance(parent[key], list):
        v = parent[key]
        parent[key] = rng.choice([v + v[-1:], v[:-1], v[::-1], [v]])
        return json.dumps(d)
    parent[key] = rng.choice(ODD_VALUES)  # type swap
    return json.dumps(d)


def _rezip(entries, compress=None):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an entry twice is one of the mutations
        for name, data in entries:
            zf.writestr(zipfile.ZipInfo(name), data, compress_type=compress.get(name, zipfile.ZIP_STORED)
                        if compress else zipfile.ZIP_STORED)
    return buf.getvalue()


def mutate_checkpoint_bytes(rng, raw):
    """A mutated checkpoint archive at the byte or zip-entry level."""
    kind = rng.randrange(7)
    if kind == 0:  # bit flips anywhere (zip headers, CRCs, data)
        b = bytearray(raw)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == 1:
        return raw[: rng.randrange(len(raw))]
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        entries = [(i.filename, zf.read(i)) for i in zf.infolist()]
    pkl = next(i for i, (n, _) in enumerate(entries) if n.endswith("data.pkl"))
    data = [i for i, (n, _) in enumerate(entries) if "/data/" in n]
    if kind == 2:  # data.pkl bytes flipped, cut or spliced (valid CRC)
        b = bytearray(entries[pkl][1])
        op = rng.randrange(3)
        if op == 0:
            for _ in range(rng.randint(1, 6)):
                i = rng.randrange(len(b))
                b[i] = rng.randrange(256)
        elif op == 1:
            b = b[: rng.randrange(len(b))]
        else:
            i = rng.randrange(len(b))
            b[i:i] = rng.choice([b"\x8e" + (1 << 40).to_bytes(8, "little"), b"(" * 10000, b"K\xff",
                                 b"J\xff\xff\xff\x7f", b"cos\nsystem\n", b"\x93"])
        entries[pkl] = (entries[pkl][0], bytes(b))
        return _rezip(entries)
    i = rng.choice(data)
    name, blob = entries[i]
    if kind == 3:  # a storage dropped
        del entries[i]
        return _rezip(entries)
    if kind == 4:  # a storage resized
        entries[i] = (name, rng.choice([blob[:-1], blob[: len(blob) // 2], blob + bytes(4), b""]))
        return _rezip(entries)
    if kind == 5:  # a storage compressed
        return _rezip(entries, {name: zipfile.ZIP_DEFLATED})
    entries.append(entries[i])  # a storage twice
    return _rezip(entries)


def mutate_checkpoint_object(rng, ck, torch):
    """The checkpoint's dict mutated, to be saved by torch.save (tensors that torch writes)."""
    w = ck["network_weights"]
    k = rng.choice(sorted(w))
    t = w[k]
    kind = rng.randrange(9)
    if kind == 0:
        del w[k]
    elif kind == 1:
        w[k] = torch.zeros(1).expand(rng.choice([1 << 20, 1 << 28]))  # stride 0: repeated elements
    elif kind == 2:
        w[k] = t.flatten()[: max(1, t.numel() // 2)]
    elif kind == 3:
        w[k] = t.transpose(0, -1) if t.dim() > 1 else t.half()
    elif kind == 4:
        w[k] = t.to(rng.choice([torch.float16, torch.float64, torch.int64, torch.uint8, torch.bool]))
    elif kind == 5:
        w[k] = rng.choice([1.0, "w", None, [t]])
    elif kind == 6:
        ck[rng.choice(["init_args", "trainer_name", "inference_allowed_mirroring_axes"])] = rng.choice(ODD_VALUES)
    elif kind == 7:
        w["extra." + k] = t
    else:
        big = torch.zeros(t.numel() * 2)
        w[k] = big[1:].as_strided(t.shape, t.stride(), 1) if t.numel() else t
    return ck


def make_cases(root, n, seed):
    """n mutated model folders under root: [(folder, folds, what)]."""
    import torch

    from swi import _nnunet_convert as conv

    rng = random.Random(seed)
    cases = []
    originals = {m: {"plans.json": (DATA / m / "plans.json").read_text(),
                     "dataset.json": (DATA / m / "dataset.json").read_text(),
                     "ck": (DATA / m / "fold_0" / "checkpoint_final.pth").read_bytes()} for m in MODELS}
    for i in range(n):
        m = MODELS[i % len(MODELS)]
        d = root / f"c{i:04d}"
        shutil.copytree(DATA / m, d, ignore=shutil.ignore_patterns("fold_1"))
        target = rng.choice(["plans.json", "dataset.json", "ck", "ck", "ckobj"])
        if target in ("plans.json", "dataset.json"):
            t = mutate_json(rng, originals[m][target])
            (d / target).write_bytes(t if isinstance(t, bytes) else t.encode())
        elif target == "ck":
            (d / "fold_0" / "checkpoint_final.pth").write_bytes(mutate_checkpoint_bytes(rng, originals[m]["ck"]))
        else:
            p = d / "fold_0" / "checkpoint_final.pth"
            torch.save(mutate_checkpoint_object(rng, conv.load_checkpoint(p), torch), str(p))
        cases.append((str(d), f"{target} (seed {seed}, case {i})"))
    return cases


# ---- the worker: every case through the converter's main, bounded -------------------
def worker(cases_file):
    import contextlib
    import resource
    import signal
    import time
    import traceback

    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))
    from swi import _nnunet_convert as conv

    class Hang(Exception):
        pass

    def alarm(*_):
        raise Hang()

    signal.signal(signal.SIGALRM, alarm)
    for line in open(cases_file):
        d, target = json.loads(line)
        err = io.StringIO()
        t0 = time.monotonic()
        signal.alarm(CASE_SECONDS)
        try:
            with contextlib.redirect_stderr(err):
                rc = conv.main([d, "--output", d + ".out", "--folds", "0", "-q"])
        except Hang:
            rc, err = "hang", io.StringIO(f"more than {CASE_SECONDS} s")
        except BaseException:  # what the command would show: a traceback
            rc = "traceback"
            err.write(traceback.format_exc())
        finally:
            signal.alarm(0)
        print(json.dumps({"case": d, "target": target, "rc": rc, "err": err.getvalue()[-3000:],
                          "s": round(time.monotonic() - t0, 3)}), flush=True)
        shutil.rmtree(d + ".out", ignore_errors=True)


def check(result):
    """'' when the outcome is one a user may see, else what is wrong."""
    rc, err = result["rc"], result["err"]
    if rc == 0:
        return "" if Path(result["case"] + ".out").exists() or "Traceback" not in err else "traceback"
    if rc != 1:
        return f"status {rc}: {err}"
    lines = err.strip().splitlines()
    if len(lines) != 1 or not lines[0].startswith(PREFIX) or "Traceback" in err or len(lines[0]) > 2000:
        return f"not one line: {err[:2000]}"
    return ""


def run_fuzz(tmp_path, n, seed, chunk=300):
    """n cases, made and run chunk at a time (the folders are removed after each chunk)."""
    import swi

    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(swi.__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    results, bad = [], []
    for start in range(0, n, chunk):
        root = tmp_path / f"chunk{start}"
        root.mkdir()
        cases = make_cases(root, min(chunk, n - start), seed * 1000003 + start)
        cf = root / "cases.jsonl"
        cf.write_text("".join(json.dumps(c) + "\n" for c in cases))
        r = subprocess.run([sys.executable, __file__, str(cf)], env=env, capture_output=True, text=True,
                           timeout=60 + len(cases) * CASE_SECONDS)
        got = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
        bad += [(res["case"], res["target"], why) for res in got for why in [check(res)] if why]
        if len(got) < len(cases):
            bad.append((cases[len(got)][0], cases[len(got)][1],
                        f"the worker died (status {r.returncode}): {r.stderr[-3000:]}"))
        results += got
        if bad:
            break
        shutil.rmtree(root)
    return results, bad


def test_convert_fuzz(tmp_path):
    import pytest

    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    n = int(os.environ.get("SWI_CONVERT_FUZZ_CASES", "240"))
    seed = int(os.environ.get("SWI_CONVERT_FUZZ_SEED", "1"))
    results, bad = run_fuzz(tmp_path, n, seed)
    ok = sum(1 for r in results if r["rc"] == 0)
    print(f"{len(results)} cases (seed {seed}): {ok} converted, {len(results) - ok} refused; "
          f"slowest {max((r['s'] for r in results), default=0)} s")
    assert not bad, "\n".join(f"{c} ({t}): {w}" for c, t, w in bad[:5])
    # the mutations reach past the first checks: some convert, some are refused
    assert ok > 0 and ok < len(results)


if __name__ == "__main__":
    worker(sys.argv[1])
