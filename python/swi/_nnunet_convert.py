"""Convert a trained nnU-Net v2 model folder into a swi model directory.

MODEL_DIR (``Dataset.../nnUNetTrainer__nnUNetPlans__3d_fullres``) holds plans.json,
dataset.json and fold_N/checkpoint_*.pth. The network is rebuilt from the plans
(swi._nnunet_nets), each fold's weights are loaded by name and exported to ONNX, and
nnU-Net's inference settings go into OUT_DIR/nnunet.json (docs/semantics-nnunet.md).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional

from . import _outputs
from . import _nnunet_inputs as inputs
from ._nnunet_inputs import ConvertError

CARD_NAME = "nnunet.json"
CARD_FORMAT = "swi-nnunet"
CARD_VERSION = 1
OPSET = 17
KNOWN_NORMALIZATIONS = ("CTNormalization", "ZScoreNormalization", "RescaleTo01Normalization",
                        "RGBTo01Normalization", "NoNormalization")


# how nnU-Net reads the images decides the axis order the plans speak of (semantics-nnunet.md)
KNOWN_READERS = ("SimpleITKIO", "NibabelIO", "NibabelIOWithReorient")


# ---- checkpoints and JSON: read with bounds, checked before use (_nnunet_inputs) ------
def read_torch_archive(path: Path):
    """What torch.save wrote to path (zip format), read with an allow-list (_nnunet_inputs)."""
    a = inputs.Archive(Path(path))
    try:
        return a.materialize(a.obj)
    finally:
        a.close()


def load_checkpoint(path: Path) -> dict:
    """An nnU-Net checkpoint, every tensor read."""
    ck = inputs.Checkpoint(Path(path))
    try:
        return ck.materialize(ck.obj)
    finally:
        ck.close()


def _load_json(path: Path) -> dict:
    return inputs.read_json(path)


# ---- plans -----------------------------------------------------------------------
def resolve_configuration(plans: dict, name: str, plans_path: Path) -> dict:
    """The configuration with its inherits_from chain applied (children override)."""
    confs = plans.get("configurations")
    if not isinstance(confs, dict):
        raise ConvertError(f"{plans_path}: configurations is missing")
    seen: List[str] = []
    chain = []
    cur = name
    while True:
        if cur not in confs:
            raise ConvertError(f"{plans_path}: configuration {cur!r} is not in configurations "
                               f"(has: {', '.join(confs)})")
        if cur in seen:
            raise ConvertError(f"{plans_path}: configuration {name!r}: inherits_from loops "
                               f"({' -> '.join(seen + [cur])})")
        seen.append(cur)
        c = confs[cur]
        if not isinstance(c, dict):
            raise ConvertError(f"{plans_path}: configurations.{cur} is not an object")
        chain.append(c)
        if "inherits_from" not in c:
            break
        cur = c["inherits_from"]
    out: Dict[str, Any] = {}
    for c in reversed(chain):
        out.update(c)
    return out


def _label_info(dataset: dict, dataset_path: Path) -> dict:
    labels = dataset.get("labels")
    if not isinstance(labels, dict) or "background" not in labels:
        raise ConvertError(f"{dataset_path}: labels must be an object with 'background'")
    if labels["background"] != 0:
        raise ConvertError(f"{dataset_path}: labels.background must be 0")
    for k, v in labels.items():
        vs = v if isinstance(v, list) else [v]
        if not vs or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in vs) \
                or (k == "ignore" and isinstance(v, list)):
            raise ConvertError(f"{dataset_path}: labels.{k}: {v!r} is not a label (a non-negative integer"
                               + (")" if k == "ignore" else ", or a list of them for a region)"))
    has_regions = any(isinstance(v, list) and len(v) > 1 for v in labels.values())
    ignore = labels.get("ignore")
    all_labels = sorted({int(i) for k, v in labels.items() if k != "ignore"
                         for i in (v if isinstance(v, list) else [v])})
    info: Dict[str, Any] = {"labels": labels, "ignore_label": ignore, "has_regions": has_regions}
    if has_regions:
        order = dataset.get("regions_class_order")
        regions = []
        for k, v in labels.items():
            if k == "ignore":
                continue
            vs = v if isinstance(v, list) else [v]
            if set(vs) == {0}:
                continue
            regions.append([int(i) for i in vs])
        if not isinstance(order, list) or len(order) != len(regions):
            raise ConvertError(f"{dataset_path}: regions_class_order must list one label per region "
                               f"({len(regions)} regions)")
        info.update(regions=regions, regions_class_order=order, num_segmentation_heads=len(regions),
                    inference_nonlin="sigmoid", threshold=0.5)
    else:
        info.update(regions=None, regions_class_order=None, all_labels=all_labels,
                    num_segmentation_heads=len(all_labels), inference_nonlin="softmax")
    return info


def _channels(plans: dict, conf: dict, dataset: dict, plans_path: Path, dataset_path: Path) -> List[dict]:
    names = dataset.get("channel_names", dataset.get("modality"))
    if not isinstance(names, dict) or not names:
        raise ConvertError(f"{dataset_path}: channel_names is missing")
    n = len(names)
    if sorted(names) != sorted(str(i) for i in range(n)):
        raise ConvertError(f"{dataset_path}: channel_names keys must be \"0\" .. \"{n - 1}\"")
    schemes = conf.get("normalization_schemes")
    masks = conf.get("use_mask_for_norm")
    if not isinstance(schemes, list) or len(schemes) != n:
        raise ConvertError(f"{plans_path}: normalization_schemes must have one entry per channel ({n})")
    if not isinstance(masks, list) or len(masks) != n:
        raise ConvertError(f"{plans_path}: use_mask_for_norm must have one entry per channel ({n})")
    props = plans.get("foreground_intensity_properties_per_channel",
                      plans.get("foreground_intensity_properties_by_modality", {}))
    out = []
    for i, key in enumerate(sorted(names, key=int)):
        s = schemes[i]
        if s not in KNOWN_NORMALIZATIONS:
            raise ConvertError(f"{plans_path}: normalization_schemes[{i}] {s!r} is not supported "
                               f"({', '.join(KNOWN_NORMALIZATIONS)})")
        ch: Dict[str, Any] = {"index": i, "name": names[key], "normalization": s, "use_mask_for_norm": bool(masks[i])}
        if s == "CTNormalization":
            p = props.get(str(i)) if isinstance(props, dict) else None
            if not isinstance(p, dict):
                raise ConvertError(f"{plans_path}: foreground_intensity_properties_per_channel.{i} is missing "
                                   "(CTNormalization needs it)")
            for k in ("mean", "std", "percentile_00_5", "percentile_99_5"):
                v = p.get(k)
                if not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise ConvertError(f"{plans_path}: foreground_intensity_properties_per_channel.{i}.{k} "
                                       "is missing or not a finite number")
                ch[k] = float(v)
        out.append(ch)
    return out


# ---- the conversion ----------------------------------------------------------------
def _folds(model_dir: Path, folds: Optional[str], checkpoint: str) -> List[str]:
    if folds is None or folds == "auto":
        found = sorted((int(p.name[5:]) for p in model_dir.glob("fold_*")
                        if p.name[5:].isdigit() and (p / checkpoint).is_file()))
        if not found:
            raise ConvertError(f"{model_dir}: no fold_N/{checkpoint} found")
        return [str(f) for f in found]
    if folds == "all":
        return ["all"]
    out = []
    for f in folds.split(","):
        f = f.strip()
        if not (f.isdigit() or f == "all"):
            raise ConvertError(f"--folds: {f!r} is not a fold number or 'all'")
        if f in out:
            raise ConvertError(f"--folds: fold {f} given twice")
        out.append(f)
    return out


def convert(model_dir: str, output: str, folds: Optional[str] = None, checkpoint: str = "checkpoint_final.pth",
            force: bool = False, log=None) -> dict:
    """Converts; returns the card written. Raises ConvertError (nothing is left in OUT_DIR)."""
    from . import _nnunet_nets as nets

    log = log or (lambda s: None)
    mdir = Path(model_dir)
    out = Path(output)
    if not mdir.is_dir():
        raise ConvertError(f"{mdir}: not a directory (a trained nnU-Net model folder)")
    plans_path, dataset_path = mdir / "plans.json", mdir / "dataset.json"
    plans, dataset = _load_json(plans_path), _load_json(dataset_path)
    inputs.check_plans(plans, plans_path)
    inputs.check_dataset(dataset, dataset_path)
    if "/" in checkpoint or checkpoint in ("", ".", ".."):
        raise ConvertError(f"--checkpoint: {checkpoint!r} must be a file name inside fold_N/")
    fold_list = _folds(mdir, folds, checkpoint)
    old = _claim_output(mdir, out, force)

    # inspected only: every tensor checked against the archive, none read yet
    paths = [(f, mdir / f"fold_{f}" / checkpoint) for f in fold_list]
    cks = [(f, p, ck) for (f, p), ck in zip(paths, inputs.inspect_checkpoints(paths))]
    f0, p0, ck0 = cks[0]
    conf_name = ck0["init_args"]["configuration"]
    trainer = ck0["trainer_name"]
    for f, p, ck in cks[1:]:
        if ck["init_args"]["configuration"] != conf_name or ck["trainer_name"] != trainer:
            raise ConvertError(f"{p}: trained as {ck['trainer_name']}/{ck['init_args']['configuration']}, "
                               f"fold {f0} as {trainer}/{conf_name}: folds of one model must agree")
    conf = resolve_configuration(plans, conf_name, plans_path)
    inputs.check_configuration(conf, conf_name, plans_path)
    if conf.get("previous_stage") is not None:
        raise ConvertError(f"{plans_path}: configuration {conf_name!r} is a cascade stage (previous_stage "
                           f"{conf['previous_stage']!r}): cascades are not supported")
    arch = conf.get("architecture")
    if not isinstance(arch, dict) or not isinstance(arch.get("network_class_name"), str) \
            or not isinstance(arch.get("arch_kwargs"), dict):
        raise ConvertError(f"{plans_path}: configuration {conf_name!r}: architecture.network_class_name / "
                           "arch_kwargs missing (plans from nnU-Net v2.2 or later are needed)")
    patch = conf.get("patch_size")
    if not isinstance(patch, list) or len(patch) not in (2, 3) or not all(isinstance(i, int) and i > 0 for i in patch):
        raise ConvertError(f"{plans_path}: configuration {conf_name!r}: patch_size {patch!r} is not 2 or 3 "
                           "positive integers")
    spacing = conf.get("spacing")
    if not isinstance(spacing, list) or len(spacing) != len(patch):
        raise ConvertError(f"{plans_path}: configuration {conf_name!r}: spacing must have {len(patch)} entries")
    lm = plans.get("label_manager", "LabelManager")
    if lm != "LabelManager":
        raise ConvertError(f"{plans_path}: label_manager {lm!r} is not supported (LabelManager)")
    rw = plans.get("image_reader_writer")
    if rw is not None and rw not in KNOWN_READERS:
        raise ConvertError(f"{plans_path}: image_reader_writer {rw!r} is not supported ({', '.join(KNOWN_READERS)})")
    channels = _channels(plans, conf, dataset, plans_path, dataset_path)
    labels = _label_info(dataset, dataset_path)
    tf, tb = plans.get("transpose_forward"), plans.get("transpose_backward")
    for k, v in (("transpose_forward", tf), ("transpose_backward", tb)):
        if not isinstance(v, list) or sorted(v) != [0, 1, 2]:
            raise ConvertError(f"{plans_path}: {k} {v!r} is not a permutation of 0, 1, 2")

    try:
        # on the meta device: shapes only, compared with the checkpoints' before any memory is taken
        net = nets.build_network(arch["network_class_name"], arch["arch_kwargs"], len(channels),
                                 labels["num_segmentation_heads"], device="meta")
    except nets.PlansError as e:
        raise ConvertError(f"{plans_path}: configuration {conf_name!r}: {e}") from None
    except (TypeError, ValueError, RuntimeError) as e:
        raise ConvertError(f"{plans_path}: configuration {conf_name!r}: architecture.arch_kwargs do not make a "
                           f"network ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    if net.dim != len(patch):
        raise ConvertError(f"{plans_path}: configuration {conf_name!r}: a {net.dim}-D conv_op with a "
                           f"{len(patch)}-D patch_size")
    for ax in range(len(patch)):
        prod = math.prod(st[ax] for st in net.encoder.strides)
        if patch[ax] % prod:
            raise ConvertError(f"{plans_path}: configuration {conf_name!r}: patch_size {patch} is not a multiple "
                               f"of the network's total stride along axis {ax} ({prod})")
    for f, p, ck in cks:
        try:
            nets.check_weight_shapes(net, ck.weight_shapes(), str(p))
        except nets.PlansError as e:
            raise ConvertError(str(e)) from None
    net = net.to_empty(device="cpu")  # every tensor is then loaded from a checkpoint
    window = nets.window_shape(patch)
    mirror = ck0.get("inference_allowed_mirroring_axes")
    if mirror is not None:
        mirror = [int(a) for a in mirror]
        if any(a < 0 or a >= len(patch) for a in mirror):
            raise ConvertError(f"{p0}: inference_allowed_mirroring_axes {mirror} do not fit a {len(patch)}-D patch")

    parent = out.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="." + out.name + ".", dir=str(parent)))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 is for the work in progress only
        models = []
        for f, p, ck in cks:
            try:
                nets.load_weights(net, ck["network_weights"], str(p))
            except nets.PlansError as e:
                raise ConvertError(str(e)) from None
            name = f"fold_{f}.onnx"
            try:
                export_onnx(net, patch, len(channels), tmp / name)
            except (RuntimeError, ValueError, TypeError, MemoryError) as e:
                msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise ConvertError(f"{p}: the ONNX export failed ({msg})") from None
            models.append(name)
            log(f"fold {f}: {p} -> {out / name}")
        card = {
            "format": CARD_FORMAT,
            "version": CARD_VERSION,
            "dataset_name": plans.get("dataset_name"),
            "plans_name": plans.get("plans_name"),
            "trainer_name": trainer,
            "configuration": conf_name,
            "network_class_name": arch["network_class_name"],
            "checkpoint": checkpoint,
            "folds": [int(f) if f.isdigit() else f for f in fold_list],
            "models": models,
            "dims": len(patch),
            "patch_size": patch,
            "window": window,
            "input": {"name": "input", "shape": ["batch", len(channels), *window]},
            "output": {"name": "output", "shape": ["batch", labels["num_segmentation_heads"], *window],
                       "kind": "logits"},
            "spacing": [float(s) for s in spacing],
            "image_reader_writer": rw,
            "transpose_forward": tf,
            "transpose_backward": tb,
            "channels": channels,
            "resampling": {k: {"fn": conf.get(k), "kwargs": conf.get(k + "_kwargs")}
                           for k in ("resampling_fn_data", "resampling_fn_probabilities", "resampling_fn_seg")},
            "mirroring_axes": mirror,
            "tile_step_size": 0.5,
            "blending": "gaussian_nnunet",
            "sigma_scale": 0.125,
            "file_ending": dataset.get("file_ending"),
            **labels,
        }
        with open(tmp / CARD_NAME, "w", encoding="utf-8") as fh:
            json.dump(card, fh, indent=1)
            fh.write("\n")
        try:
            _outputs.publish_dir(str(tmp), str(out), old, _not_a_conversion)
        except FileExistsError as e:
            raise ConvertError(str(e)) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return card


def _not_a_conversion(path: str) -> Optional[str]:
    """Why the folder is not one this converter wrote (None: it is): its card (nnunet.json of
    format swi-nnunet) and the models the card names, nothing else."""
    p = Path(path)
    if p.is_symlink() or not p.is_dir():
        return "a link or a file"
    try:
        with open(p / CARD_NAME, "r", encoding="utf-8") as f:
            card = json.load(f)
        models = card["models"] if isinstance(card, dict) and card.get("format") == CARD_FORMAT else None
    except (OSError, ValueError, KeyError):
        models = None
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        return f"no {CARD_NAME} of a converted model: a folder the converter did not write"
    for e in sorted(os.listdir(p)):
        if e != CARD_NAME and e not in models:
            return f"{p / e}, which the converter did not write"
    return None


def _claim_output(mdir: Path, out: Path, force: bool):
    """The output rules (swi._outputs, those of swi segment): OUT_DIR is not the model folder,
    inside it or around it, under any name or link; an existing OUT_DIR is replaced only with
    --force and only when the converter wrote it. What publish_dir needs, or ConvertError."""
    try:
        _outputs.check_apart([("the model folder", str(mdir))], [("--output", str(out))])
    except ValueError as e:
        raise ConvertError(f"{out}: is the model folder, lies inside it or holds it ({e})") from None
    try:
        return _outputs.claim_dir(str(out), force, _not_a_conversion)
    except FileExistsError as e:
        if not force:
            raise ConvertError(f"{out}: exists (choose a new directory, or --force to replace a model directory "
                               "the converter wrote)") from None
        raise ConvertError(str(e)) from None


def export_onnx(net, patch, channels: int, path: Path) -> None:
    """One network to ONNX: input [batch, channels, *window] -> logits [batch, K, *window]
    (a 2-D network as a window one voxel thick), opset 17, the batch dynamic."""
    import torch

    from . import _nnunet_nets as nets

    net.eval()
    m = nets.Window2D(net) if len(patch) == 2 else net
    x = torch.zeros(1, channels, *nets.window_shape(patch))
    with torch.no_grad(), warnings.catch_warnings():
        # instance norm without running stats is the same in eval and train mode
        warnings.filterwarnings("ignore", message=".*operator 'instance_norm' is set to train=True.*")
        # the tracer's note on instance norm's size check: the patch size is fixed
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        torch.onnx.export(m, x, str(path), input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=OPSET,
                          do_constant_folding=True)


HELP_EPILOG = """\
examples:
  # every fold found, checkpoint_final.pth:
  python3 -m swi convert nnunet \\
      nnUNet_results/Dataset003_Liver/nnUNetTrainer__nnUNetPlans__3d_fullres --output liver-swi
  # folds 0 and 1 only, the best checkpoint instead of the final one:
  python3 -m swi convert nnunet MODEL_DIR --output OUT_DIR --folds 0,1 --checkpoint checkpoint_best.pth
  # a model trained on all the data (fold_all):
  python3 -m swi convert nnunet MODEL_DIR --output OUT_DIR --folds all

