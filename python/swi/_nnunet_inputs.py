"""The nnU-Net converter's inputs: a model folder's JSON files and checkpoints, read with
bounds and checked field by field before anything large is allocated.

Every refusal is a ConvertError whose message is one line, ``FILE: FIELD: what is wrong``.
What holds (docs/robustness.md, "The converter's inputs"):

- every file is opened without blocking and must be a regular file (a FIFO, a device or
  a directory under the expected name is refused, not waited on);
- a JSON file is at most MAX_JSON_BYTES, nested at most MAX_JSON_DEPTH deep, its integers
  at most MAX_INT_DIGITS digits; the fields the converter uses have the types and ranges
  checked here (check_plans, check_configuration, check_dataset);
- a checkpoint is read in two steps: its pickle is unpickled with an allow-list into
  placeholders (TensorMeta: dtype, shape, strides, offset, storage) with no tensor data,
  each checked against the archive's entry for its storage (present, stored size equal
  to the storage's, every element the view reaches inside it, no more elements than the
  storage holds); only the weights the network needs are then read, within a cap set by
  the memory available.
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import stat
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

# Real plans.json files are 5-50 KiB and 5-8 levels deep; dataset.json files of old
# datasets that list every training case reach a few hundred KiB.
MAX_JSON_BYTES = 4 << 20
MAX_JSON_DEPTH = 64
MAX_INT_DIGITS = 40
# A checkpoint's data.pkl is the dict without the tensors' bytes (real ones: under 1 MiB).
MAX_PICKLE_BYTES = 16 << 20
MAX_TENSOR_DIMS = 16
# arch_kwargs: nnU-Net plans use up to 8 stages, up to 512 features, kernels of 1 or 3.
MAX_STAGES = 16
MAX_FEATURES = 1 << 14
MAX_KERNEL = 15
MAX_STRIDE = 16
MAX_CONVS_PER_STAGE = 64
# a window of the patch runs through the network on export: 8 times the largest patches
# nnU-Net plans (2-D 2048 x 2048, 3-D 256 x 256 x 256)
MAX_PATCH_VOXELS = 1 << 27
MAX_LABEL = (1 << 31) - 1
MAX_CHANNELS = 1024


class ConvertError(Exception):
    """One line naming the file (and field) and the problem: control characters (a
    newline in a file or key name) are escaped so that it stays one line."""

    def __init__(self, msg: str):
        super().__init__("".join(c if c.isprintable() else repr(c)[1:-1] for c in str(msg)))


def _short(v: Any, n: int = 60) -> str:
    """repr of a value from a user's file, cut so that a message stays one short line."""
    try:
        s = repr(v)
    except (RecursionError, ValueError):
        s = f"<{type(v).__name__}>"
    s = s.replace("\n", " ").replace("\r", " ")
    return s if len(s) <= n else s[: n - 3] + "..."


def _key(k: str) -> str:
    """A storage's key (data/KEY) for a message: as it is when it is a plain name."""
    return k if k.isalnum() and len(k) <= 40 else _short(k)


# ---- files ------------------------------------------------------------------------
def open_regular(path: Path, what: str = "") -> io.BufferedReader:
    """path opened for reading, refused unless it is a regular file. O_NONBLOCK: opening
    a FIFO with no writer does not wait; the check is on the opened descriptor, so the
    file cannot be swapped between the check and the read."""
    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ConvertError(f"{path}: missing{what}") from None
    except OSError as e:
        raise ConvertError(f"{path}: cannot be opened ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                    else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a file")
            raise ConvertError(f"{path}: not a regular file ({kind})")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


# ---- JSON ---------------------------------------------------------------------------
class _BigInt:
    """An integer literal longer than MAX_INT_DIGITS, kept as text to name its field."""

    __slots__ = ("digits",)

    def __init__(self, text: str):
        self.digits = len(text.lstrip("-"))


def _parse_int(text: str):
    return int(text) if len(text) <= MAX_INT_DIGITS + 1 else _BigInt(text)


