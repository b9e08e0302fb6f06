#!/usr/bin/env python3
"""formats.py VOLUME_INFO VOLUME_CONVERT WORK [make DIR] -- NRRD, MetaImage and DICOM in
swi_io against independent readers.

One scan (an oblique 12x10x7 CT volume, int16 HU stored as uint16 with rescale slope 2 and
intercept -1024 in DICOM) is written by this script as NIfTI (nibabel), NRRD (.nrrd raw,
.nhdr + gzip data), MetaImage (.mha raw, .mhd + zlib .zraw) and a DICOM series (pydicom;
files named and numbered in shuffled order). swi_io must read from each the same sizes,
the same affine (nibabel's for the NIfTI file, the one pydicom's positions give for the
series) and bitwise the same voxels. What swi_io writes (.nii.gz, .nrrd, .mha) is read
back by nibabel and by the small NRRD/MetaImage parsers here. Hostile files and series
must be refused with a message naming them.

`make DIR` only writes the scan in the four formats into DIR (for the CLI tests)."""
import gzip
import os
import random
import shutil
import subprocess
import sys
import zlib

import nibabel as nib
import numpy as np

SHAPE = (12, 10, 7)
SPACING = np.array([0.7, 0.9, 2.5])
ORIGIN = np.array([-30.5, 12.25, 40.0])  # LPS
FLIP = np.diag([-1.0, -1.0, 1.0])        # LPS <-> RAS


def rot(ax, deg):
    t = np.deg2rad(deg)
    c, s = np.cos(t), np.sin(t)
    m = np.eye(3)
    i, j = [(1, 2), (0, 2), (0, 1)][ax]
    m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
    return m


DIRECTION = rot(2, 20) @ rot(0, 10)       # LPS, columns = axes i, j, k; det +1


def ras_affine(direction=DIRECTION, spacing=SPACING, origin=ORIGIN):
    a = np.eye(4)
    a[:3, :3] = FLIP @ direction @ np.diag(spacing)
    a[:3, 3] = FLIP @ origin
    return a


def scan(seed=3):
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 1000, size=SHAPE).astype(np.uint16)
    return raw, (raw.astype(np.int32) * 2 - 1024).astype(np.int16)


def ds(x):
    """A DICOM decimal string (at most 16 characters)."""
    s = repr(float(x))
    if len(s) > 16:
        s = ("%.10f" % x).rstrip("0")
    return s[:16]


# ---- writers (independent of ITK) -------------------------------------------------------
def write_nifti(path, hu):
    img = nib.Nifti1Image(hu, ras_affine())
    img.set_qform(ras_affine(), code=1)
    img.set_sform(ras_affine(), code=1)
    nib.save(img, path)


def nrrd_header(hu, extra):
    d = DIRECTION @ np.diag(SPACING)
    dirs = " ".join("(%r,%r,%r)" % tuple(d[:, a]) for a in range(3))
    return ("NRRD0004\ntype: short\ndimension: 3\nspace: left-posterior-superior\n"
            "sizes: %d %d %d\nspace directions: %s\nkinds: domain domain domain\n"
            "endian: little\nspace origin: (%r,%r,%r)\n" % (hu.shape + (dirs,) + tuple(ORIGIN))
            + extra)


def write_nrrd(path, hu):
    with open(path, "wb") as f:
        f.write(nrrd_header(hu, "encoding: raw\n\n").encode())
        f.write(hu.astype("<i2").tobytes(order="F"))


def write_nhdr(path, hu):
    data = os.path.basename(path)[:-5] + ".raw.gz"
    with open(path, "w") as f:
        f.write(nrrd_header(hu, "encoding: gzip\ndata file: %s\n\n" % data))
    with gzip.open(os.path.join(os.path.dirname(path), data), "wb") as f:
        f.write(hu.astype("<i2").tobytes(order="F"))


