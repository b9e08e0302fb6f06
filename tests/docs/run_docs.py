#!/usr/bin/env python3
"""Every fenced code block of the manual, run as printed.

    python3 tests/docs/run_docs.py SOURCE_DIR BUILD_DIR [FILE.md[:LINE] ...]

Takes each block of README.md, docs/*.md, python/README.md and export/README.md (or the
files named; FILE.md:LINE only the block opening at that line) and, in a fresh folder
holding the inputs the examples name (fixtures.py: small volumes, models with cards,
nnU-Net model folders, stores, a DICOM series), runs it:

  ```sh       with bash -e, the build's `swi` first on PATH
  ```python   as a script, with the python of a venv holding the wheel built from BUILD_DIR
  ```c        a program (with main): compiled against the build tree and run;
              a fragment: compiled inside the function of the prelude its marker names
  ```text / ```json    listings and file formats: not run
An unmarked fence (```) fails: say what it is. A line `<!-- docs-test: WHAT -->` just
before a block changes how it runs:

  skip (why)        not run (a GPU, a cluster, a huge download, the build itself)
  local             run in its local form: `mpirun` oversubscribes this machine, `sbatch
                    --array=A-B --wrap CMD` runs CMD once per index here, `/lustre/` is a
                    folder of the run's own
  continue          a python block run after the previous python block of its page (their
                    code as one script: the page's names carry over)
  fails             the block must exit non-zero, printing on stderr each of its comment
                    lines `# swi ...` (the error the page shows)
  fragment NAME     a C fragment compiled into tests/docs/prelude_NAME.c
  makes PATH...     the block makes these (a converted model folder): the inputs' copies
                    are removed first
  needs MODULE      a python block skipped, saying so, when MODULE does not import

Exit status 0 when every block passed or was skipped, 1 otherwise; with no ONNX Runtime
in the build (the command cannot run a model) it prints why and exits 77 (ctest: skipped).
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARK = re.compile(r"^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
RUN_LANGS = {"sh", "python", "c", "cmake"}
LISTING_LANGS = {"text", "json"}
TIMEOUT = 120


class Block:
    def __init__(self, path, line, lang, code, mark):
        self.path, self.line, self.lang, self.code, self.mark = path, line, lang, code, mark

    @property
    def name(self):
        return f"{self.path}:{self.line}"


def blocks_of(root: Path, rel: str):
    lines = (root / rel).read_text().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i
        mark = None
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0:
            mm = MARK.match(lines[j])
            if mm:
                mark = mm.group(1)
        body = []
        i += 1
        while i < len(lines) and not FENCE.match(lines[i]):
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            i += 1
        if i >= len(lines):
            raise SystemExit(f"{rel}:{start + 1}: a code block that is never closed")
        out.append(Block(rel, start + 1, lang, "\n".join(body) + "\n", mark))
        i += 1
    return out


def pages(root: Path):
    names = ["README.md"] + sorted(f"docs/{p.name}" for p in (root / "docs").glob("*.md"))
    names += [n for n in ("python/README.md", "export/README.md") if (root / n).is_file()]
    return names


def build_wheel(root: Path, build: Path, tmp: Path) -> Path:
    """The wheel from BUILD_DIR, installed with --no-deps into a fresh venv over the system's
    site packages (numpy, torch, nibabel, dask), as python/wheel_check.py does."""
    env = dict(os.environ, SWI_BUILD_DIR=str(build))
    env.pop("PYTHONPATH", None)
    py = sys.executable
    subprocess.run([py, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "--no-index",
                    root / "python", "-w", tmp / "dist"], env=env, check=True, stdout=subprocess.DEVNULL)
    wheels = list((tmp / "dist").glob("swi-*.whl"))
    assert len(wheels) == 1, wheels
    subprocess.run([py, "-m", "venv", "--system-site-packages", tmp / "venv"], check=True)
    vpy = tmp / "venv" / "bin" / "python"
    subprocess.run([vpy, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheels[0]], env=env,
                   check=True)
    return vpy


SBATCH = r'''
sbatch() {  # docs-test local form: each array task run here, one after another
    local array="" wrap="" a
    while [ $# -gt 0 ]; do
        case "$1" in
            --array=*) array="${1#--array=}" ;;
            --wrap) shift; wrap="$1" ;;
            --wrap=*) wrap="${1#--wrap=}" ;;
        esac
        shift
    done
    local lo="${array%-*}" hi="${array#*-}"
    for a in $(seq "$lo" "$hi"); do SLURM_ARRAY_TASK_ID=$a bash -ec "$wrap" || return 1; done
}
'''


def sh_script(b: Block, mpi: bool) -> str:
    code = b.code
    pre = "set -e\n"
    if b.mark and b.mark.startswith("local"):
        code = code.replace("/lustre/", "lustre/")
        pre += "mkdir -p lustre\n" + SBATCH
        if not mpi or not shutil.which("mpirun"):
            pre += 'mpirun() { echo "docs-test: no mpirun, or swi built without MPI: not run: mpirun $*"; }\n'
    return pre + code + "wait\n"


def c_source(b: Block) -> str:
    if b.mark and b.mark.startswith("fragment"):
        prelude = (HERE / f"prelude_{b.mark.split()[1]}.c").read_text()
        includes = "".join(line + "\n" for line in b.code.split("\n") if line.startswith("#include"))
        body = "".join(line + "\n" for line in b.code.split("\n") if not line.startswith("#include"))
        return includes + prelude.replace("/* BODY */", body)
    return b.code


def run_c(b: Block, work: Path, build: Path, root: Path, env: dict):
    src = work / "example.c"
    src.write_text(c_source(b))
    ort = root / ".deps" / "onnxruntime"
    inc = ["-I", root / "include", "-I", root / "pipeline", "-I", root / "io", "-I", ort / "include"]
    if b.mark and b.mark.startswith("fragment"):
        # a fragment leaves the error checks out, as its page says
        cmd = ["cc", "-std=c11", "-Wall", "-Werror", "-Wno-unused-result", "-c", src, "-o", work / "example.o",
               *inc]
        return [cmd]
    cmd = ["cc", "-std=c11", "-Wall", "-Werror", src, *inc, build / "lib" / "libswi.a", "-lm", "-lpthread",
           "-o", work / "example"]
    return [cmd, [work / "example"]]


def run_block(b, work, ctx):
    """(status, detail): status 'pass', 'fail' or 'skip'."""
    env = ctx["env"]
    mark = b.mark or ""
    if mark.startswith("skip"):
        return "skip", mark[4:].strip() or "(no reason given)"
    if mark.startswith("makes"):  # what the block makes must not be there before it
        for made in mark.split()[1:]:
            shutil.rmtree(work / made, ignore_errors=True)
    if b.lang == "sh":
        (work / "block.sh").write_text(sh_script(b, ctx["mpi"]))
        cmds = [["bash", work / "block.sh"]]
    elif b.lang == "python":
        if mark.startswith("needs"):
            mod = mark.split()[1]
            r = subprocess.run([ctx["python"], "-c", f"import {mod}"], capture_output=True, env=env)
            if r.returncode:
                return "skip", f"the python module {mod} is not installed"
        code = b.code
        if mark.startswith("continue"):
            code = ctx["last_python"] + code
        (work / "block.py").write_text(code)
        cmds = [[ctx["python"], work / "block.py"]]
    elif b.lang == "c":
        cmds = run_c(b, work, ctx["build"], ctx["root"], env)
    else:
        return "fail", f"```{b.lang} blocks cannot be run: mark it <!-- docs-test: skip (why) -->"
    out = ""
    for cmd in cmds:
        # a session of its own, so that a block that hangs is ended with everything it started
        p = subprocess.Popen([str(c) for c in cmd], cwd=work, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            stdout, stderr = p.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return "fail", f"timed out after {TIMEOUT} s"
        r = subprocess.CompletedProcess(cmd, p.returncode, stdout, stderr)
        out += r.stdout + r.stderr
        if mark.startswith("fails"):
            if r.returncode == 0:
                return "fail", "exited 0 where the page shows an error\n" + out
            # the error as the page prints it, in the block's comment lines ("# swi ...: ...")
            for want in re.findall(r"^# (swi .*)$", b.code, re.M):
                if want not in r.stderr:
                    return "fail", f"stderr lacks the page's {want!r}\n" + out
            return "pass", out
        if r.returncode:
            return "fail", f"exit status {r.returncode}\n" + out
        if "not streamed" in out and "requires_grad" not in b.code:
            return "fail", "the example meant to stream did not\n" + out
    return "pass", out


def main() -> int:
    root, build = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    only = sys.argv[3:]
    swi = build / "swi"
    if not swi.is_file():
        print(f"docs_examples: {swi} not built")
        return 1
    info = subprocess.run([swi, "--version"], capture_output=True, text=True).stdout
    if not re.search(r"ONNX Runtime: \d", info):
        print("docs_examples: skipped: this build has no ONNX Runtime, and the examples run ONNX models")
        return 77
    # the optional parts of the command the pages use: without one, the pages cannot run as printed
    for feature in ("NIfTI", "PNG", "DICOM \\(ITK\\)", "Zarr", "export"):
        if not re.search(rf"^\s*[^:\n]*{feature}[^:\n]*: yes", info, re.M):
            print(f"docs_examples: skipped: this build of swi has no {feature.replace(chr(92), '')} support "
                  f"(swi --version), which the pages' examples use")
            return 77
    mpi = bool(re.search(r"^\s*MPI: yes", info, re.M))

    todo, bad = [], []
    for page in pages(root):
        for b in blocks_of(root, page):
            if only and not any(o == b.path or o == b.name for o in only):
                continue
            if b.lang in LISTING_LANGS:
                continue
            if b.lang not in RUN_LANGS:
                bad.append(f"{b.name}: a ```{b.lang or ''} block: say what it is (```text for a listing) "
                           "or mark it <!-- docs-test: ... -->")
                continue
            todo.append(b)
    for line in bad:
        print("FAIL", line)

    keep = os.environ.get("SWI_DOCS_KEEP")
    tmp = Path(tempfile.mkdtemp(prefix="swi-docs-"))
    try:
        t0 = time.time()
        reuse = os.environ.get("SWI_DOCS_REUSE")  # a kept folder's wheel and inputs (iterating on pages)
        vpy = Path(reuse) / "venv" / "bin" / "python" if reuse else build_wheel(root, build, tmp)
        print(f"docs_examples: wheel built and installed ({time.time() - t0:.0f} s)", flush=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SWI_", "PYTHON"))}
        env.update(PATH=f"{build}:{vpy.parent}:{env.get('PATH', '/usr/bin:/bin')}",
                   # `swi convert` runs the python that has the swi package: the venv's
                   SWI_PYTHON=str(vpy),
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1", MPLBACKEND="Agg")
        fixtures = Path(reuse) / "fixtures" if reuse else tmp / "fixtures"
        t0 = time.time()
        if not reuse:
            subprocess.run([vpy, HERE / "fixtures.py", root, fixtures], env=env, check=True)
        print(f"docs_examples: inputs made ({time.time() - t0:.0f} s)", flush=True)
        ctx = dict(env=env, python=vpy, build=build, root=root, last_python="", mpi=mpi)
        counts = {"pass": 0, "fail": len(bad), "skip": 0}
        last_page = None
        for n, b in enumerate(todo):
            if b.path != last_page:
                ctx["last_python"], last_page = "", b.path
            work = tmp / f"run{n:03d}"
            shutil.copytree(fixtures, work, symlinks=True)
            t0 = time.time()
            status, detail = run_block(b, work, ctx)
            if b.lang == "python" and status != "skip":
                ctx["last_python"] = (ctx["last_python"] if (b.mark or "").startswith("continue") else "") + b.code
            counts[status] += 1
            print(f"{status.upper():4} {b.name} ({b.lang}, {time.time() - t0:.1f} s)"
                  + (f": {detail}" if status == "skip" else ""), flush=True)
            if status == "fail" or (os.environ.get("SWI_DOCS_VERBOSE") and detail.strip()):
                print("     " + detail.rstrip().replace("\n", "\n     ")[-4000:], flush=True)
            if not keep:
                shutil.rmtree(work, ignore_errors=True)
        print(f"docs_examples: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
        return 1 if counts["fail"] else 0
    finally:
        if keep:
            print(f"docs_examples: kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