def _scan(v: Any) -> Optional[str]:
    """The first field of a parsed document that is too deep or holds a _BigInt."""
    stack: List[Tuple[Any, str, int]] = [(v, "", 1)]
    while stack:
        x, w, d = stack.pop()
        if isinstance(x, _BigInt):
            return f"{w}: an integer of {x.digits} digits (at most {MAX_INT_DIGITS})"
        if isinstance(x, (dict, list)):
            if d > MAX_JSON_DEPTH:
                return f"{w}: nested more than {MAX_JSON_DEPTH} deep"
            items = x.items() if isinstance(x, dict) else enumerate(x)
            stack.extend((val, (f"{w}.{k}" if w else str(k)) if isinstance(x, dict) else f"{w}[{k}]", d + 1)
                         for k, val in items)
    return None


def read_json(path: Path) -> dict:
    """A JSON object from path, within the size and depth bounds above."""
    with open_regular(path, " (a trained nnU-Net model folder has it)") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_JSON_BYTES:
            raise ConvertError(f"{path}: {size} bytes, more than a model folder's JSON has (at most "
                               f"{MAX_JSON_BYTES >> 20} MiB)")
        try:
            raw = f.read(MAX_JSON_BYTES + 1)
        except OSError as e:
            raise ConvertError(f"{path}: cannot be read ({e.strerror or e})") from None
    if len(raw) > MAX_JSON_BYTES:
        raise ConvertError(f"{path}: more than {MAX_JSON_BYTES >> 20} MiB, more than a model folder's JSON has")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConvertError(f"{path}: not UTF-8 text (byte {e.start})") from None
    try:
        v = json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as e:
        raise ConvertError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except RecursionError:
        raise ConvertError(f"{path}: nested more than {MAX_JSON_DEPTH} deep") from None
    except (ValueError, MemoryError) as e:
        raise ConvertError(f"{path}: not readable JSON ({type(e).__name__})") from None
    if not isinstance(v, dict):
        raise ConvertError(f"{path}: not a JSON object")
    bad = _scan(v)
    if bad:
        raise ConvertError(f"{path}: {bad}")
    return v


# ---- fields -------------------------------------------------------------------------
def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class _Fields:
    """Checks on one file's fields; each refusal is ``FILE: FIELD: what is wrong``."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, field: str, what: str):
        raise ConvertError(f"{self.path}: {field}: {what}")

    def int_in(self, v, field: str, lo: int, hi: int) -> int:
        if not _is_int(v) or not lo <= v <= hi:
            self.fail(field, f"{_short(v)} is not an integer in {lo}..{hi}")
        return v

    def ints(self, v, field: str, lo: int, hi: int, n: Optional[int] = None, scalar_ok: bool = False):
        """A list of integers in lo..hi (n of them when given), or one when scalar_ok."""
        if scalar_ok and _is_int(v):
            return self.int_in(v, field, lo, hi)
        if not isinstance(v, list) or (n is not None and len(v) != n):
            self.fail(field, f"{_short(v)} is not a list of " + (f"{n} " if n is not None else "")
                      + f"integers in {lo}..{hi}")
        for i, x in enumerate(v):
            self.int_in(x, f"{field}[{i}]", lo, hi)
        return v

    def str_or_none(self, v, field: str):
        if v is not None and not isinstance(v, str):
            self.fail(field, f"{_short(v)} is not a string")

    def obj_or_none(self, v, field: str):
        if v is not None and not isinstance(v, dict):
            self.fail(field, f"{_short(v)} is not an object")


def check_plans(plans: dict, path: Path) -> None:
    """plans.json's top level: the fields the converter reads, before any is used."""
    c = _Fields(path)
    confs = plans.get("configurations")
    if not isinstance(confs, dict):
        c.fail("configurations", "missing or not an object")
    for name, conf in confs.items():
        if not isinstance(conf, dict):
            c.fail(f"configurations.{name}", "not an object")
        if "inherits_from" in conf and not isinstance(conf["inherits_from"], str):
            c.fail(f"configurations.{name}.inherits_from", f"{_short(conf['inherits_from'])} is not a string")
    for k in ("dataset_name", "plans_name", "image_reader_writer", "label_manager"):
        c.str_or_none(plans.get(k), k)
    for k in ("transpose_forward", "transpose_backward"):
        v = plans.get(k)
        if not isinstance(v, list) or len(v) != 3 or not all(_is_int(i) for i in v) or sorted(v) != [0, 1, 2]:
            c.fail(k, f"{_short(v)} is not a permutation of 0, 1, 2")
    props = plans.get("foreground_intensity_properties_per_channel",
                      plans.get("foreground_intensity_properties_by_modality"))
    if props is not None:
        if not isinstance(props, dict):
            c.fail("foreground_intensity_properties_per_channel", "not an object")
        for ch, p in props.items():
            if not isinstance(p, dict):
                c.fail(f"foreground_intensity_properties_per_channel.{ch}", "not an object")


