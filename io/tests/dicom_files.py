#!/usr/bin/env python3
"""dicom_files.py VOLUME_INFO WORK -- DICOM series made from pydicom's own test files
(Debian's python3-pydicom), hostile ones included: each is read by swi_io in a child of its
own, which must never die by a signal and must either give the volume or one line naming
the file and the DICOM field at fault. Real series read with the geometry pydicom gives.

Series are copies of one file with ImagePositionPatient shifted along the normal and
InstanceNumber/SOPInstanceUID changed (pydicom), some edited (BitsAllocated 1, 12, 32 over
16-bit data; PixelData cut short; a compressed syntax over raw pixels; a file cut short).
Exits 77 (skipped) without pydicom or its test files."""
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

FAILED = []

ABORT_SO = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
/* Whether to stick on this opening of a HANG_HERE file: always, or with STAND_IN_COUNT (a file
 * counting the openings, across processes) from opening STAND_IN_HANG_AT on. */
static int hang_now(void) {
    const char *count = getenv("STAND_IN_COUNT"), *at = getenv("STAND_IN_HANG_AT");
    if (!count) return 1;
    int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
    int fd = real(count, O_WRONLY | O_APPEND | O_CREAT, 0600);
    struct stat sb;
    int n = fd >= 0 && write(fd, "o", 1) == 1 && fstat(fd, &sb) == 0 ? (int)sb.st_size : 0;
    if (fd >= 0) close(fd);
    return at && n >= atoi(at);
}
static int pass(const char *name, const char *p, int f, va_list ap) {
    int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, name);
    if (p && strstr(p, "ABORT_HERE") && !(f & O_NONBLOCK)) abort();
    if (p && strstr(p, "HANG_HERE") && !(f & O_NONBLOCK) && hang_now())
        for (;;) pause();
    return real(p, f, (f & (O_CREAT | O_TMPFILE)) ? va_arg(ap, int) : 0);
}
int open(const char *p, int f, ...) { va_list ap; va_start(ap, f); int r = pass("open", p, f, ap); va_end(ap); return r; }
int open64(const char *p, int f, ...) { va_list ap; va_start(ap, f); int r = pass("open64", p, f, ap); va_end(ap); return r; }
static FILE *fpass(const char *name, const char *p, const char *m) {
    FILE *(*real)(const char *, const char *) = (FILE * (*)(const char *, const char *))dlsym(RTLD_NEXT, name);
    if (p && strstr(p, "ABORT_HERE")) {
        fputs("stand-in library: cannot go on\n", stderr);
        abort();
    }
    if (p && strstr(p, "HANG_HERE") && hang_now())
        for (;;) pause();
    return real(p, m);
}
FILE *fopen(const char *p, const char *m) { return fpass("fopen", p, m); }
FILE *fopen64(const char *p, const char *m) { return fpass("fopen64", p, m); }
"""


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILED.append(what)


def test_files():
    import pydicom.data
    d = os.path.join(os.path.dirname(pydicom.data.__file__), "test_files")
    return d if os.path.isfile(os.path.join(d, "CT_small.dcm")) else None


def make_series(work, name, src, n=4, edit=None, geometry=False, patch=None, cut=None):
    """n copies of src, each one step further along the slice normal."""
    import pydicom
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for k in range(n):
        ds = pydicom.dcmread(src)
        if geometry and "ImagePositionPatient" not in ds:
            ds.ImagePositionPatient = [0, 0, 0]
            ds.ImageOrientationPatient = [1, 0, 0, 0, 1, 0]
            ds.PixelSpacing = [1, 1]
        if edit:
            edit(ds)
        if "ImagePositionPatient" in ds and "ImageOrientationPatient" in ds:
            iop = np.array([float(x) for x in ds.ImageOrientationPatient])
            normal = np.cross(iop[:3], iop[3:])
            pos = np.array([float(x) for x in ds.ImagePositionPatient]) + k * 2.5 * normal
            ds.ImagePositionPatient = ["%.6f" % x for x in pos]
        ds.InstanceNumber = k + 1
        ds.SOPInstanceUID = pydicom.uid.generate_uid()
        path = os.path.join(d, "s%02d.dcm" % k)
        ds.save_as(path)
        if patch or cut:
            blob = open(path, "rb").read()
            if patch:
                assert blob.count(patch[0]) == 1, patch
                blob = blob.replace(patch[0], patch[1])
            if cut and k == 1:
                blob = blob[:len(blob) - cut]
            with open(path, "wb") as f:
                f.write(blob)
    return d


def pydicom_geometry(d):
    """Size and RAS affine of a series, by pydicom alone."""
    import pydicom
    sl = [pydicom.dcmread(os.path.join(d, f)) for f in sorted(os.listdir(d))]
    iop = np.array([float(x) for x in sl[0].ImageOrientationPatient])
    row, col = iop[:3], iop[3:]
    normal = np.cross(row, col)
    sl.sort(key=lambda s: float(np.dot([float(x) for x in s.ImagePositionPatient], normal)))
    p0 = np.array([float(x) for x in sl[0].ImagePositionPatient])
    p1 = np.array([float(x) for x in sl[1].ImagePositionPatient])
    dr, dc = float(sl[0].PixelSpacing[0]), float(sl[0].PixelSpacing[1])
    a = np.eye(4)
    a[:3, 0] = row * dc
    a[:3, 1] = col * dr
    a[:3, 2] = p1 - p0
    a[:3, 3] = p0
    a[:2, :] *= -1  # LPS -> RAS
    return (int(sl[0].Columns), int(sl[0].Rows), len(sl)), a


def run_info(info, d):
    """volume_info --read on d: (signal or None, status, output)."""
    try:
        r = subprocess.run([info, "--read", d], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None, "hang", ""
    sig = -r.returncode if r.returncode < 0 else None
    return sig, r.returncode, (r.stdout + r.stderr).strip()


def main():
    info, work = sys.argv[1], sys.argv[2]
    try:
        import pydicom  # noqa: F401
    except ImportError:
        print("SKIPPED: python3-pydicom not found (scripts/install-deps.sh installs it)")
        return 77
    t = test_files()
    if not t:
        print("SKIPPED: pydicom's test files not found")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    f = lambda name: os.path.join(t, name)  # noqa: E731

    def bits(b):
        def e(ds):
            ds.BitsAllocated = b
        return e

    def short(ds):
        ds.PixelData = ds.PixelData[:len(ds.PixelData) // 2]

    def no_ipp(ds):
        del ds.ImagePositionPatient

    def fip_only(ds):
        ds.FrameIncrementPointer = 0x3004000C
        ds.pop(0x00280008, None)

    def one_frame(ds):
        ds.NumberOfFrames = 1

    explicit, rle = b"1.2.840.10008.1.2.1\0", b"1.2.840.10008.1.2.5\0"
    # name -> (series dir, words the one-line refusal must hold)
    bad = {
        "rtdose_1frame": (make_series(work, "rtdose_1frame", f("rtdose_1frame.dcm")),
                          ["s0", "FrameIncrementPointer", "NumberOfFrames"]),
        "rtdose_rle_1frame": (make_series(work, "rtdose_rle_1frame", f("rtdose_rle_1frame.dcm")),
                              ["s0", "FrameIncrementPointer"]),
        "fip_without_frames": (make_series(work, "fip", f("CT_small.dcm"), edit=fip_only),
                               ["s0", "FrameIncrementPointer", "NumberOfFrames"]),
        "bits1": (make_series(work, "bits1", f("CT_small.dcm"), edit=bits(1)), ["s0", "BitsAllocated", "1"]),
        "bits12": (make_series(work, "bits12", f("CT_small.dcm"), edit=bits(12)), ["s0", "BitsAllocated", "12"]),
        "bits32_over_16": (make_series(work, "bits32", f("CT_small.dcm"), edit=bits(32)),
                           ["s0", "PixelData", "32768", "65536"]),
        "short_pixels": (make_series(work, "short", f("CT_small.dcm"), edit=short),
                         ["s0", "PixelData", "16384", "32768"]),
        "rle_over_raw": (make_series(work, "rle_raw", f("CT_small.dcm"), patch=(explicit, rle)),
                         ["s0", "compressed Transfer Syntax"]),
        "cut_in_padding": (make_series(work, "cut_padding", f("CT_small.dcm"), cut=30), ["s01.dcm", "truncated"]),
        "cut_mr_in_padding": (make_series(work, "cut_mr", f("MR_small.dcm"), cut=60), ["s01.dcm", "truncated"]),
        "no_position": (make_series(work, "no_ipp", f("CT_small.dcm"), edit=no_ipp),
                        ["s0", "ImagePositionPatient", "missing"]),
        # found by fuzz_dicom_headers: GDCM asserted on an image attribute of another VR
        "frames_vr_at": (make_series(work, "frames_at", f("CT_small.dcm"), edit=one_frame,
                                     patch=(b"\x28\x00\x08\x00IS", b"\x28\x00\x08\x00AT")),
                         ["s0", "NumberOfFrames", "VR AT"]),
    }
    for name, (d, words) in sorted(bad.items()):
        sig, rc, out = run_info(info, d)
        check(sig is None and rc == 0, "%s: read without a signal or a hang (%s)" %
              (name, signal.Signals(sig).name if sig else rc))
        lines = out.splitlines()
        check(len(lines) == 1 and " error " in lines[0] and all(w in lines[0] for w in words),
              "%s: one line naming the file and field (%s): %r" % (name, ", ".join(words), out[:400]))

    # a library that aborts while reading a slice (a stand-in preloaded: open() aborts on a
    # file named ABORT_HERE, unless opened non-blocking as swi's own preamble check does):
    # the reader's child dies, the process goes on and names the file
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc:
        src = os.path.join(work, "abort.c")
        with open(src, "w") as fh:
            fh.write(ABORT_SO)
        so = os.path.join(work, "abort.so")
        built = subprocess.run([cc, "-shared", "-fPIC", "-o", so, src, "-ldl"], capture_output=True).returncode == 0
        d = make_series(work, "aborts", f("CT_small.dcm"))
        os.rename(os.path.join(d, "s02.dcm"), os.path.join(d, "s02_ABORT_HERE.dcm"))
        env = dict(os.environ, LD_PRELOAD=so,
                   ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
        r = subprocess.run([info, "--read", d], capture_output=True, text=True, timeout=60, env=env) if built else None
        check(r is not None and r.returncode == 0 and len(r.stdout.splitlines()) == 1 and
              "s02_ABORT_HERE.dcm: a DICOM library (DCMTK or GDCM) died reading this file (Aborted): "
              "stand-in library: cannot go on" in r.stdout,
              "a library abort while reading a slice is one message naming it, with the library's last words: %r" %
              ((r.stdout + r.stderr)[:400] if r else "the stand-in did not build"))
        # the same library stuck for good on a file (HANG_HERE): with SWI_DICOM_STALL_SECONDS=2
        # the reader is ended and the series refused, naming the file, well before any hang guard
        d = make_series(work, "hangs", f("CT_small.dcm"))
        os.rename(os.path.join(d, "s02.dcm"), os.path.join(d, "s02_HANG_HERE.dcm"))

        def stuck(args, extra):
            """volume_info ARGS d with the stand-in, in a session of its own (a hang guard ends
            the stuck reader too): (completed process or None, seconds)."""
            t0 = time.time()
            if not built:
                return None, 0
            p = subprocess.Popen([info, *args, d], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=dict(env, SWI_DICOM_STALL_SECONDS="2", **extra), start_new_session=True)
            try:
                out, err = p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                out, err = p.communicate()
                err += "hung (30 s)"
            return subprocess.CompletedProcess([], p.returncode, out, err), time.time() - t0

        stuck_msg = "s02_HANG_HERE.dcm: the DICOM reader made no progress for 2 s; refused"
        r, took = stuck(["--read"], {})
        check(r is not None and r.returncode == 0 and took < 10 and len(r.stdout.splitlines()) == 1 and
              " error " in r.stdout and stuck_msg in r.stdout,
              "a library stuck on a slice's header: the series refused within 10 s (%.1f s) naming it: %r" %
              (took, (r.stdout + r.stderr)[:400] if r else "the stand-in did not build"))
        # stuck on its pixels only: the openings of the file while the headers are read are
        # counted (the series opened once), and the stand-in sticks on the first one after
        # both header readings of volume_info --read (its open, then its read's)
        count = os.path.join(work, "openings")
        if os.path.exists(count):
            os.remove(count)
        r, _ = stuck([], {"STAND_IN_COUNT": count, "STAND_IN_HANG_AT": "1000000"})
        heads = os.path.getsize(count) if os.path.exists(count) else 0
        if heads:
            os.remove(count)
        check(r is not None and " size " in r.stdout and heads > 0,
              "the stand-in counts the openings of a header reading (%d): %r" % (heads, r.stdout[:300] if r else ""))
        r, took = stuck(["--read"], {"STAND_IN_COUNT": count, "STAND_IN_HANG_AT": str(2 * heads + 1)})
        check(r is not None and r.returncode == 0 and took < 10 and " size " in r.stdout and
              " read-error " in r.stdout and stuck_msg in r.stdout,
              "a library stuck on a slice's pixels: the read refused within 10 s (%.1f s) naming it: %r" %
              (took, (r.stdout + r.stderr)[:400] if r else "the stand-in did not build"))
    else:
        print("note: no C compiler: the library-abort and library-hang cases are not run")

    # a single file, with or without the .dcm suffix: refused, pointing at the directory
    plain = os.path.join(work, "CT_small_copy")
    shutil.copy(f("CT_small.dcm"), plain)
    for one in (f("CT_small.dcm"), plain):
        sig, rc, out = run_info(info, one)
        check(sig is None and len(out.splitlines()) == 1 and "a single DICOM file" in out and "directory" in out,
              "%s: a single DICOM file is refused, naming the directory to give: %r" % (os.path.basename(one), out))

    # real series, read whole: the geometry pydicom gives, no library chatter
    good = {
        "CT_small": make_series(work, "ct", f("CT_small.dcm")),
        "MR_small_RLE": make_series(work, "mr_rle", f("MR_small_RLE.dcm")),
        "MR_small_bigendian": make_series(work, "mr_be", f("MR_small_bigendian.dcm")),
        "JPGExtended_12bit": make_series(work, "jpg12", f("JPGExtended.dcm"), geometry=True),
        "JPEG2000": make_series(work, "j2k", f("JPEG2000.dcm"), geometry=True),
    }
    for name, d in sorted(good.items()):
        sig, rc, out = run_info(info, d)
        lines = out.splitlines()
        check(sig is None and len(lines) == 1 and " size " in lines[0] and " sum " in lines[0],
              "%s: read, one line and no library output: %r" % (name, out[:300]))
        if len(lines) != 1 or " size " not in lines[0]:
            continue
        w = lines[0].split()
        size = tuple(int(x) for x in w[w.index("size") + 1:w.index("size") + 4])
        aff = np.array([float(x) for x in w[w.index("affine") + 1:w.index("affine") + 17]]).reshape(4, 4)
        psize, paff = pydicom_geometry(d)
        check(size == psize and np.allclose(aff, paff, atol=1e-4),
              "%s: size %s and affine as pydicom gives them (%s)" % (name, size, psize))
    if FAILED:
        print("%d check(s) failed" % len(FAILED))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
