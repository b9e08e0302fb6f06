"""Empty stand-ins for modules nnU-Net v2 imports but never calls on the inference path.

install() appends an import hook that is consulted only after the real import system
failed, so an installed module always wins. The stand-ins compute nothing: an attribute
is an empty class, and calling it with arguments raises TypeError, so a code path that
really needed one of these modules fails loudly instead of returning something made up.

  torch._dynamo     OptimizedModule, for isinstance checks (torch < 2 has no _dynamo)
  SimpleITK         imported by the preprocessor module; used only by the file readers
  blosc2            a type annotation in acvl_utils, nnU-Net's training data storage
  batchgeneratorsv2 training augmentations imported by the nnUNetTrainer module
  seaborn           the trainer's progress plots
"""

import importlib.abc
import importlib.machinery
import sys
import types

SHIMMED = ("torch._dynamo", "SimpleITK", "blosc2", "batchgeneratorsv2", "seaborn")


class _Empty(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Empty(name, (), {})


class _EmptyModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Empty(name, (), {})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    used = []

    def find_spec(self, fullname, path=None, target=None):
        if any(fullname == s or fullname.startswith(s + ".") for s in SHIMMED):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _EmptyModule(spec.name)
        m.__path__ = []
        if spec.name == "torch._dynamo":
            m.OptimizedModule = type("OptimizedModule", (), {})
        self.used.append(spec.name)
        return m

    def exec_module(self, module):
        pass


def install():
    """Add the hook once; returns the list that records which stand-ins were imported."""
    for f in sys.meta_path:
        if isinstance(f, _Finder):
            return f.used
    f = _Finder()
    sys.meta_path.append(f)
    return f.used