def check_configuration(conf: dict, name: str, path: Path) -> None:
    """One configuration (inherits_from applied): what the converter reads from it."""
    c = _Fields(path)
    f = f"configurations.{name}"
    patch = conf.get("patch_size")
    if not isinstance(patch, list) or len(patch) not in (2, 3):
        c.fail(f"{f}.patch_size", f"{_short(patch)} is not 2 or 3 positive integers")
    c.ints(patch, f"{f}.patch_size", 1, MAX_PATCH_VOXELS)
    if math.prod(patch) > MAX_PATCH_VOXELS:
        c.fail(f"{f}.patch_size", f"{patch}: {math.prod(patch)} voxels, more than {MAX_PATCH_VOXELS}")
    sp = conf.get("spacing")
    if not isinstance(sp, list) or len(sp) != len(patch):
        c.fail(f"{f}.spacing", f"{_short(sp)} is not {len(patch)} numbers (one per patch_size axis)")
    for i, s in enumerate(sp):
        if not _is_num(s) or not math.isfinite(s) or s <= 0:
            c.fail(f"{f}.spacing[{i}]", f"{_short(s)} is not a positive finite number")
    for k in ("normalization_schemes", "use_mask_for_norm"):
        v = conf.get(k)
        if not isinstance(v, list) or len(v) > MAX_CHANNELS:
            c.fail(f"{f}.{k}", f"{_short(v)} is not a list (one entry per channel)")
    for i, s in enumerate(conf["normalization_schemes"]):
        if not isinstance(s, str):
            c.fail(f"{f}.normalization_schemes[{i}]", f"{_short(s)} is not a string")
    for i, s in enumerate(conf["use_mask_for_norm"]):
        if not isinstance(s, bool):
            c.fail(f"{f}.use_mask_for_norm[{i}]", f"{_short(s)} is not true or false")
    for k in ("resampling_fn_data", "resampling_fn_probabilities", "resampling_fn_seg"):
        c.str_or_none(conf.get(k), f"{f}.{k}")
        c.obj_or_none(conf.get(k + "_kwargs"), f"{f}.{k}_kwargs")
    c.str_or_none(conf.get("previous_stage"), f"{f}.previous_stage")
    arch = conf.get("architecture")
    if not isinstance(arch, dict) or not isinstance(arch.get("network_class_name"), str) \
            or not isinstance(arch.get("arch_kwargs"), dict):
        return  # the converter names what is missing (nnU-Net before v2.2)
    _check_arch_kwargs(c, arch["arch_kwargs"], f"{f}.architecture.arch_kwargs")


