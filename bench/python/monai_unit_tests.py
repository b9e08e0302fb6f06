"""Run MONAI 1.4's tests/test_sliding_window_inference.py with swi.sliding_window_inference
in place of MONAI's, and report every test that does not pass with its reason.

    PYTHONPATH=$MONAI_SRC /usr/bin/python3 bench/python/monai_unit_tests.py [--quick]

MONAI's source is fetched, never committed (see bench/monai/README.md). Exits 0 when the
run completed (failures are reported, not fatal), 2 when MONAI is not importable.
"""

import os
import sys
import time
import unittest
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main():
    if "--quick" in sys.argv:
        os.environ["QUICKTEST"] = "True"
    try:
        import monai.inferers
        import monai.inferers.inferer
        import monai.inferers.utils
    except ImportError as e:
        print(f"monai not importable ({e}); set PYTHONPATH to MONAI 1.4.0's source", file=sys.stderr)
        return 2
    try:
        import parameterized  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(HERE / "shim"))
    import swi

    for mod in (monai.inferers, monai.inferers.utils, monai.inferers.inferer):
        mod.sliding_window_inference = swi.sliding_window_inference
    src = Path(monai.__file__).resolve().parents[1]
    sys.path.insert(0, str(src))
    import tests.test_sliding_window_inference as t

    assert t.sliding_window_inference is swi.sliding_window_inference
    suite = unittest.defaultTestLoader.loadTestsFromModule(t)
    t0 = time.time()
    res = unittest.TextTestRunner(verbosity=0, stream=open(os.devnull, "w")).run(suite)
    dt = time.time() - t0
    bad = [(c, "FAIL", tb) for c, tb in res.failures] + [(c, "ERROR", tb) for c, tb in res.errors]
    n = res.testsRun
    skipped = len(res.skipped)
    print(f"MONAI 1.4.0 tests/test_sliding_window_inference.py with swi: {n} run, "
          f"{n - len(bad) - skipped} passed, {len(bad)} not passed, {skipped} skipped ({dt:.1f} s)")
    reasons = Counter()
    for case, kind, tb in bad:
        last = [line for line in tb.strip().splitlines() if line.strip()][-1]
        reasons[last] += 1
        print(f"  {kind} {case.id().split('.', 2)[-1]}: {last}")
    for case, why in res.skipped:
        print(f"  SKIP {case.id().split('.', 2)[-1]}: {why}")
    if reasons:
        print("reasons:")
        for r, k in reasons.most_common():
            print(f"  {k} x {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