OUT_DIR gets fold_N.onnx per fold (input [batch, channels, *patch], nnU-Net's logits
out; a 2-D configuration's window is one voxel thick: [batch, channels, 1, X, Y]) and
nnunet.json, the card with nnU-Net's inference settings (docs/semantics-nnunet.md).
Supported: PlainConvUNet, ResidualEncoderUNet (BasicBlockD); 2d and 3d configurations.
Refused, with the reason: cascades (previous_stage), other network classes, weights that
do not fit the plans' network. Needs PyTorch and onnx; the converted model does not.
"""


def main(argv: Optional[List[str]] = None, prog: str = "python3 -m swi convert nnunet") -> int:
    ap = argparse.ArgumentParser(prog=prog, description="Convert a trained nnU-Net v2 model folder into a swi "
                                 "model directory (one ONNX per fold + nnunet.json).",
                                 epilog=HELP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", metavar="MODEL_DIR",
                    help="nnU-Net's trained-model folder (plans.json, dataset.json, fold_N/)")
    ap.add_argument("--output", "-o", required=True, metavar="OUT_DIR", help="the model directory to write (new)")
    ap.add_argument("--folds", default=None, metavar="0,1,...|all",
                    help="folds to convert (default: every fold_N with the checkpoint)")
    ap.add_argument("--checkpoint", default="checkpoint_final.pth", metavar="NAME",
                    help="checkpoint file in each fold_N (default: checkpoint_final.pth)")
    ap.add_argument("--force", action="store_true", help="replace OUT_DIR if it is a model directory the converter wrote")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    a = ap.parse_args(argv)
    try:
        import onnx  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print(f"swi convert nnunet: needs PyTorch and onnx ({e})", file=sys.stderr)
        return 1
    log = (lambda s: None) if a.quiet else (lambda s: print(s, file=sys.stderr))
    try:
        card = convert(a.model_dir, a.output, a.folds, a.checkpoint, a.force, log)
    except ConvertError as e:
        print(f"swi convert nnunet: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"swi convert nnunet: {e.filename or a.output}: {e.strerror or e}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"swi convert nnunet: {a.model_dir}: out of memory while converting", file=sys.stderr)
        return 1
    log(f"wrote {Path(a.output) / CARD_NAME}: {card['configuration']}, folds {card['folds']}")
    return 0