def _check_arch_kwargs(c: _Fields, kw: dict, f: str) -> None:
    """Types and ranges of what the network is built from (_nnunet_nets names the rest)."""
    n = c.int_in(kw.get("n_stages"), f"{f}.n_stages", 1, MAX_STAGES)
    c.ints(kw.get("features_per_stage"), f"{f}.features_per_stage", 1, MAX_FEATURES, n, scalar_ok=True)
    for k, hi in (("kernel_sizes", MAX_KERNEL), ("strides", MAX_STRIDE)):
        v = kw.get(k)
        if _is_int(v):
            c.int_in(v, f"{f}.{k}", 1, hi)
            continue
        if not isinstance(v, list) or len(v) != n:
            c.fail(f"{f}.{k}", f"{_short(v)} must have {n} entries (one per stage)")
        for i, e in enumerate(v):
            c.ints(e, f"{f}.{k}[{i}]", 1, hi, scalar_ok=True)
    for k, m in (("n_conv_per_stage", n), ("n_blocks_per_stage", n), ("n_conv_per_stage_decoder", n - 1)):
        if k in kw:
            c.ints(kw[k], f"{f}.{k}", 1, MAX_CONVS_PER_STAGE, m, scalar_ok=True)
    if kw.get("stem_channels") is not None:
        c.int_in(kw["stem_channels"], f"{f}.stem_channels", 1, MAX_FEATURES)
    for k in ("conv_op", "norm_op", "dropout_op", "nonlin", "block"):
        c.str_or_none(kw.get(k), f"{f}.{k}")
    for k in ("conv_bias", "deep_supervision", "nonlin_first"):
        if kw.get(k) is not None and not isinstance(kw[k], bool):
            c.fail(f"{f}.{k}", f"{_short(kw[k])} is not true or false")
    for k in ("norm_op_kwargs", "nonlin_kwargs", "dropout_op_kwargs"):
        c.obj_or_none(kw.get(k), f"{f}.{k}")
    for k, v in (kw.get("norm_op_kwargs") or {}).items():
        if k in ("affine", "track_running_stats") and not isinstance(v, bool):
            c.fail(f"{f}.norm_op_kwargs.{k}", f"{_short(v)} is not true or false")
        if k == "eps" and not (_is_num(v) and math.isfinite(v) and v > 0):
            c.fail(f"{f}.norm_op_kwargs.eps", f"{_short(v)} is not a positive finite number")
        if k == "momentum" and v is not None and not (_is_num(v) and math.isfinite(v)):
            c.fail(f"{f}.norm_op_kwargs.momentum", f"{_short(v)} is not a finite number or null")
    for k, v in (kw.get("nonlin_kwargs") or {}).items():
        if k == "inplace" and not isinstance(v, bool):
            c.fail(f"{f}.nonlin_kwargs.inplace", f"{_short(v)} is not true or false")
        if k in ("negative_slope", "alpha") and not (_is_num(v) and math.isfinite(v)):
            c.fail(f"{f}.nonlin_kwargs.{k}", f"{_short(v)} is not a finite number")


def check_dataset(ds: dict, path: Path) -> None:
    """dataset.json: the fields the converter reads, their types and ranges."""
    c = _Fields(path)
    labels = ds.get("labels")
    if isinstance(labels, dict):
        for k, v in labels.items():
            vs = v if isinstance(v, list) else [v]
            for i, x in enumerate(vs):
                if _is_int(x) and x > MAX_LABEL:
                    c.fail(f"labels.{k}", f"{x} is more than {MAX_LABEL}")
    order = ds.get("regions_class_order")
    if order is not None:
        c.ints(order, "regions_class_order", 0, MAX_LABEL)
    names = ds.get("channel_names", ds.get("modality"))
    if isinstance(names, dict):
        if len(names) > MAX_CHANNELS:
            c.fail("channel_names", f"{len(names)} channels, more than {MAX_CHANNELS}")
        for k, v in names.items():
            if not isinstance(v, str):
                c.fail(f"channel_names.{k}", f"{_short(v)} is not a string")
    c.str_or_none(ds.get("file_ending"), "file_ending")


# ---- checkpoints ----------------------------------------------------------------------
# A checkpoint is a zip of data.pkl (the pickled dict) and data/KEY (each storage's bytes).
# torch.load would unpickle whatever data.pkl names; here data.pkl goes through an
# Unpickler that knows only what a checkpoint holds and makes placeholders for tensors.
STORAGE_DTYPES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16",
    "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
}
_ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
             "int8": 1, "uint8": 1, "bool": 1}
_ALLOWED = {
    ("collections", "OrderedDict"),
    ("torch", "device"),
    ("torch", "Size"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "slice"),
}


class _NoState:
    """Placeholders take no pickle BUILD (it would set their fields)."""

    __slots__ = ()

    def __setstate__(self, state):
        raise pickle.UnpicklingError("a tensor placeholder given a state")


class _StorageType(_NoState):
    __slots__ = ("dtype",)

    def __init__(self, dtype: str):
        self.dtype = dtype


