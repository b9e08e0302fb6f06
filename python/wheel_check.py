"""The wheel as a user installs it: build dist/swi-*.whl offline, install it with --no-deps
into a fresh virtual environment (system site packages for numpy and torch, the only
source offline), then, from outside the source tree, import it, run the golden cases and
type-check an example script against it with mypy (when installed).

    python3 python/wheel_check.py BUILD_DIR GOLDEN_DIR
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(cmd, **kw):
    print("+", " ".join(map(str, cmd)), flush=True)
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def main() -> int:
    build, golden = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="swi-wheel-"))
    try:
        env = dict(os.environ, SWI_BUILD_DIR=str(build))
        env.pop("PYTHONPATH", None)
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "--no-index",
             HERE, "-w", tmp / "dist"], env=env)
        wheels = list((tmp / "dist").glob("swi-*.whl"))
        assert len(wheels) == 1, wheels
        run([sys.executable, "-m", "venv", "--system-site-packages", tmp / "venv"])
        py = tmp / "venv" / "bin" / "python"
        run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheels[0]], env=env)
        work = tmp / "work"
        shutil.copytree(HERE / "tests", work / "tests",
                        ignore=shutil.ignore_patterns("test_api.py", "test_autograd_args.py", "test_monai.py",
                                                      "__pycache__"))
        run([py, "-c", "import swi, sys; p = swi.__file__; print(p); "
                       "sys.exit(0 if p.startswith(sys.prefix) else 'swi imported from outside the venv')"],
            cwd=work, env=env)
        run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", work / "tests" / "test_golden.py"], cwd=work,
            env=dict(env, SWI_GOLDEN_DIR=str(golden)))
        doors(py, build, golden, tmp, env)
        mypy = shutil.which("mypy")
        if not mypy:
            print("wheel_check: mypy not installed (apt-get install mypy): typing check skipped")
            return 0
        for f in ("typed_example.py", "typed_misuse.py"):
            shutil.copy(HERE / "examples" / f, work / f)
        # torch's own annotations are huge to analyse and not what is checked here
        (work / "mypy.ini").write_text("[mypy]\n[mypy-torch.*]\nfollow_imports = skip\n")
        res = subprocess.run([mypy, "--strict", "--python-executable", str(py), "typed_example.py",
                              "typed_misuse.py"], cwd=work, capture_output=True, text=True)
        print(res.stdout)
        errors = [line for line in res.stdout.splitlines() if ": error:" in line]
        assert res.returncode == 1 and errors, "mypy accepted typed_misuse.py"
        assert not [e for e in errors if not e.startswith("typed_misuse.py:")], "typed_example.py does not type-check"
        want = ['Argument 3 to "sliding_window_inference" has incompatible type "str"',
                'Argument "max_memory" to "SlidingWindowInferer" has incompatible type "float"',
                'Argument "spacing" to "segment" has incompatible type "str"']
        for w in want:
            assert any(w in e for e in errors), f"mypy did not report: {w}"
        print("wheel_check: wheel installed, golden cases and typing passed")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def doors(py: Path, build: Path, golden: Path, tmp: Path, env: dict) -> None:
    """The wheel alone: with the source tree (its build folders and .deps) and the build
    folder hidden, a real-scan job, a store job, a review page and a conversion from another
    folder (wheel_doors.py), on copies of the inputs."""
    data = tmp / "data"
    data.mkdir()
    for f in ("volume.nii.gz", "unet.onnx", "labels.nii.gz"):
        shutil.copy(golden / "e2e" / f, data / f)
    shutil.copytree(HERE.parent / "tests" / "data" / "nnunet-models" / "Dataset990_SwiTinyCT" /
                    "nnUNetTrainer__nnUNetPlans__3d_fullres", data / "nnunet_model")
    shutil.copy(HERE / "wheel_doors.py", tmp / "wheel_doors.py")
    hide = [HERE.parent]
    if not build.is_relative_to(HERE.parent):
        hide.append(build)
    env = {k: v for k, v in env.items() if not k.startswith(("SWI_", "LD_"))}
    cmd = [py, tmp / "wheel_doors.py", data, tmp / "doors"]
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode == 0:
        mounts = " && ".join(f"mount -t tmpfs swi-hidden '{h}'" for h in hide)
        script = f"{mounts} && cd '{tmp}' && exec \"$@\""
        run(["unshare", "-m", "sh", "-c", script, "sh", *cmd], cwd=tmp,
            env=dict(env, SWI_DOORS_HIDDEN=os.pathsep.join(map(str, hide))))
    else:
        # without the right to make a mount namespace (not root) the tree stays in view;
        # the run paths are still checked to name nothing of it
        print("wheel_check: cannot hide the source tree here (unshare -m needs root): run with it in view")
        run(cmd, cwd=tmp, env=env)
    so = list((tmp / "venv").rglob("_swi*.so"))
    assert len(so) == 1, so
    for obj in [so[0], *(so[0].parent.parent / "swi.libs").glob("*.so*")]:
        rpath = subprocess.run(["patchelf", "--print-rpath", obj], capture_output=True, text=True).stdout
        assert str(HERE.parent) not in rpath and str(build) not in rpath, f"{obj} run path {rpath}"


if __name__ == "__main__":
    sys.exit(main())