def mha_header(hu, compressed, size, datafile, etype="MET_SHORT", ndims=3, channels=1):
    tm = " ".join(repr(x) for x in DIRECTION.T.ravel())  # row a = axis a's direction
    h = ("ObjectType = Image\nNDims = %d\nBinaryData = True\nBinaryDataByteOrderMSB = False\n"
         "CompressedData = %s\n" % (ndims, "True" if compressed else "False"))
    if compressed:
        h += "CompressedDataSize = %d\n" % size
    h += ("TransformMatrix = %s\nOffset = %r %r %r\nElementSpacing = %r %r %r\n"
          "DimSize = %d %d %d\n" % ((tm,) + tuple(ORIGIN) + tuple(SPACING) + hu.shape))
    if channels != 1:
        h += "ElementNumberOfChannels = %d\n" % channels
    h += "ElementType = %s\nElementDataFile = %s\n" % (etype, datafile)
    return h


def write_mha(path, hu):
    data = hu.astype("<i2").tobytes(order="F")
    with open(path, "wb") as f:
        f.write(mha_header(hu, False, 0, "LOCAL").encode())
        f.write(data)


def write_mhd(path, hu):
    z = zlib.compress(hu.astype("<i2").tobytes(order="F"))
    name = os.path.basename(path)[:-4] + ".zraw"
    with open(path, "w") as f:
        f.write(mha_header(hu, True, len(z), name))
    with open(os.path.join(os.path.dirname(path), name), "wb") as f:
        f.write(z)


def write_dicom(d, raw, series_uid=None, shear=0.0, drop=(), shift=None, seed=5):
    """One CT series, files named and numbered in shuffled order."""
    import pydicom
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    ct = "1.2.840.10008.5.1.4.1.1.2"
    os.makedirs(d, exist_ok=True)
    study = generate_uid(entropy_srcs=["swi-study"])
    series = series_uid or generate_uid(entropy_srcs=["swi-series"])
    frame = generate_uid(entropy_srcs=["swi-frame"])
    nk = raw.shape[2]
    order = list(range(nk))
    random.Random(seed).shuffle(order)
    normal = DIRECTION[:, 2]
    for slot, k in enumerate(order):
        if k in drop:
            continue
        pos = ORIGIN + k * SPACING[2] * normal + k * shear * DIRECTION[:, 1]
        if shift and k == shift[0]:
            pos = pos + shift[1] * normal
        meta = FileMetaDataset()
        sop = generate_uid(entropy_srcs=["swi-sop", series, str(k)])
        meta.MediaStorageSOPClassUID = ct
        meta.MediaStorageSOPInstanceUID = sop
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        path = os.path.join(d, "IM%04d" % (slot * 7 % 97))
        f = FileDataset(path, {}, file_meta=meta, preamble=b"\0" * 128)
        f.is_little_endian = True
        f.is_implicit_VR = False
        f.SOPClassUID = ct
        f.SOPInstanceUID = sop
        f.Modality = "CT"
        f.PatientName = "Phantom^swi"
        f.PatientID = "swi"
        f.StudyInstanceUID = study
        f.SeriesInstanceUID = series
        f.FrameOfReferenceUID = frame
        f.SeriesNumber = 1
        f.InstanceNumber = nk - slot  # neither file order nor position order
        f.ImagePositionPatient = [ds(x) for x in pos]
        f.ImageOrientationPatient = [ds(x) for x in list(DIRECTION[:, 0]) + list(DIRECTION[:, 1])]
        f.PixelSpacing = [ds(SPACING[1]), ds(SPACING[0])]  # row spacing (along j), column (i)
        f.SliceThickness = ds(SPACING[2])
        f.Rows, f.Columns = raw.shape[1], raw.shape[0]
        f.SamplesPerPixel = 1
        f.PhotometricInterpretation = "MONOCHROME2"
        f.BitsAllocated, f.BitsStored, f.HighBit, f.PixelRepresentation = 16, 16, 15, 0
        f.RescaleSlope, f.RescaleIntercept, f.RescaleType = "2", "-1024", "HU"
        f.PixelData = np.ascontiguousarray(raw[:, :, k].T).astype("<u2").tobytes()
        f.save_as(path, write_like_original=False)
    return series


