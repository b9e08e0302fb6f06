"""Build swi._swi: the C extension with libswi's core, its pipeline (swi.segment,
swi.segment_folder, swi.plan_job), the readers and writers and the review page (swi.report).

The libraries are built with the project's own CMake build (its flags live there), into
$SWI_BUILD_DIR or <repo>/build-python. Set SWI_SOURCE_DIR when building from a copy of
python/ outside the repository.

The wheel carries what is not a system library, as manylinux wheels do: ONNX Runtime (and
any other shared library found outside the system's folders) in ``swi.libs/`` beside the
package, found through an ``$ORIGIN`` run path set with patchelf, and NiiVue's browser build
in ``swi/niivue/``. System libraries (niftilib, ITK, HDF5, ...) stay outside: the wheel
records which Debian package gives each, and ``import swi`` names the package of one that is
missing. SWI_PIPELINE=0 builds a core-only wheel (sliding_window_inference and plan; numpy
alone), on purpose only: a build without the pipeline library is otherwise an error.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = Path(os.environ.get("SWI_SOURCE_DIR", HERE.parent)).resolve()
BUILD = Path(os.environ.get("SWI_BUILD_DIR", ROOT / "build-python")).resolve()
JOBS = os.environ.get("SWI_JOBS", "2")
# Where the dynamic loader finds a library without help: these stay outside the wheel.
SYSTEM_DIRS = ("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/")


def with_pipeline():
    v = os.environ.get("SWI_PIPELINE", "1")
    if v not in ("0", "1"):
        sys.exit(f"swi: SWI_PIPELINE must be 0 (a core-only wheel) or 1, not {v!r}")
    return v == "1"


def ldd(path):
    """{soname: resolved path or None} of the libraries the dynamic loader loads for path."""
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=True).stdout
    libs = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (not found|(\S+) \(0x[0-9a-f]+\))", line)
        if m:
            libs[m.group(1)] = m.group(3)
    return libs


def debian_package(path):
    """The Debian package that installed path, or None."""
    for p in (path, os.path.realpath(path)):
        r = subprocess.run(["dpkg-query", "-S", p], capture_output=True, text=True)
        if r.returncode == 0 and ":" in r.stdout:
            return r.stdout.split(":", 1)[0].split(",")[0].strip()
    return None


class BuildWithCore(build_ext):
    """Builds the libraries with CMake first, then the extension against them, then carries
    what the extension needs into the package."""

    def run(self):
        if not (ROOT / "include" / "swi.h").is_file():
            sys.exit(f"swi: libswi sources not found at {ROOT} (set SWI_SOURCE_DIR)")
        if not (BUILD / "CMakeCache.txt").is_file():
            subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(BUILD), "-DCMAKE_BUILD_TYPE=Release",
                                   "-DBUILD_TESTING=OFF"])
        subprocess.check_call(["cmake", "--build", str(BUILD), "--target", "swi_static", "-j", JOBS])
        lib = BUILD / "lib" / "libswi.a"
        if not lib.is_file():
            sys.exit(f"swi: {lib} was not built")
        pipeline = with_pipeline()
        link = self.pipeline_link() if pipeline else []
        for ext in self.extensions:
            ext.include_dirs.append(str(ROOT / "include"))
            if pipeline:
                ext.sources += ["src/pipeline.c", "src/job_spec.c", "src/folder.c", "src/outputs.c"]
                ext.include_dirs += [str(ROOT / "pipeline"), str(ROOT / "io")]
                defs = self.pipeline_defs()
                ext.define_macros += defs
                if ("SWI_HAVE_REPORT", "1") in defs:
                    ext.sources.append("src/report.c")
                    ext.include_dirs.append(str(ROOT / "report"))
                # archives in a group: their order among themselves does not matter
                ext.extra_link_args += ["-Wl,--start-group"] + link + [str(lib), "-Wl,--end-group"]
            else:
                ext.extra_objects.append(str(lib))
            ext.depends.append(str(lib))
        # A wheel is built whole each time: an extension left from another configuration (a
        # core-only build, another build folder) is never taken for this one.
        self.force = True
        super().run()
        pkg = Path(self.build_lib) / "swi"
        self.carry(pkg, pipeline)

    def pipeline_defs(self):
        f = BUILD / "python" / "pipeline-defs.txt"
        if not f.is_file():
            sys.exit(f"swi: {f} is missing (configure {BUILD} again)")
        defs = []
        for line in f.read_text().split("\n"):
            if line.strip():
                name, _, value = line.strip().partition("=")
                defs.append((name, value or "1"))
        return defs

    def pipeline_link(self):
        """The pipeline library's link line from the CMake build's python/pipeline-link.txt
        (archives, shared libraries, flags, as CMake would link it); shared libraries outside
        the system's folders are carried into the wheel afterwards (carry)."""
        link = BUILD / "python" / "pipeline-link.txt"
        if not link.is_file():
            sys.exit(f"swi: the build at {BUILD} has no pipeline library ({link} is missing): install what it "
                     "needs (scripts/install-deps.sh) and build again, or set SWI_PIPELINE=0 for a core-only wheel")
        subprocess.check_call(["cmake", "--build", str(BUILD), "--target", "swi_python_deps", "-j", JOBS])
        args = []
        for item in link.read_text().split("\n"):
            item = item.strip()
            if not item:
                continue
            if "::" in item:  # another directory's imported target CMake could not resolve here
                print(f"swi: pipeline-link.txt: {item} left out of the link (its libraries may be missing)")
            elif item.startswith("-"):
                args.append(item)
            elif os.path.isabs(item):
                args.append(item)
                if ".so" in os.path.basename(item) and not item.startswith(SYSTEM_DIRS):
                    # found here while building (ldd in carry); carry sets $ORIGIN/../swi.libs
                    args.append("-Wl,-rpath," + os.path.dirname(item))
            else:
                args.append("-l" + item)
        return args

    def carry(self, pkg, pipeline):
        """Copy every non-system shared library the extension loads into swi.libs/ with
        $ORIGIN run paths, NiiVue into swi/niivue/, and write swi/_libs.json: the system
        libraries and the Debian package of each (import swi names a missing one's package)."""
        exts = sorted(pkg.glob("_swi*.so"))
        if len(exts) != 1:
            sys.exit(f"swi: expected one built extension in {pkg}, found {exts}")
        ext = exts[0]
        libs_dir = pkg.parent / "swi.libs"
        shutil.rmtree(libs_dir, ignore_errors=True)
        system = {}
        carried = []
        todo = [ext]
        seen = set()
        while todo:
            obj = todo.pop()
            for soname, path in ldd(obj).items():
                if soname in seen:
                    continue
                seen.add(soname)
                if path is None:
                    sys.exit(f"swi: {obj.name} needs {soname}, which the loader does not find")
                if path.startswith(SYSTEM_DIRS):
                    system[soname] = debian_package(path)
                    continue
                if shutil.which("patchelf") is None:
                    sys.exit("swi: patchelf is needed to carry libraries into the wheel (apt-get install patchelf)")
                libs_dir.mkdir(exist_ok=True)
                dst = libs_dir / soname
                shutil.copy2(os.path.realpath(path), dst)
                os.chmod(dst, 0o755)
                subprocess.check_call(["patchelf", "--set-rpath", "$ORIGIN", str(dst)])
                carried.append(soname)
                todo.append(dst)
        if carried:
            subprocess.check_call(["patchelf", "--set-rpath", "$ORIGIN/../swi.libs", str(ext)])
        else:
            subprocess.check_call(["patchelf", "--remove-rpath", str(ext)])
        # nothing of the build machine may remain in a run path
        for obj in [ext] + [libs_dir / s for s in carried]:
            rp = subprocess.run(["patchelf", "--print-rpath", str(obj)], capture_output=True, text=True,
                                check=True).stdout.strip()
            if any(p and not p.startswith("$ORIGIN") for p in rp.split(":")):
                sys.exit(f"swi: {obj} keeps the run path {rp}")
        niivue = None
        if pipeline:
            f = BUILD / "python" / "niivue-path.txt"
            src = Path(os.environ.get("SWI_NIIVUE_JS") or (f.read_text().strip() if f.is_file() else ""))
            if src.is_file():
                (pkg / "niivue").mkdir(exist_ok=True)
                shutil.copy2(src, pkg / "niivue" / "niivue.umd.js")
                niivue = "niivue/niivue.umd.js"
            else:
                print(f"swi: NiiVue's browser build not found ({src}): swi.report and report= will be refused "
                      "(scripts/install-deps.sh installs it)")
        (pkg / "_libs.json").write_text(json.dumps({"carried": sorted(carried), "system": system,
                                                    "niivue": niivue}, indent=1, sort_keys=True) + "\n")


setup(
    ext_modules=[
        Extension(
            "swi._swi",
            sources=["src/_swimodule.c", "src/args.c", "src/callbacks.c", "src/engine.c", "src/result.c"],
            depends=["src/swipy.h"],
            extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wshadow", "-O2"],
            libraries=["m"],
            extra_link_args=["-pthread"],
        )
    ],
    cmdclass={"build_ext": BuildWithCore},
)