class StorageRef(_NoState):
    __slots__ = ("key", "dtype", "numel")

    def __init__(self, key: str, dtype: str, numel: int):
        self.key, self.dtype, self.numel = key, dtype, numel


class TensorMeta(_NoState):
    """A tensor as the pickle describes it; no data until Checkpoint.tensor."""

    __slots__ = ("storage", "offset", "shape", "stride", "param")

    def __init__(self, storage, offset, shape, stride):
        self.storage, self.offset, self.shape, self.stride, self.param = storage, offset, shape, stride, False

    @property
    def dtype(self) -> str:
        return self.storage.dtype if isinstance(self.storage, StorageRef) else "?"

    def numel(self) -> int:
        return math.prod(self.shape)


def _rebuild_tensor(storage, offset, size, stride, *rest):
    return TensorMeta(storage, offset, size, stride)


def _rebuild_parameter(data, *rest):
    if isinstance(data, TensorMeta):
        data.param = True
    return data


def _latin1(text, encoding="latin1"):
    # pickle protocol 2 spells bytes (numpy scalars' payloads) as _codecs.encode(s, 'latin1')
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode is only allowed as latin1 bytes")
    return text.encode("latin1")


class _Unpickler(pickle.Unpickler):
    def __init__(self, f):
        super().__init__(f, encoding="utf-8")
        self._storages: Dict[str, StorageRef] = {}

    def find_class(self, module, name):
        if module == "__builtin__":  # protocol 2 spells builtins the Python 2 way
            module = "builtins"
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(STORAGE_DTYPES[name])
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor
        if module == "torch._utils" and name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
            return _rebuild_parameter
        if (module, name) == ("_codecs", "encode"):
            return _latin1
        if (module, name) in _ALLOWED or (module.startswith("numpy") and name.endswith("DType")):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{_short(module, 80)}.{_short(name, 80)} is not something a checkpoint needs")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str) and _is_int(pid[4])):
            raise pickle.UnpicklingError(f"unknown persistent id {_short(pid)}")
        key, dtype, numel = pid[2], pid[1].dtype, pid[4]
        ref = self._storages.get(key)
        if ref is None:
            ref = self._storages[key] = StorageRef(key, dtype, numel)
        elif ref.dtype != dtype or ref.numel != numel:
            raise pickle.UnpicklingError(f"storage data/{_key(key)} is named as two different storages")
        return ref


def _walk(obj, where: str):
    """(path, TensorMeta) for every placeholder in what a checkpoint's pickle built."""
    stack = [(obj, where)]
    seen = set()
    while stack:
        x, w = stack.pop()
        if isinstance(x, TensorMeta):
            yield w, x
        elif isinstance(x, (dict, list, tuple)):
            if id(x) in seen:
                continue
            seen.add(id(x))
            items = x.items() if isinstance(x, dict) else enumerate(x)
            stack.extend((v, f"{w}.{k}" if w else str(k)) for k, v in items)


def available_memory() -> int:
    """Bytes this process may still take: MemAvailable, or the address-space limit."""
    avail = None
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            avail = 1 << 34
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            with open("/proc/self/statm", "rb") as f:
                used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            avail = min(avail, max(0, soft - used))
    except (ImportError, OSError, ValueError, IndexError, AttributeError):
        pass
    return avail