def make_all(d, raw, hu):
    os.makedirs(d, exist_ok=True)
    files = {
        "nifti": os.path.join(d, "scan.nii.gz"),
        "nrrd": os.path.join(d, "scan.nrrd"),
        "nhdr": os.path.join(d, "scan_gz.nhdr"),
        "mha": os.path.join(d, "scan.mha"),
        "mhd": os.path.join(d, "scan_z.mhd"),
        "dicom": os.path.join(d, "scan_dicom"),
    }
    write_nifti(files["nifti"], hu)
    write_nrrd(files["nrrd"], hu)
    write_nhdr(files["nhdr"], hu)
    write_mha(files["mha"], hu)
    write_mhd(files["mhd"], hu)
    write_dicom(files["dicom"], raw)
    return files


# ---- independent readers of what swi writes ----------------------------------------------
def read_nrrd(path):
    with open(path, "rb") as f:
        blob = f.read()
    head, _, data = blob.partition(b"\n\n")
    fields = {}
    for line in head.decode().splitlines()[1:]:
        if line.startswith("#") or ":" not in line:
            continue
        k, _, v = line.partition(":")
        fields[k.strip()] = v.strip().lstrip("=").strip()
    sizes = [int(x) for x in fields["sizes"].split()]
    vecs = [v for v in fields["space directions"].replace(")", ") ").split() if v != "none"]
    dirs = [np.array([float(x) for x in v.strip("()").split(",")]) for v in vecs]
    origin = np.array([float(x) for x in fields["space origin"].strip("()").split(",")])
    assert fields["space"] in ("left-posterior-superior", "LPS"), fields["space"]
    m = np.column_stack(dirs[:3])
    aff = np.eye(4)
    aff[:3, :3] = FLIP @ m
    aff[:3, 3] = FLIP @ origin
    if fields["encoding"] in ("gzip", "gz"):
        data = gzip.decompress(data)
    dt = {"unsigned char": "u1", "uchar": "u1", "uint8": "u1", "unsigned short": "<u2",
          "ushort": "<u2", "uint16": "<u2", "float": "<f4", "short": "<i2"}[fields["type"]]
    arr = np.frombuffer(data, dtype=dt)[:int(np.prod(sizes))].reshape(sizes, order="F")
    return arr, aff


def read_mha(path):
    with open(path, "rb") as f:
        blob = f.read()
    fields, pos = {}, 0
    while True:
        end = blob.index(b"\n", pos)
        k, _, v = blob[pos:end].decode().partition("=")
        fields[k.strip()] = v.strip()
        pos = end + 1
        if k.strip() == "ElementDataFile":
            break
    data = blob[pos:]
    nd = int(fields["NDims"])
    sizes = [int(x) for x in fields["DimSize"].split()]
    tm = np.array([float(x) for x in fields["TransformMatrix"].split()]).reshape(nd, nd)
    sp = np.array([float(x) for x in fields["ElementSpacing"].split()])
    off = np.array([float(x) for x in fields["Offset"].split()])
    aff = np.eye(4)
    aff[:3, :3] = FLIP @ tm.T[:3, :3] @ np.diag(sp[:3])
    aff[:3, 3] = FLIP @ off[:3]
    if fields.get("CompressedData", "False") == "True":
        data = zlib.decompress(data)
    dt = {"MET_UCHAR": "u1", "MET_USHORT": "<u2", "MET_FLOAT": "<f4", "MET_SHORT": "<i2"}[
        fields["ElementType"]]
    arr = np.frombuffer(data, dtype=dt)[:int(np.prod(sizes))].reshape(sizes, order="F")
    return arr, aff


