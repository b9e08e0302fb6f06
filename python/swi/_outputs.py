"""The output rules of the pipeline library for the package's own writers (swi.report,
swi.dask, the nnU-Net converter), so that every door keeps the rules of ``swi segment``
(docs/robustness.md, "File rules at every door"):

- an output is never an input, inside one or around one, under any name or link
  (``check_apart``: the library's swi_job_outputs_apart);
- an existing output is replaced only with force, and only when it is what swi writes
  (``check_store``: swi_store_check_output; a folder: the writer's own test);
- an output appears whole: written under a temporary name beside it and moved into place
  (``output_file``: swi_job_output_begin/commit; a folder: ``publish_dir``), and a new
  output is never put over one that another run made meanwhile;
- a failed or interrupted writer leaves everything as it was.

The library's functions come through swi._swi where this build has the pipeline library;
otherwise the same rules run here (a build of the core alone).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
from typing import Callable, Iterator, Optional, Sequence, Tuple

from . import _swi

Named = Sequence[Tuple[str, str]]  # (option, path), as the command's messages name them

_C = hasattr(_swi, "outputs_apart")


def _file_part(name: str) -> str:
    """A store name's file: FILE.h5 of FILE.h5:/path; others as they are."""
    m = re.match(r"^(.*\.(?:h5|hdf5)):/", name)
    return m.group(1) if m else name


def _relation(out: str, inp: str) -> str:
    """'same', 'inside' (out below inp), 'contains' (inp below out) or ''; existing paths by
    device and inode, every path by the real path of its longest existing part."""
    o, i = _file_part(out), _file_part(inp)
    try:
        if os.path.exists(o) and os.path.exists(i) and os.path.samefile(o, i):
            return "same"
    except OSError:
        pass
    ro, ri = os.path.realpath(o), os.path.realpath(i)
    if ro == ri:
        return "same"
    if ro.startswith(ri.rstrip(os.sep) + os.sep):
        return "inside"
    if ri.startswith(ro.rstrip(os.sep) + os.sep):
        return "contains"
    return ""


def check_apart(inputs: Named, outputs: Named) -> None:
    """Raise ValueError when an output is an input (any name, link or hard link), lies
    inside one or holds one, or two outputs are one."""
    ins = [(str(a), os.fspath(b)) for a, b in inputs if b is not None]
    outs = [(str(a), os.fspath(b)) for a, b in outputs if b is not None]
    if _C:
        msg = _swi.outputs_apart(ins, outs)
        if msg:
            raise ValueError(msg)
        return
    for k, (oo, op) in enumerate(outs):
        for io, ip in ins:
            r = _relation(op, ip)
            if r == "same":
                raise ValueError(f"{oo} {op} is the same file as {io} {ip}; swi never writes over its inputs, "
                                 "--force or not (choose another output name)")
            if r == "inside":
                raise ValueError(f"{oo} {op} lies inside {io} {ip}; swi never writes into its inputs, --force or "
                                 "not (choose an output outside it)")
            if r == "contains":
                raise ValueError(f"{oo} {op} contains {io} {ip}; swi never writes over its inputs, --force or not "
                                 "(choose an output elsewhere)")
        for jo, jp in outs[:k]:
            if _relation(op, jp):
                raise ValueError(f"{oo} {op} and {jo} {jp} are one file or lie one inside another; give each "
                                 "output its own place")


_ZARR_KEY = re.compile(r"^[0-9][0-9.]*$")


def _zarr_array_only(path: str) -> Optional[str]:
    """Why the folder is not a Zarr v2 array of the kind swi writes (None: it is one)."""
    meta = False
    for root, dirs, files in os.walk(path, followlinks=False):
        top = root == path
        for d in dirs:
            if not re.match(r"^[0-9]+$", d) or os.path.islink(os.path.join(root, d)):
                return f"{os.path.join(root, d)}, which is not part of a Zarr v2 array"
        for f in files:
            p = os.path.join(root, f)
            if os.path.islink(p):
                return f"{p}, which is not part of a Zarr v2 array"
            if top and f == ".zarray":
                meta = True
            elif not ((top and f == ".zattrs") or f.startswith((".swi-", ".tmp-")) or _ZARR_KEY.match(f)):
                return f"{p}, which is not part of a Zarr v2 array"
    return None if meta else "no .zarray"