class Archive:
    """What torch.save wrote (zip format), inspected: obj is the unpickled object with
    TensorMeta placeholders, every one checked against the archive; materialize reads
    the tensors."""

    def __init__(self, path: Path, what: str = ""):
        self.path = path
        self._f = open_regular(path, what)
        try:
            self._inspect()
            self._check()
        except BaseException:
            self._f.close()
            raise

    def _check(self):
        pass

    def close(self):
        self._f.close()

    def __del__(self):
        f = getattr(self, "_f", None)
        if f is not None:
            f.close()

    def _fail(self, what: str):
        raise ConvertError(f"{self.path}: {what}")

    def _inspect(self):
        try:
            self._zf = zipfile.ZipFile(self._f)
            infos = {i.filename: i for i in self._zf.infolist()}
        except Exception:  # zipfile raises many kinds on a damaged directory (struct.error, ...)
            self._fail("not a PyTorch checkpoint archive (saved by torch < 1.6, or damaged)")
        names = [n for n in infos if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(names) != 1:
            self._fail("not a PyTorch checkpoint (no single data.pkl in the archive)")
        self._prefix = names[0][: -len("data.pkl")]
        self._infos = infos
        pkl = infos[names[0]]
        if pkl.file_size > MAX_PICKLE_BYTES:
            self._fail(f"data.pkl: {pkl.file_size} bytes, more than a checkpoint's (at most "
                       f"{MAX_PICKLE_BYTES >> 20} MiB)")
        bo = infos.get(f"{self._prefix}byteorder")
        try:
            if bo is not None and (bo.file_size > 16 or self._zf.read(bo).strip() != b"little"):
                self._fail("a big-endian checkpoint is not supported")
            raw = self._zf.read(pkl)
        except ConvertError:
            raise
        except Exception as e:  # BadZipFile (CRC), zlib.error, NotImplementedError (method), ...
            self._fail(f"data.pkl: cannot be read from the archive ({type(e).__name__}: {_short(str(e))})")
        try:
            obj = _Unpickler(io.BytesIO(raw)).load()
        except pickle.UnpicklingError as e:
            self._fail(f"refused to unpickle: {_short(str(e), 200)}")
        except Exception as e:  # what the allowed callables raise on bad arguments, a truncated stream
            self._fail(f"not a readable PyTorch checkpoint ({type(e).__name__}: {_short(str(e))})")
        self.obj = obj
        for where, t in _walk(obj, ""):
            self._check_tensor(where, t)

    def _storage_bytes(self, ref: StorageRef) -> int:
        return ref.numel * _ITEMSIZE[ref.dtype]

    def _check_tensor(self, where: str, t: TensorMeta):
        """The view lies in its storage, the storage is its entry's size: nothing is read yet."""
        bad = lambda what: self._fail(f"tensor {where}: {what}")  # noqa: E731
        if not isinstance(t.storage, StorageRef):
            bad("not backed by a storage of the archive")
        ref = t.storage
        if not (_is_int(t.offset) and isinstance(t.shape, tuple) and isinstance(t.stride, tuple)
                and len(t.shape) == len(t.stride) <= MAX_TENSOR_DIMS
                and all(_is_int(i) for i in t.shape + t.stride)):
            bad(f"size {_short(t.shape)}, stride {_short(t.stride)}, offset {_short(t.offset)} do not describe "
                "a tensor")
        if t.offset < 0 or any(i < 0 for i in t.shape + t.stride):
            bad(f"size {list(t.shape)}, stride {list(t.stride)}, offset {t.offset}: negative")
        if ref.numel < 0:
            bad(f"storage data/{_key(ref.key)}: {ref.numel} elements")
        info = self._infos.get(f"{self._prefix}data/{ref.key}")
        if info is None:
            bad(f"storage data/{_key(ref.key)} is missing from the archive")
        nbytes = ref.numel * _ITEMSIZE[ref.dtype]
        if info.file_size != nbytes:
            bad(f"storage data/{_key(ref.key)} holds {info.file_size} bytes, the pickle says {ref.numel} "
                f"{ref.dtype} elements ({nbytes} bytes)")
        if info.compress_type != zipfile.ZIP_STORED:
            bad(f"storage data/{_key(ref.key)} is compressed (torch.save stores tensors as they are)")
        n = t.numel()
        if n:
            last = t.offset + sum((s - 1) * st for s, st in zip(t.shape, t.stride))
            if last >= ref.numel:
                bad(f"size {list(t.shape)}, stride {list(t.stride)}, offset {t.offset} reach element {last}, "
                    f"its storage data/{_key(ref.key)} has {ref.numel}")
        if n > max(ref.numel, 1):
            bad(f"{n} elements from a storage of {ref.numel}: repeated elements are not a checkpoint's")

    def materialize(self, obj, where: str = ""):
        """obj with every TensorMeta replaced by the tensor (shared storages read once)."""
        import torch

        cache: Dict[str, Any] = {}

        def tensor(t: TensorMeta, w: str):
            ref = t.storage
            s = cache.get(ref.key)
            if s is None:
                dtype = getattr(torch, ref.dtype)
                try:
                    raw = self._zf.read(f"{self._prefix}data/{ref.key}")
                except Exception as e:  # BadZipFile (CRC), OSError, ...
                    self._fail(f"tensor {w}: its storage cannot be read ({type(e).__name__}: {_short(str(e))})")
                if len(raw) != ref.numel * _ITEMSIZE[ref.dtype]:
                    self._fail(f"tensor {w}: its storage changed while it was read")
                s = cache[ref.key] = (torch.frombuffer(bytearray(raw), dtype=dtype) if raw
                                      else torch.empty(0, dtype=dtype))
            return torch.as_strided(s, tuple(t.shape), tuple(t.stride), int(t.offset)).clone()

        def walk(x, w):
            if isinstance(x, TensorMeta):
                return tensor(x, w)
            if isinstance(x, dict):
                out = type(x)() if type(x) is not dict else {}
                for k, v in x.items():
                    out[k] = walk(v, f"{w}.{k}" if w else str(k))
                return out
            if isinstance(x, list):
                return [walk(v, f"{w}.{i}") for i, v in enumerate(x)]
            if isinstance(x, tuple):
                return tuple(walk(v, f"{w}.{i}") for i, v in enumerate(x))
            return x

        return walk(obj, where)


class Checkpoint(Archive):
    """An nnU-Net checkpoint inspected. Indexing it gives the dict's entries;
    network_weights comes back as tensors, read then (one fold at a time)."""

    def _check(self):
        obj = self.obj
        if not isinstance(obj, dict):
            self._fail(f"not an nnU-Net checkpoint (a {type(obj).__name__}, not a dict)")
        for k in ("network_weights", "init_args", "trainer_name"):
            if k not in obj:
                self._fail(f"not an nnU-Net checkpoint (no '{k}')")
        w = obj["network_weights"]
        if not isinstance(w, dict) or not all(isinstance(k, str) and isinstance(v, TensorMeta) for k, v in w.items()):
            self._fail("network_weights: not a dict of tensors by name")
        if not isinstance(obj["init_args"], dict) or not isinstance(obj["init_args"].get("configuration"), str):
            self._fail("init_args.configuration: missing or not a string")
        if not isinstance(obj["trainer_name"], str) or len(obj["trainer_name"]) > 256:
            self._fail(f"trainer_name: {_short(obj['trainer_name'])} is not a name")
        if len(obj["init_args"]["configuration"]) > 256:
            self._fail(f"init_args.configuration: {_short(obj['init_args']['configuration'])} is not a name")
        m = obj.get("inference_allowed_mirroring_axes")
        if m is not None and (not isinstance(m, (list, tuple)) or len(m) > 3 or not all(_is_int(a) for a in m)):
            self._fail(f"inference_allowed_mirroring_axes: {_short(m)} is not a list of axes")
        self.weights_bytes = sum(self._storage_bytes(t.storage) + t.numel() * _ITEMSIZE[t.dtype]
                                 for t in w.values())

    def __getitem__(self, k):
        if k == "network_weights":
            return self.materialize(self.obj["network_weights"], "network_weights")
        return self.obj[k]

    def get(self, k, default=None):
        return self[k] if k in self.obj else default

    def __contains__(self, k):
        return k in self.obj

    def weight_shapes(self) -> Dict[str, Tuple[int, ...]]:
        return {k: tuple(t.shape) for k, t in self.obj["network_weights"].items()}


def inspect_checkpoints(paths: List[Tuple[str, Path]]) -> List[Checkpoint]:
    """Every fold's checkpoint inspected; their weights together within the memory cap
    (half of what is available: the network's own copy takes as much again)."""
    cks: List[Checkpoint] = []
    try:
        for f, p in paths:
            cks.append(Checkpoint(p, f" (fold {f})"))
        cap = available_memory() // 2
        for ck in cks:
            if ck.weights_bytes > cap:
                ck._fail(f"network_weights: {ck.weights_bytes} bytes to read, more than half the memory "
                         f"available ({cap * 2} bytes)")
    except BaseException:
        for ck in cks:
            ck.close()
        raise
    return cks
