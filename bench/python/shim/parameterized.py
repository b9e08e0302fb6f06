"""A stand-in for the `parameterized` package (not in Debian's allowed set here): only
`parameterized.expand(cases)`, which is all MONAI's sliding-window tests use."""

import functools
import sys


class parameterized:  # noqa: N801 - the package's spelling
    @staticmethod
    def expand(cases, name_func=None):
        cases = list(cases)

        def deco(fn):
            ns = sys._getframe(1).f_locals  # the class body being defined
            for i, case in enumerate(cases):
                args = tuple(case) if isinstance(case, (list, tuple)) else (case,)

                def make(args=args):
                    @functools.wraps(fn)
                    def test(self):
                        return fn(self, *args)

                    return test

                ns[f"{fn.__name__}_{i}"] = make()
            return None  # the template itself is not a test

        return deco
