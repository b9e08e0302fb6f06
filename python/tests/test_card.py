"""python3 -m swi card --check: model cards against the package's JSON Schema (docs/card.md)."""
import json
import os
import subprocess
import sys

import swi


def run_card(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-m", "swi", "card"] + list(args), capture_output=True, text=True,
                          env=env, timeout=120)


def test_card_schema_in_package():
    path = os.path.join(os.path.dirname(swi.__file__), "card.schema.json")
    with open(path, encoding="utf-8") as f:
        schema = json.load(f)
    assert set(schema["$defs"]) == {"model", "nnunet"}
    assert "classes" in schema["$defs"]["model"]["properties"]


def test_card_check(tmp_path):
    good, bad, model = tmp_path / "good.json", tmp_path / "bad.json", tmp_path / "m.onnx"
    good.write_text(json.dumps({"roi": 96, "classes": ["background", "liver"]}))
    bad.write_text(json.dumps({"roi": 96, "preprocessing": {"clip": [0]}}))
    (tmp_path / "m.json").write_text(json.dumps({"overlap": 1.5}))
    r = run_card("--check", str(good))
    assert r.returncode == 0 and "ok" in r.stdout, r
    r = run_card("--check", str(good), str(bad), str(model))
    assert r.returncode == 1, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2, r.stderr
    assert str(bad) in lines[0] and '"preprocessing.clip"' in lines[0], lines
    assert "m.json" in lines[1] and '"overlap"' in lines[1], lines
    assert run_card().returncode == 2 and run_card("--help").returncode == 0
