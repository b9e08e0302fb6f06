#!/usr/bin/env python3
"""The cards' JSON Schema and the C reader agree (docs/card.md).

    card_schema_test.py SWI REPO WORKDIR

Every example card in docs/card.md and every card the tests write (cli/tests/
realscan_tests.sh, report/tests/report_test.py) is checked by `swi card --check` (the reader
swi segment uses) and by python/swi/_card.py against python/swi/card.schema.json: the
examples pass both; each card of the tests is accepted by both or refused by both, naming
the same key; a set of broken cards is refused by both, each message naming the key; the
rules across keys the schema cannot say (docs/card.md, "reader only") are refused by the
reader. Exits 77 without jansson (swi cannot read cards).
"""
import copy
import importlib.util
import json
import os
import shutil
import re
import subprocess
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def load_card_module(repo):
    # the module alone (json, os, re): no compiled part of the package is needed
    spec = importlib.util.spec_from_file_location("swi_card", os.path.join(repo, "python", "swi", "_card.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Checker:
    def __init__(self, swi, repo, work):
        self.swi, self.work, self.card = swi, work, load_card_module(repo)
        self.n = 0

    def write(self, text, nnunet):
        self.n += 1
        d = os.path.join(self.work, "c%03d" % self.n)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "nnunet.json" if nnunet else "m.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def both(self, text, nnunet=False):
        """(C message or None, schema message or None) for a card's text."""
        path = self.write(text, nnunet)
        r = subprocess.run([self.swi, "card", "--check", "-q", path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        if r.returncode not in (0, 1) or (r.returncode == 0) != (r.stderr == ""):
            fail("swi card --check %s: exit %d, %r" % (path, r.returncode, r.stderr))
        c = r.stderr.strip() or None
        try:
            self.card.check(path)
            s = None
        except self.card.CardError as e:
            s = str(e)
        for m in (c, s):
            if m and path not in m:
                fail("the message %r does not name the file %s" % (m, path))
        return c, s


def json_blocks(md):
    return re.findall(r"```json\n(.*?)```", md, re.S)


def test_cards(repo):
    """The cards the tests write: (text, the key their expected message names, or None)."""
    out = []
    sh = open(os.path.join(repo, "cli", "tests", "realscan_tests.sh"), encoding="utf-8").read()
    for m in re.finditer(r"card_model \w+ '(.*?)'", sh, re.S):
        out.append((m.group(1), None))
    for m in re.finditer(r"printf '(\{.*?\})\\n' >\"\$T/m/card.json\"", sh):
        out.append((m.group(1), None))
    bad = re.search(r"t_card_bad\(\) \{.*?local cases=\((.*?)\n  \)", sh, re.S).group(1)
    for line in re.findall(r"^\s*'(.*)'$", bad, re.M):
        text, want = line.split("|", 1)
        key = re.match(r'"([^"]+)"', want)
        # a message about the model (it does not fit the card) is no fault of the card's own
        model_bound = "quant4.onnx" in want or "the input has" in want
        out.append((text, None if model_bound else key.group(1) if key else "JSON"))
    rt = open(os.path.join(repo, "report", "tests", "report_test.py"), encoding="utf-8").read()
    if 'json.dump({"roi": [8, 8, 8], "classes": CLASSES}' not in rt:
        fail("report_test.py's card moved: update this test")
    out.append((json.dumps({"roi": [8, 8, 8], "classes": ["background", "liver", "spleen", "kidney"]}), None))
    return out


BAD_MODEL = [
    ({"roi": 0}, "roi"), ({"roi": [8, 8]}, "roi"), ({"roi": 8.5}, "roi"), ({"roi": 70000}, "roi"),
    ({"overlap": -0.1}, "overlap"), ({"overlap": [0.5, 1, 0.5]}, "overlap"), ({"overlap": "half"}, "overlap"),
    ({"blending": "linear"}, "blending"), ({"sigma_scale": 0}, "sigma_scale"),
    ({"padding": "zero"}, "padding"), ({"cval": "0"}, "cval"), ({"orientation": "RRS"}, "orientation"),
    ({"orientation": "RA"}, "orientation"), ({"spacing": 2e6}, "spacing"), ({"spacing": [1, 1]}, "spacing"),
    ({"preprocessing": []}, "preprocessing"), ({"preprocessing": {"clip": [1]}}, "preprocessing.clip"),
    ({"preprocessing": {"scale": [0, 1, 0, "1"]}}, "preprocessing.scale"),
    ({"preprocessing": {"zscore": "yes"}}, "preprocessing.zscore"),
    ({"channels": []}, "channels"), ({"classes": ["a", ""]}, "classes"), ({"classes": ['a"b']}, "classes"),
    ({"classes": ["a\nb"]}, "classes"), ({"classes": "liver"}, "classes"), ({"classes": ["x" * 201]}, "classes"),
    ({"members": ["f%d.onnx" % i for i in range(16)]}, "members"), ({"members": [1]}, "members"),
    ({"format": "swi-nnunet-ish", "roi": 8}, "format"), ({"Roi": 8}, "Roi"),
]
# what the schema cannot say: the reader refuses these alone
READER_ONLY_MODEL = [({"preprocessing": {"clip": [2, 1]}}, "preprocessing.clip"),
                     ({"preprocessing": {"scale": [1, 1, 0, 1]}}, "preprocessing.scale")]


def nn_bad(base):
    def mut(f):
        c = copy.deepcopy(base)
        f(c)
        return c
    return [
        (mut(lambda c: c.update(version=2)), "version"),
        (mut(lambda c: c.update(dims=4)), "dims"),
        (mut(lambda c: c.update(window=[0, 128, 128])), "window"),
        (mut(lambda c: c.update(spacing=[1, -1, 1])), "spacing"),
        (mut(lambda c: c.update(image_reader_writer="TiffIO")), "image_reader_writer"),
        (mut(lambda c: c.pop("transpose_forward")), "transpose_forward"),
        (mut(lambda c: c.update(models=["../fold_0.onnx", "fold_1.onnx"])), "models"),
        (mut(lambda c: c["channels"][0].update(normalization="Gamma")), "channels"),
        (mut(lambda c: c["channels"][0].pop("std")), "channels"),
        (mut(lambda c: c["resampling"]["resampling_fn_data"].update(fn="zoom")), "resampling"),
        (mut(lambda c: c["resampling"]["resampling_fn_data"]["kwargs"].update(order=2)), "resampling"),
        (mut(lambda c: c.update(num_segmentation_heads=0)), "num_segmentation_heads"),
        (mut(lambda c: c.update(tile_step_size=1.5)), "tile_step_size"),
        (mut(lambda c: c.update(mirroring_axes=[0, 1, 5])), "mirroring_axes"),
    ]


def main(argv):
    if len(argv) != 4:
        print(__doc__)
        return 2
    swi, repo, work = argv[1], argv[2], os.path.abspath(argv[3])
    # a fresh folder: a file left by an earlier run (bare.json) would change what is checked
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ck = Checker(swi, repo, work)
    c, _ = ck.both("{}")
    if c and "without a JSON library" in c:
        print("SKIP: swi was built without jansson: it cannot read cards")
        return 77
    md = open(os.path.join(repo, "docs", "card.md"), encoding="utf-8").read()
    examples = json_blocks(md)
    if len(examples) < 4:
        fail("docs/card.md has %d JSON examples" % len(examples))
    nn_base = None
    for text in examples:
        card = json.loads(text)
        nn = isinstance(card, dict) and card.get("format") == "swi-nnunet"
        if nn:
            nn_base = card
        c, s = ck.both(text, nnunet=nn)
        if c or s:
            fail("docs/card.md's example %s: reader %r, schema %r" % (text[:60], c, s))
    print("docs/card.md: %d examples pass both" % len(examples))
    if nn_base is None:
        fail("docs/card.md has no nnU-Net example")
    cards = test_cards(repo)
    for text, key in cards:
        c, s = ck.both(text)
        if (c is None) != (s is None):
            fail("a test's card %r: reader %r, schema %r" % (text, c, s))
        if key is not None and c is None:
            fail("a test's card %r is meant to be refused (%s)" % (text, key))
        if key == "JSON":
            if "not valid JSON" not in c and "JSON object" not in c or "JSON" not in s and "object" not in s:
                fail("%r: reader %r, schema %r" % (text, c, s))
        elif key is not None and ('"%s"' % key not in c or '"%s"' % key not in s):
            fail("%r names %s: reader %r, schema %r" % (text, key, c, s))
    print("the tests' %d cards: reader and schema agree" % len(cards))
    bad = [(json.dumps(b), k, False) for b, k in BAD_MODEL] + [(json.dumps(b), k, True) for b, k in nn_bad(nn_base)]
    bad.append(('{"roi": 8, "roi": 9}', "roi", False))
    for text, key, nn in bad:
        c, s = ck.both(text, nnunet=nn)
        if not c or not s:
            fail("a bad card %s passed: reader %r, schema %r" % (text[:100], c, s))
        if key not in c or key not in s:
            fail("a bad card %s: the messages do not name %s: reader %r, schema %r" % (text[:100], key, c, s))
        print("  %s\n    swi:    %s\n    schema: %s" % (key, c.split(": ", 1)[1], s.split(": ", 1)[1]))
    print("%d bad cards: refused by both, naming the key" % len(bad))
    # a key with a line break: each message one line
    c, s = ck.both('{"a\\nb": 1}')
    if not c or not s or "\n" in c or "\n" in s or "unknown key" not in c or "unknown key" not in s:
        fail("a key with a line break: reader %r, schema %r" % (c, s))
    for b, key in READER_ONLY_MODEL:
        c, s = ck.both(json.dumps(b))
        if not c or key not in c or s:
            fail("reader-only rule %s: reader %r, schema %r" % (b, c, s))
    # the command: usage, a model without a card, an nnU-Net model directory by its folder
    def swi_run(*args):
        return subprocess.run([swi] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=60)
    r = swi_run("card", "--help")
    if r.returncode != 0 or "Examples" not in r.stdout or "card.schema.json" not in r.stdout:
        fail("swi card --help: exit %d %r" % (r.returncode, r.stdout))
    for args, want in ((["card"], "--check is required"), (["card", "--check"], "no file"),
                       (["card", "--frob"], "unknown option")):
        r = swi_run(*args)
        if r.returncode != 2 or want not in r.stderr:
            fail("swi %s: exit %d %r" % (" ".join(args), r.returncode, r.stderr))
    bare = os.path.join(work, "bare.onnx")
    with open(bare, "wb") as f:
        f.write(b"not a model")
    r = swi_run("card", "--check", bare)
    if r.returncode != 1 or "has no card" not in r.stderr or bare not in r.stderr:
        fail("a model without a card: exit %d %r" % (r.returncode, r.stderr))
    nn_dir = os.path.dirname(ck.write(json.dumps(nn_base), True))
    r = swi_run("card", "--check", nn_dir)
    if r.returncode != 0 or "nnU-Net card" not in r.stdout or "3d_fullres" not in r.stdout:
        fail("an nnU-Net model directory: exit %d %r %r" % (r.returncode, r.stdout, r.stderr))
    with open(os.path.join(os.path.dirname(bare), "bare.json"), "w") as f:
        f.write('{"roi": 8, "classes": ["a", "b"]}')
    r = swi_run("card", "--check", bare)
    if r.returncode != 0 or "class 1" not in r.stdout:
        fail("a model's card beside it: exit %d %r %r" % (r.returncode, r.stdout, r.stderr))
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
