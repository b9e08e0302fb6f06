"""Build swi._swi: the C extension linked against libswi's static core library.

The core is built with the project's own CMake build (its flags live there), into
$SWI_BUILD_DIR or <repo>/build-python. Set SWI_SOURCE_DIR when building from a copy
of python/ outside the repository.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = Path(os.environ.get("SWI_SOURCE_DIR", HERE.parent)).resolve()
BUILD = Path(os.environ.get("SWI_BUILD_DIR", ROOT / "build-python")).resolve()
JOBS = os.environ.get("SWI_JOBS", "2")


def pipeline_features():
    """What swi_job_spec offers beyond ONNX models, read from the header as CMake reads it."""
    h = (ROOT / "pipeline" / "swi_pipeline.h").read_text()
    defs = []
    if re.search(r"swi_predictor[ \t]*\*[ \t]*predictors;", h):
        defs.append(("SWI_PY_JOB_PREDICTORS", "1"))
    if re.search(r"int[ \t]+keep_scores;", h):
        defs.append(("SWI_PY_JOB_KEEP_SCORES", "1"))
    if re.search(r"int[ \t]+save_probabilities;", h):
        defs.append(("SWI_PY_JOB_NNUNET", "1"))
    if re.search(r"swi_status[ \t]+swi_folder_run\(", h):
        defs.append(("SWI_PY_JOB_FOLDER", "1"))
    return defs


class BuildWithCore(build_ext):
    """Builds libswi.a with CMake first, then the extension against it."""

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
        pipeline = self.pipeline_link()
        for ext in self.extensions:
            ext.include_dirs.append(str(ROOT / "include"))
            if pipeline:
                ext.sources += ["src/pipeline.c", "src/job_spec.c", "src/folder.c", "src/outputs.c"]
                ext.include_dirs += [str(ROOT / "pipeline"), str(ROOT / "io")]
                ext.define_macros += [("SWI_HAVE_PIPELINE", "1")] + pipeline_features()
                # archives in a group: their order among themselves does not matter
                ext.extra_link_args += ["-Wl,--start-group"] + pipeline + [str(lib), "-Wl,--end-group"]
            else:
                ext.extra_objects.append(str(lib))
            ext.depends.append(str(lib))
        super().run()

    def pipeline_link(self):
        """swi.segment's library (pipeline/) with SWI_PIPELINE=1: its link line from the CMake
        build's python/pipeline-link.txt, shared libraries found by rpath where they were at
        build time (so such a wheel is for this machine: the library needs the I/O
        libraries and ONNX Runtime it was built with). Without it the wheel depends on numpy
        only and swi.segment raises RuntimeError."""
        link = BUILD / "python" / "pipeline-link.txt"
        if os.environ.get("SWI_PIPELINE", "0") != "1":
            return []
        if not link.is_file():
            sys.exit(f"swi: SWI_PIPELINE=1 but {BUILD} has no pipeline library ({link} is missing)")
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
                if ".so" in os.path.basename(item):
                    args.append("-Wl,-rpath," + os.path.dirname(item))
            else:
                args.append("-l" + item)
        return args


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
