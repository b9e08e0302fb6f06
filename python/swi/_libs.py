"""Loading the compiled extension: what the wheel carries, and a clear message for what it
does not (a system library missing on this machine names its Debian package)."""
from __future__ import annotations

import importlib
import json
import os
import re
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))


def manifest() -> dict[str, Any]:
    """The build's record of the libraries (swi/_libs.json, written by setup.py), or {}
    for a package run from a build tree."""
    try:
        with open(os.path.join(_HERE, "_libs.json"), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def niivue_path() -> str | None:
    """NiiVue's browser build carried in the package, or None."""
    rel = manifest().get("niivue")
    if not isinstance(rel, str):
        return None
    path = os.path.join(_HERE, rel)
    return path if os.path.isfile(path) else None


def load() -> Any:
    """Import swi._swi; a system library the loader cannot find is named with its package."""
    try:
        return importlib.import_module("swi._swi")
    except ImportError as e:
        m = re.search(r"(\S+\.so[.0-9]*): cannot open shared object file", str(e))
        if not m:
            raise
        lib = m.group(1)
        pkg = manifest().get("system", {}).get(lib)
        how = f"apt-get install {pkg}" if pkg else "install the library that provides it"
        raise ImportError(f"swi: the system library {lib} is missing ({how}; scripts/install-deps.sh installs "
                          f"everything swi needs)") from e