def check_store(name: str, force: bool) -> None:
    """Refuse an existing store output as the command's store writer does: FileExistsError
    unless force, and (force or not) when it is not a store of the kind swi writes. A name
    the library does not read as a store (no .zarr suffix) is taken as a Zarr v2 array."""
    if _C and os.fspath(name).rstrip("/").endswith(".zarr"):
        msg = _swi.store_check_output(os.fspath(name), bool(force))
        if msg:
            raise FileExistsError(msg)
        return
    if not os.path.lexists(name):
        return
    if os.path.islink(name) or not os.path.isdir(name):
        raise FileExistsError(f"{name}: exists and is not a Zarr array that swi writes (it is a link or a file); "
                              "swi replaces only its own kind of store, --force or not")
    if not os.listdir(name):
        return
    why = _zarr_array_only(name)
    if why:
        raise FileExistsError(f"{name}: exists and is not a Zarr array that swi writes ({why}); swi replaces "
                              "only its own kind of store, --force or not: remove it or name another output")
    if not force:
        raise FileExistsError(f"{name}: already exists (use --force to overwrite)")


@contextlib.contextmanager
def output_file(path: str, force: bool) -> Iterator[int]:
    """A file output written through the pipeline's rules: yields the descriptor of a
    temporary beside path (the caller writes it and closes it); on leaving the block the
    temporary is moved over path (fsync, rename), on an exception removed. An existing
    path is refused without force, and always when it is no regular file."""
    path = os.fspath(path)
    if _C:
        handle, fd = _swi.output_begin(path, bool(force))
        try:
            yield fd
        except BaseException:
            _swi.output_abort(handle)
            raise
        _swi.output_commit(handle)
        return
    if os.path.lexists(path) and (not force or os.path.islink(path) or not os.path.isfile(path)):
        raise FileExistsError(f"{path}: exists" + ("" if force else " (use force=True to replace it)") +
                              ("" if not force else " and is no regular file"))
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".swi-", dir=folder)
    try:
        yield fd
        m = os.umask(0)
        os.umask(m)
        os.chmod(tmp, 0o666 & ~m)
        if force:
            os.replace(tmp, path)
        else:  # never over a file that appeared meanwhile
            os.link(tmp, path)
            os.unlink(tmp)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


Identity = Optional[Tuple[int, int]]


def _identity(path: str) -> Identity:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def claim_dir(final: str, force: bool, why_not_ours: Callable[[str], Optional[str]]) -> Identity:
    """Check a folder output before writing it: absent (None), or with force an existing
    folder that `why_not_ours` accepts (it returns None for a folder this writer made, else
    why not), whose identity is returned for publish_dir. FileExistsError otherwise."""
    ident = _identity(final)
    if ident is None:
        return None
    if not force:
        raise FileExistsError(f"{final}: exists (use force to replace it)")
    why = why_not_ours(final)
    if why:
        raise FileExistsError(f"{final}: exists and is not what swi writes here ({why}); replaced only when it "
                              "is, --force or not: remove it or name another output")
    return ident


def publish_dir(work: str, final: str, old: Identity, why_not_ours: Callable[[str], Optional[str]]) -> None:
    """Move the finished folder `work` (beside final) to `final` in one step. old: what
    claim_dir returned. A new output (old None) never goes over one that another run made
    meanwhile: that run keeps it and this one is refused (FileExistsError). A replaced one
    (old) must still be that folder and still the writer's own; it is moved aside, the new
    one in, then removed. On a refusal work is left for the caller to remove."""
    if old is None:
        try:
            os.rename(work, final)  # fails on a folder that is not empty, a file
        except OSError as e:
            if e.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise FileExistsError(f"{final}: another run created it meanwhile; not replaced (an output is "
                                      "written by one run)") from None
            raise
        return
    if _identity(final) != old or why_not_ours(final):
        raise FileExistsError(f"{final}: changed by another run meanwhile; not replaced")
    parent, leaf = os.path.split(os.path.abspath(final))
    aside = tempfile.mkdtemp(prefix=f".{leaf}.swi-old-", dir=parent)
    os.rename(final, os.path.join(aside, leaf))
    try:
        os.rename(work, final)
    except BaseException:
        os.rename(os.path.join(aside, leaf), final)
        os.rmdir(aside)
        raise
    shutil.rmtree(aside, ignore_errors=True)