def dicom_affine(d):
    """The affine the series' positions give, read with pydicom alone."""
    import pydicom
    sl = [pydicom.dcmread(os.path.join(d, f)) for f in sorted(os.listdir(d))]
    iop = np.array([float(x) for x in sl[0].ImageOrientationPatient])
    r, c = iop[:3], iop[3:]
    n = np.cross(r, c)
    sl.sort(key=lambda s: float(np.dot([float(x) for x in s.ImagePositionPatient], n)))
    p0 = np.array([float(x) for x in sl[0].ImagePositionPatient])
    p1 = np.array([float(x) for x in sl[1].ImagePositionPatient])
    step = float(np.dot(p1 - p0, n))
    ps = [float(x) for x in sl[0].PixelSpacing]
    aff = np.eye(4)
    aff[:3, :3] = FLIP @ np.column_stack([r * ps[1], c * ps[0], n * step])
    aff[:3, 3] = FLIP @ p0
    return aff


# ---- the checks -------------------------------------------------------------------------
def main():
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        raw, hu = scan()
        make_all(sys.argv[2], raw, hu)
        return 0
    info, conv, work = sys.argv[1:4]
    try:
        import pydicom  # noqa: F401
    except ImportError:
        print("SKIPPED: python3-pydicom not found (scripts/install-deps.sh installs it)")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    raw, hu = scan()
    files = make_all(work, raw, hu)
    bad = []

    def check(cond, what):
        if not cond:
            bad.append(what)
            print("FAIL", what)

    def swi_info(path):
        out = subprocess.run([info, path], capture_output=True, text=True, check=True).stdout
        f = out.split()
        if f[1] != "size":
            return None, out.strip()
        size = tuple(int(x) for x in f[2:5])
        aff = np.array([float(x) for x in f[f.index("affine") + 1:][:16]]).reshape(4, 4)
        return (size, aff), out.strip()

    def swi_voxels(path):
        dst = os.path.join(work, "voxels.f32")
        r = subprocess.run([conv, "--raw", path, dst], capture_output=True, text=True)
        if r.returncode != 0:
            return None, r.stdout.strip()
        return np.fromfile(dst, dtype=np.float32).reshape(SHAPE), ""

    expect = ras_affine()
    nib_aff = nib.load(files["nifti"]).affine
    check(np.allclose(nib_aff, expect, atol=1e-5), "nibabel reads the NIfTI file's affine")
    dcm_aff = dicom_affine(files["dicom"])
    check(np.allclose(dcm_aff, expect, atol=1e-6), "pydicom positions give the affine")
    ref = {"nifti": nib_aff, "dicom": dcm_aff}
    for name, path in files.items():
        got, line = swi_info(path)
        if got is None:
            check(False, "%s: swi_io refused it: %s" % (name, line))
            continue
        check(got[0] == SHAPE, "%s: size %s, expected %s" % (name, got[0], SHAPE))
        want = ref.get(name, expect)
        check(np.allclose(got[1], want, atol=1e-5),
              "%s: affine\n%s\nexpected\n%s" % (name, got[1], want))
        vox, msg = swi_voxels(path)
        check(vox is not None and np.array_equal(vox, hu.astype(np.float32)),
              "%s: voxels differ from the scan %s" % (name, msg))

    # writing: from a DICOM series (and from NRRD) to each output format
    for src in ("dicom", "nrrd", "nifti"):
        for ext in ("nii.gz", "nrrd", "mha"):
            out = os.path.join(work, "out_%s.%s" % (src, ext))
            r = subprocess.run([conv, files[src], out], capture_output=True, text=True)
            if r.returncode != 0:
                check(False, "write %s -> %s: %s" % (src, ext, r.stdout.strip()))
                continue
            if ext == "nii.gz":
                img = nib.load(out)
                arr, aff = np.asanyarray(img.dataobj), img.affine
                if src != "nifti":
                    check(img.header["sform_code"] == 1 and img.header["qform_code"] == 1,
                          "%s -> nii.gz: sform/qform codes" % src)
                    check(np.allclose(img.get_qform(), expect, atol=1e-4),
                          "%s -> nii.gz: the qform is the affine" % src)
            elif ext == "nrrd":
                arr, aff = read_nrrd(out)
            else:
                arr, aff = read_mha(out)
            check(np.allclose(aff, expect, atol=1e-4),
                  "%s -> %s: affine\n%s\nexpected\n%s" % (src, ext, aff, expect))
            check(arr.shape == SHAPE and np.array_equal(arr.astype(np.float32), hu.astype(np.float32)),
                  "%s -> %s: voxels" % (src, ext))
            got, line = swi_info(out)
            check(got is not None and np.allclose(got[1], expect, atol=1e-4),
                  "%s -> %s read back by swi_io: %s" % (src, ext, line))
    # labels written as labels: uint8 in every format
    out = os.path.join(work, "labels.mha")
    subprocess.run([conv, "--labels", files["nrrd"], out], check=True)
    check(read_mha(out)[0].dtype == np.uint8, "labels.mha is uint8")

    # ---- hostile files: refused, naming the file --------------------------------------
    hostile = {}

    def put(name, data):
        p = os.path.join(work, name)
        with open(p, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        hostile[p] = None
        return p

    good_nrrd = open(files["nrrd"], "rb").read()
    good_mha = open(files["mha"], "rb").read()
    put("trunc.nrrd", good_nrrd[:len(good_nrrd) - 100])
    put("trunc_head.nrrd", good_nrrd[:40])
    put("garbage.nrrd", "NRRD0004\ntype: banana\ndimension: 3\nsizes: 2 2 2\nencoding: raw\n\n")
    put("huge.nrrd", nrrd_header(np.zeros((1, 1, 1)), "encoding: raw\n\n")
        .replace("sizes: 1 1 1", "sizes: 100000 100000 100000"))
    put("negative.nrrd", nrrd_header(hu, "encoding: raw\n\n").replace("sizes: 12", "sizes: -12"))
    put("badgz.nrrd", nrrd_header(hu, "encoding: gzip\n\n").encode() + b"\x1f\x8b\x08\x00garbage")
    put("random.nrrd", os.urandom(3000))
    put("empty.nrrd", b"")
    put("vector.nrrd", "NRRD0004\ntype: short\ndimension: 4\nsizes: 3 4 4 4\nkinds: vector "
        "domain domain domain\nendian: little\nencoding: raw\n\n" + "\0" * 384)
    put("trunc.mha", good_mha[:len(good_mha) - 100])
    put("twod.mha", "ObjectType = Image\nNDims = 2\nDimSize = 12 10\nElementSpacing = 1 1\n"
        "ElementType = MET_SHORT\nElementDataFile = LOCAL\n" + "\0" * 240)
    put("rgb.mha", mha_header(hu, False, 0, "LOCAL", channels=3).encode() + b"\0" * (840 * 6))
    put("missing_data.mhd", mha_header(hu, False, 0, "nowhere.raw"))
    put("badz.mhd", mha_header(hu, True, 50, "badz.zraw"))
    put("badz.zraw", b"x" * 50)
    del hostile[os.path.join(work, "badz.zraw")]
    put("huge.mha", mha_header(hu, False, 0, "LOCAL").replace("DimSize = 12 10 7",
                                                             "DimSize = 99999 99999 99999"))
    put("random.mha", os.urandom(3000))
    # what hangs or corrupts ITK's MetaIO is refused before it sees the header
    put("no_ndims.mha", "ObjectType = Image\nDimSize = 2 2 2\nElementType = MET_SHORT\n"
        "ElementDataFile = LOCAL\n" + "\0" * 16)
    put("no_datafile.mha", "ObjectType = Image\nNDims = 3\nDimSize = 2 2 2\nTransformMatrix = 1 0")
    put("binary_header.mha", b"ObjectType = Image\nNDims = 3\nDimSize = 2 2 2\xb2\xd3\n"
        b"ElementType = MET_SHORT\nElementDataFile = LOCAL\n" + b"\0" * 16)
    put("many_values.mha", "ObjectType = Image\nNDims = 3\nDimSize = " + "2 " * 50 +
        "\nElementType = MET_SHORT\nElementDataFile = LOCAL\n" + "\0" * 16)
    # MetaIO reads past its buffers on these (found by fuzz_itk_headers)
    put("no_dimsize.mha", "ObjectType = Image\nNDims = 3\nElementType = MET_UCHAR\nElementDataFile = LOCAL\n" +
        "\0" * 24)
    put("no_elementtype.mha", "ObjectType = Image\nNDims = 3\nDimSize = 4 3 2\nElementDataFile = LOCAL\n" +
        "\0" * 24)
    # MetaIO formats a series' file name with snprintf, the name as the format (found by
    # fuzz_itk_headers: %n wrote through garbage)
    put("format_n.mhd", "ObjectType = Image\nNDims = 3\nDimSize = 8 3 3\nElementType = MET_UCHAR\n"
        "ElementDataFile = i%n.raw\n")
    put("format_s.mhd", "ObjectType = Image\nNDims = 3\nDimSize = 8 3 3\nElementType = MET_UCHAR\n"
        "ElementDataFile = s%03d%s.raw 1 3 1\n")

    def series_dir(name, **kw):
        d = os.path.join(work, name)
        write_dicom(d, raw, **kw)
        hostile[d] = None
        return d

    two = series_dir("two_series")
    write_dicom(os.path.join(work, "two_tmp"), raw[:, :, :3], series_uid="1.2.3.4.5.6.7")
    for f in sorted(os.listdir(os.path.join(work, "two_tmp"))):
        shutil.move(os.path.join(work, "two_tmp", f), os.path.join(two, "B" + f))
    series_dir("gap", drop=(3,))
    series_dir("uneven", shift=(3, 0.6))
    series_dir("tilted", shear=0.8)
    dup = series_dir("duplicate")
    first = sorted(os.listdir(dup))[0]
    shutil.copy(os.path.join(dup, first), os.path.join(dup, "copy_" + first))
    os.makedirs(os.path.join(work, "empty_dir"))
    hostile[os.path.join(work, "empty_dir")] = None
    corrupt = series_dir("corrupt_slice")
    victim = os.path.join(corrupt, sorted(os.listdir(corrupt))[2])
    blob = open(victim, "rb").read()
    with open(victim, "wb") as f:
        f.write(blob[:132] + os.urandom(400))
    trunc = series_dir("truncated_slice")
    victim = os.path.join(trunc, sorted(os.listdir(trunc))[1])
    blob = open(victim, "rb").read()
    with open(victim, "wb") as f:
        f.write(blob[:len(blob) - 60])
    expected_words = {
        "two_series": "more than one DICOM series", "gap": "missing",
        "uneven": "uneven slice spacing", "tilted": "tilted gantry",
        "duplicate": "same position", "empty_dir": "no DICOM files",
        "format_n.mhd": "one %d", "format_s.mhd": "one %d",
        "series_step0.mhd": "step is 0", "series_step_implied0.mhd": "step is 0",
        "series_step_neg.mhd": "step is -1", "series_few.mhd": "names 2 files for 3 slices",
        "series_missing.mhd": "missing", "series_short.mhd": "holds 10 bytes",
        "series_words.mhd": "whole numbers", "list_negative.mhd": "LIST 2D",
        "list_missing.mhd": "missing", "list_empty_line.mhd": "empty",
        "list_no_newline.mhd": "lacks its newline", "list_few.mhd": "names 2 files, and 3",
        "list_short.mhd": "holds 10 bytes",
        "nrrd_format_n.nhdr": "one %d", "nrrd_format_s.nhdr": "one %d", "nrrd_wide.nhdr": "width at most 11",
        "nrrd_long.nhdr": "first 1 MB",
    }
    # teem checks only a NRRD series' first conversion and leaves 10 characters for the number
    # (%99d overflowed its buffer)
    nhead = "NRRD0004\ntype: uint8\ndimension: 3\nsizes: 8 3 3\nencoding: raw\n"
    for name, spec in (("nrrd_format_n", "ok%n.raw 1 3 1"), ("nrrd_format_s", "ok%d%s.raw 1 3 1"),
                       ("nrrd_wide", "ok%99d.raw 1 3 1")):
        put(name + ".nhdr", nhead + "data file: " + spec + "\n")
    put("nrrd_long.nhdr", nhead + "# a comment\n" * 100000 + "data file: ok%n.raw 1 3 1\n")
    # numbered series and file lists whose files MetaIO would divide by zero for, loop on, or
    # read as zeros (a zero step raised SIGFPE: found by fuzz_itk_headers)
    for k in range(3):
        with open(os.path.join(work, "ok%d.raw" % (k + 1)), "wb") as f:
            f.write(bytes(range(24 * k, 24 * k + 24)))
    with open(os.path.join(work, "short1.raw"), "wb") as f:
        f.write(bytes(10))
    head = "ObjectType = Image\nNDims = 3\nDimSize = 8 3 3\nElementType = MET_UCHAR\n"
    for name, spec in (("series_step0", "ok%d.raw 1 3 0"), ("series_step_implied0", "ok%d.raw 1 3"),
                       ("series_step_neg", "ok%d.raw 3 1 -1"), ("series_few", "ok%d.raw 1 2 1"),
                       ("series_missing", "ok%d.raw 2 4 1"), ("series_short", "short%d.raw 1 3 0001"),
                       ("series_words", "ok%d.raw 1 3 1.5")):
        put(name + ".mhd", head + "ElementDataFile = " + spec + "\n")
    for name, spec, body in (("list_negative", "LIST -3", "ok1.raw\nok2.raw\nok3.raw\n"),
                             ("list_missing", "LIST", "ok1.raw\nok9.raw\nok3.raw\n"),
                             ("list_empty_line", "LIST 2D", "ok1.raw\n\nok3.raw\n"),
                             ("list_no_newline", "LIST", "ok1.raw\nok2.raw\nok3.raw"),
                             ("list_few", "LIST", "ok1.raw\nok2.raw\n"),
                             ("list_short", "LIST", "ok1.raw\nshort1.raw\nok3.raw\n")):
        put(name + ".mhd", head + "ElementDataFile = " + spec + "\n" + body)
    # ... and well-formed ones still read all their voxels
    with open(os.path.join(work, "oklist.mhd"), "w") as f:
        f.write(head + "ElementDataFile = LIST 2D\nok1.raw\nok2.raw\nok3.raw\n")
    with open(os.path.join(work, "okseries.mhd"), "w") as f:
        f.write(head + "ElementDataFile = ok%d.raw 1\n")
    with open(os.path.join(work, "oklocal.mha"), "wb") as f:
        f.write((head + "ElementDataFile = LOCAL\n").encode() + bytes(range(72)))
    subprocess.run([conv, "--raw", os.path.join(work, "oklocal.mha"), os.path.join(work, "l.f32")], check=True)
    want = np.fromfile(os.path.join(work, "l.f32"), dtype=np.float32)
    with open(os.path.join(work, "oklocal.nrrd"), "wb") as f:
        f.write((nhead + "\n").encode() + bytes(range(72)))
    subprocess.run([conv, "--raw", os.path.join(work, "oklocal.nrrd"), os.path.join(work, "n.f32")], check=True)
    nwant = np.fromfile(os.path.join(work, "n.f32"), dtype=np.float32)
    with open(os.path.join(work, "okseries.nhdr"), "w") as f:
        f.write(nhead + "data file: ok%01d.raw 1 3 1\n")
    r = subprocess.run([conv, "--raw", os.path.join(work, "okseries.nhdr"), os.path.join(work, "g.f32")],
                       capture_output=True, text=True)
    got = np.fromfile(os.path.join(work, "g.f32"), dtype=np.float32) if r.returncode == 0 else None
    check(got is not None and sorted(got.tolist()) == list(range(72)) and np.array_equal(got, nwant),
          "okseries.nhdr (a NRRD numbered series) reads its three files in order: " + r.stdout)
    for good in ("oklist.mhd", "okseries.mhd"):
        r = subprocess.run([conv, "--raw", os.path.join(work, good), os.path.join(work, "g.f32")],
                           capture_output=True, text=True)
        got = np.fromfile(os.path.join(work, "g.f32"), dtype=np.float32) if r.returncode == 0 else None
        check(got is not None and sorted(got.tolist()) == list(range(72)) and np.array_equal(got, want),
              "%s reads its three files in order, as the same voxels in one file: %s" % (good, r.stdout))
    # a numbered series of slice files (one %03d) is still read, slice by slice
    for k in range(3):
        with open(os.path.join(work, "ser%03d.raw" % (k + 1)), "wb") as f:
            f.write(bytes(range(24 * k, 24 * k + 24)))
    ser = os.path.join(work, "ser.mhd")
    with open(ser, "w") as f:
        f.write("ObjectType = Image\nNDims = 3\nDimSize = 8 3 3\nElementType = MET_UCHAR\n"
                "ElementDataFile = ser%03d.raw 1 3 1\n")
    r = subprocess.run([conv, "--raw", ser, os.path.join(work, "ser.f32")], capture_output=True, text=True)
    got = np.fromfile(os.path.join(work, "ser.f32"), dtype=np.float32) if r.returncode == 0 else None
    check(got is not None and got.size == 72 and sorted(got.tolist()) == list(range(72)),
          "a numbered MetaImage series (ser%03d.raw 1 3 1) reads its three files: " + r.stdout)
    # headers claiming far more voxels than their data hold: refused when opened, before
    # anything is allocated for them (teem and MetaIO allocated all the claimed voxels first)
    big = np.zeros((1024, 1024, 1024))
    claims = {
        "claim_raw.nrrd": (nrrd_header(big, "encoding: raw\n\n"), "truncated: the header claims 1073741824"),
        "claim_gz.nrrd": (nrrd_header(big, "encoding: gzip\n\n").encode() + gzip.compress(b"\0" * 64),
                          "deflate inflates at most 1032:1"),
        "claim_ascii.nrrd": (nrrd_header(big, "encoding: ascii\n\n") + "1 2 3\n", "truncated"),
        "claim_detached.nhdr": (nrrd_header(np.zeros((64, 64, 64)), "encoding: raw\ndata file: ok1.raw\n"),
                                "holds 24 bytes"),
        "claim_missing.nhdr": (nrrd_header(big, "encoding: raw\ndata file: nowhere.raw\n"), "missing"),
        "claim_raw.mha": (mha_header(big, False, 0, "LOCAL") + "\0" * 100, "truncated"),
        "claim_gz.mha": (mha_header(big, True, 30, "LOCAL").encode() + zlib.compress(b"\0" * 64),
                         "deflate inflates at most 1032:1"),
    }
    for name, (data, words) in claims.items():
        p = put(name, data)
        expected_words[name] = words
        line = subprocess.run([info, p], capture_output=True, text=True).stdout.strip()
        check(" error " in line, "%s: opened without an error (its claim is checked only when read): %s"
              % (name, line))
    for path in hostile:
        open_out = subprocess.run([info, path], capture_output=True, text=True)
        line = open_out.stdout.strip()
        if open_out.returncode < 0 or open_out.returncode > 1:
            check(False, "%s: volume_info crashed (%d)" % (path, open_out.returncode))
            continue
        if " error " in line:
            msg = line.split(" error ", 1)[1]
        else:
            r = subprocess.run([conv, "--raw", path, os.path.join(work, "h.f32")],
                               capture_output=True, text=True)
            if r.returncode < 0 or r.returncode > 1:
                check(False, "%s: reading crashed (%d)" % (path, r.returncode))
                continue
            if r.returncode == 0:
                check(False, "%s: a hostile input was read without an error" % path)
                continue
            msg = r.stdout.strip()
        check(path in msg or os.path.basename(path) in msg,
              "%s: the message does not name it: %s" % (path, msg))
        word = expected_words.get(os.path.basename(path))
        check(word is None or word in msg, "%s: message lacks '%s': %s" % (path, word, msg))
        print("ok   %-20s %s" % (os.path.basename(path), msg[:150]))

    if bad:
        print("%d check(s) failed" % len(bad))
        return 1
    print("all format checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
