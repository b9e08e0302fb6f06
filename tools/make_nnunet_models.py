"""Tiny nnU-Net v2 model folders (tests/data/nnunet-models), made with
dynamic_network_architectures' own networks, and the outputs of their forward pass.

    python3 tools/make_nnunet_models.py DNA_SRC tests/data/nnunet-models

DNA_SRC is a checkout of github.com/MIC-DKFZ/dynamic-network-architectures (or the
directory holding its dynamic_network_architectures package); it is imported, never
committed. Written, for each model, as nnU-Net writes a trained-model folder:
  DatasetNNN_Name/TRAINER__PLANS__CONFIG/{plans.json, dataset.json, fold_0/, fold_1/}
with fold_N/checkpoint_final.pth saved like nnUNetTrainer.save_checkpoint (torch.save
of network_weights, optimizer_state, init_args, trainer_name,
inference_allowed_mirroring_axes, ...); the networks are built from the plans the way
nnunetv2.utilities.get_network_from_plans does (pydoc.locate of the class and of the
_kw_requires_import entries), trained (600 steps, about a minute on a CPU; train_model)
on a CT-like or MR-like body phantom (body_phantom) normalised as nnU-Net's preprocessor
normalises it, so that their outputs are real segmentations of the phantom (Dice > 0.9 on
the unseen cases of tools/make_nnunet_reference.py), and
  reference/MODEL/fold_N.input.npy, fold_N.output.npy
holds the network's eval-mode output (deep supervision off) on a fixed input batch;
variants/NAME/ the same for architecture options the model folders do not use (batch
norm, dropout, nonlin_first, no norm, ELU, a 2-D ResidualEncoderUNet with stem_channels):
arch.json (class and arch_kwargs), network_weights.pth (the state_dict), input/output.npy.
"""

import copy
import json
import pydoc
import sys
from pathlib import Path

import numpy as np
import torch


def ct_plans(name):
    """A CT-like dataset: anisotropic spacing, CTNormalization, three labels; a 3d_fullres
    PlainConvUNet, a 2d one, and a cascade (3d_lowres -> 3d_cascade_fullres)."""
    resampling = {
        "resampling_fn_data": "resample_data_or_seg_to_shape",
        "resampling_fn_seg": "resample_data_or_seg_to_shape",
        "resampling_fn_data_kwargs": {"is_seg": False, "order": 3, "order_z": 0, "force_separate_z": None},
        "resampling_fn_seg_kwargs": {"is_seg": True, "order": 1, "order_z": 0, "force_separate_z": None},
        "resampling_fn_probabilities": "resample_data_or_seg_to_shape",
        "resampling_fn_probabilities_kwargs": {"is_seg": False, "order": 1, "order_z": 0, "force_separate_z": None},
    }
    common_arch = {
        "conv_bias": True,
        "dropout_op": None,
        "dropout_op_kwargs": None,
        "nonlin": "torch.nn.LeakyReLU",
        "nonlin_kwargs": {"inplace": True},
    }
    fullres = {
        "data_identifier": "nnUNetPlans_3d_fullres",
        "preprocessor_name": "DefaultPreprocessor",
        "batch_size": 2,
        "patch_size": [8, 16, 16],
        "median_image_size_in_voxels": [20, 40, 40],
        "spacing": [3.0, 0.8, 0.8],
        "normalization_schemes": ["CTNormalization"],
        "use_mask_for_norm": [False],
        **resampling,
        "architecture": {
            "network_class_name": "dynamic_network_architectures.architectures.unet.PlainConvUNet",
            "arch_kwargs": {
                "n_stages": 3,
                "features_per_stage": [4, 8, 12],
                "conv_op": "torch.nn.modules.conv.Conv3d",
                "kernel_sizes": [[1, 3, 3], [3, 3, 3], [3, 3, 3]],
                "strides": [[1, 1, 1], [1, 2, 2], [2, 2, 2]],
                "n_conv_per_stage": [2, 2, 2],
                "n_conv_per_stage_decoder": [2, 2],
                "norm_op": "torch.nn.modules.instancenorm.InstanceNorm3d",
                "norm_op_kwargs": {"eps": 1e-05, "affine": True},
                **common_arch,
            },
            "_kw_requires_import": ["conv_op", "norm_op", "dropout_op", "nonlin"],
        },
        "batch_dice": False,
    }
    twod = copy.deepcopy(fullres)
    twod.update({
        "data_identifier": "nnUNetPlans_2d",
        "batch_size": 12,
        "patch_size": [16, 24],
        "median_image_size_in_voxels": [40, 40],
        "spacing": [0.8, 0.8],
        "batch_dice": True,
    })
    twod["architecture"]["arch_kwargs"].update({
        "features_per_stage": [4, 8, 12],
        "conv_op": "torch.nn.modules.conv.Conv2d",
        "kernel_sizes": [[3, 3], [3, 3], [3, 3]],
        "strides": [[1, 1], [2, 2], [2, 2]],
        "norm_op": "torch.nn.modules.instancenorm.InstanceNorm2d",
    })
    lowres = copy.deepcopy(fullres)
    lowres.update({"data_identifier": "nnUNetPlans_3d_lowres", "spacing": [3.0, 1.6, 1.6],
                   "median_image_size_in_voxels": [20, 20, 20], "next_stage": "3d_cascade_fullres"})
    return {
        "dataset_name": name,
        "plans_name": "nnUNetPlans",
        "original_median_spacing_after_transp": [3.0, 0.8, 0.8],
        "original_median_shape_after_transp": [20, 40, 40],
        "image_reader_writer": "SimpleITKIO",
        "transpose_forward": [0, 1, 2],
        "transpose_backward": [0, 1, 2],
        "configurations": {
            "2d": twod,
            "3d_lowres": lowres,
            "3d_fullres": fullres,
            "3d_cascade_fullres": {"inherits_from": "3d_fullres", "previous_stage": "3d_lowres"},
        },
        "experiment_planner_used": "ExperimentPlanner",
        "label_manager": "LabelManager",
        "foreground_intensity_properties_per_channel": {
            "0": {"max": 1480.0, "mean": 98.6, "median": 101.0, "min": -1012.0, "percentile_00_5": -63.0,
                  "percentile_99_5": 287.0, "std": 57.2}
        },
    }


def mr_plans(name):
    """An MR-like dataset: two channels, ZScoreNormalization on the nonzero mask, a
    transposed axis order, region-based labels; a ResidualEncoderUNet (ResEnc M style)."""
    p = ct_plans(name)
    conf = p["configurations"]["3d_fullres"]
    conf.update({
        "data_identifier": "nnUNetResEncUNetMPlans_3d_fullres",
        "patch_size": [16, 16, 8],
        "spacing": [1.0, 1.2, 2.4],
        "normalization_schemes": ["ZScoreNormalization", "ZScoreNormalization"],
        "use_mask_for_norm": [True, True],
    })
    conf["architecture"] = {
        "network_class_name": "dynamic_network_architectures.architectures.unet.ResidualEncoderUNet",
        "arch_kwargs": {
            "n_stages": 3,
            "features_per_stage": [4, 8, 12],
            "conv_op": "torch.nn.modules.conv.Conv3d",
            "kernel_sizes": [[3, 3, 3], [3, 3, 3], [3, 3, 1]],
            "strides": [[1, 1, 1], [2, 2, 2], [2, 2, 1]],
            "n_blocks_per_stage": [1, 2, 2],
            "n_conv_per_stage_decoder": [1, 1],
            "conv_bias": True,
            "norm_op": "torch.nn.modules.instancenorm.InstanceNorm3d",
            "norm_op_kwargs": {"eps": 1e-05, "affine": True},
            "dropout_op": None,
            "dropout_op_kwargs": None,
            "nonlin": "torch.nn.LeakyReLU",
            "nonlin_kwargs": {"inplace": True},
        },
        "_kw_requires_import": ["conv_op", "norm_op", "dropout_op", "nonlin"],
    }
    p.update({
        "plans_name": "nnUNetResEncUNetMPlans",
        "original_median_spacing_after_transp": [1.0, 1.2, 2.4],
        "transpose_forward": [2, 0, 1],
        "transpose_backward": [1, 2, 0],
        "configurations": {"3d_fullres": conf},
        "experiment_planner_used": "nnUNetPlannerResEncM",
        "foreground_intensity_properties_per_channel": {
            str(c): {"max": 900.0, "mean": 310.0 + c, "median": 300.0, "min": 0.0, "percentile_00_5": 12.0,
                     "percentile_99_5": 820.0, "std": 140.0} for c in range(2)
        },
    })
    return p


MODELS = [
    # (dataset, trainer__plans__configuration, plans maker, dataset.json)
    ("Dataset990_SwiTinyCT", "nnUNetTrainer__nnUNetPlans__3d_fullres", ct_plans,
     {"channel_names": {"0": "CT"}, "labels": {"background": 0, "liver": 1, "tumour": 2}, "numTraining": 8,
      "file_ending": ".nii.gz"}),
    ("Dataset990_SwiTinyCT", "nnUNetTrainer__nnUNetPlans__2d", ct_plans,
     {"channel_names": {"0": "CT"}, "labels": {"background": 0, "liver": 1, "tumour": 2}, "numTraining": 8,
      "file_ending": ".nii.gz"}),
    ("Dataset991_SwiTinyMR", "nnUNetTrainer__nnUNetResEncUNetMPlans__3d_fullres", mr_plans,
     {"channel_names": {"0": "T1", "1": "T2"}, "labels": {"background": 0, "whole": [1, 2], "core": 2},
      "regions_class_order": [1, 2], "numTraining": 8, "file_ending": ".nii.gz"}),
]


# Architecture variants beyond the model folders' (layers and options nnU-Net's plans can
# name): variants/NAME/{arch.json, network_weights.pth, input.npy, output.npy}.
VARIANTS = {
    "plain3d_batchnorm_dropout_nonlin_first": ("dynamic_network_architectures.architectures.unet.PlainConvUNet", {
        "n_stages": 3, "features_per_stage": [3, 6, 8], "conv_op": "torch.nn.modules.conv.Conv3d",
        "kernel_sizes": [[3, 3, 3], [3, 3, 3], [1, 3, 3]], "strides": [[1, 1, 1], [2, 2, 2], [1, 2, 2]],
        "n_conv_per_stage": [1, 2, 2], "n_conv_per_stage_decoder": [1, 2], "conv_bias": False,
        "norm_op": "torch.nn.modules.batchnorm.BatchNorm3d", "norm_op_kwargs": {"eps": 1e-3, "momentum": 0.3},
        "dropout_op": "torch.nn.modules.dropout.Dropout3d", "dropout_op_kwargs": {"p": 0.2},
        "nonlin": "torch.nn.ReLU", "nonlin_kwargs": {"inplace": True}, "nonlin_first": True,
    }, 1, 3, [8, 12, 12]),
    "plain3d_no_norm_elu": ("dynamic_network_architectures.architectures.unet.PlainConvUNet", {
        "n_stages": 2, "features_per_stage": [4, 6], "conv_op": "torch.nn.modules.conv.Conv3d",
        "kernel_sizes": [3, 3], "strides": [1, 2], "n_conv_per_stage": 2, "n_conv_per_stage_decoder": 1,
        "conv_bias": True, "norm_op": None, "norm_op_kwargs": None, "dropout_op": None, "dropout_op_kwargs": None,
        "nonlin": "torch.nn.ELU", "nonlin_kwargs": {"alpha": 0.7},
    }, 2, 2, [6, 8, 10]),
    "resenc2d_stem_batchnorm": ("dynamic_network_architectures.architectures.unet.ResidualEncoderUNet", {
        "n_stages": 3, "features_per_stage": [4, 6, 8], "conv_op": "torch.nn.modules.conv.Conv2d",
        "kernel_sizes": [[3, 3], [3, 3], [3, 1]], "strides": [[1, 1], [2, 2], [2, 1]],
        "n_blocks_per_stage": [1, 1, 2], "n_conv_per_stage_decoder": [1, 1], "conv_bias": True,
        "norm_op": "torch.nn.modules.batchnorm.BatchNorm2d", "norm_op_kwargs": {"eps": 1e-05, "affine": True},
        "dropout_op": None, "dropout_op_kwargs": None, "nonlin": "torch.nn.LeakyReLU",
        "nonlin_kwargs": {"negative_slope": 0.1, "inplace": True}, "stem_channels": 3,
    }, 1, 4, [12, 8]),
}


def make_variants(out):
    for k, (cls_name, kw_json, cin, classes, patch) in enumerate(VARIANTS.values()):
        name = list(VARIANTS)[k]
        kw = dict(kw_json)
        for key in ("conv_op", "norm_op", "dropout_op", "nonlin"):
            if kw[key] is not None:
                kw[key] = pydoc.locate(kw[key])
        torch.manual_seed(500 + k)
        net = pydoc.locate(cls_name)(input_channels=cin, num_classes=classes, deep_supervision=True, **kw)
        if hasattr(net, "initialize"):
            net.apply(net.initialize)
        train(net, classes, patch, cin, False, 90 + k)
        net.decoder.deep_supervision = False
        net.eval()
        x = torch.randn(2, cin, *patch, generator=torch.Generator().manual_seed(9 + k))
        with torch.no_grad():
            y = net(x)
        d = out / "variants" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "arch.json").write_text(json.dumps({"network_class_name": cls_name, "arch_kwargs": kw_json,
                                                 "input_channels": cin, "num_classes": classes,
                                                 "patch_size": patch}, indent=1) + "\n")
        torch.save(net.state_dict(), d / "network_weights.pth")
        np.save(d / "input.npy", x.numpy().astype("<f4"))
        np.save(d / "output.npy", y.numpy().astype("<f4"))
        print(f"{d}: {sum(p.numel() for p in net.parameters())} parameters, output {list(y.shape)}")


def build(plans, conf_name, dataset):
    """As get_network_from_plans: locate the class and the _kw_requires_import entries."""
    arch = plans["configurations"][conf_name]["architecture"]
    kw = dict(arch["arch_kwargs"])
    for k in arch["_kw_requires_import"]:
        if kw[k] is not None:
            kw[k] = pydoc.locate(kw[k])
    cls = pydoc.locate(arch["network_class_name"])
    labels = dataset["labels"]
    regions = any(isinstance(v, list) and len(v) > 1 for v in labels.values())
    heads = (sum(1 for k, v in labels.items() if k != "background") if regions else len(labels))
    net = cls(input_channels=len(dataset["channel_names"]), num_classes=heads, deep_supervision=True, **kw)
    if hasattr(net, "initialize"):
        net.apply(net.initialize)
    return net, heads


def phantom(gen, b, c, patch, heads):
    """Blobs: brighter inside spheres; the target is which sphere (or none)."""
    dims = len(patch)
    grids = torch.meshgrid(*[torch.linspace(-1, 1, s) for s in patch], indexing="ij")
    r = sum(g ** 2 for g in grids).sqrt()
    x = torch.randn(b, c, *patch, generator=gen) * 0.3
    y = torch.zeros(b, *patch, dtype=torch.long)
    for i in range(b):
        rad = 0.4 + 0.4 * torch.rand(1, generator=gen).item()
        y[i][r < rad] = 1
        y[i][r < rad / 2] = min(2, heads - 1)
    x += y[:, None].float()
    return x, y, dims


def train(net, heads, patch, channels, regions, seed):
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.99, nesterov=True, weight_decay=3e-5)
    net.train()
    for _ in range(6):
        x, y, _ = phantom(gen, 2, channels, patch, heads)
        out = net(x)[0]  # deep supervision: the full-resolution head first
        if regions:
            t = torch.stack([(y >= 1), (y >= 2)], 1).float()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(out, t)
        else:
            loss = torch.nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return opt


def body_phantom(gen, shape, spacing, kind):
    """A raw volume on a voxel grid of SHAPE at SPACING (mm) with structures of fixed
    physical size, so the same phantom drawn at another spacing (the reference cases of
    tools/make_nnunet_reference.py) looks alike after nnU-Net's resampling.
    kind "ct": air -1000 HU, body 0 HU, liver (label 1) 120 HU, tumour (label 2) 220 HU
    inside it, noise 15 HU. kind "mr": two channels, zero outside the head (for
    crop_to_nonzero and use_mask_for_norm), tissue 300/250, whole (label 1) 550/650,
    core (label 2) 800/400 inside it. Returns (image [C, *shape] float32, labels int64)."""
    def u(lo, hi):
        return lo + (hi - lo) * torch.rand(1, generator=gen).item()

    ext = [s * sp for s, sp in zip(shape, spacing)]
    grids = torch.meshgrid(*[(torch.arange(s) + 0.5) * sp for s, sp in zip(shape, spacing)], indexing="ij")

    def ellipsoid(centre, radii):
        return sum(((g - c) / r) ** 2 for g, c, r in zip(grids, centre, radii)) < 1

    lab = torch.zeros(shape, dtype=torch.long)
    body_c = [e * u(0.3, 0.7) for e in ext]
    body = ellipsoid(body_c, [e * u(0.45, 0.8) for e in ext])
    organ_c = [e * u(0.25, 0.75) for e in ext]
    organ = ellipsoid(organ_c, [u(6, 14) for _ in ext]) & body
    inner_c = [c + u(-3, 3) for c in organ_c]
    inner = ellipsoid(inner_c, [u(3, 6) for _ in ext]) & organ
    lab[organ] = 1
    lab[inner] = 2
    if kind == "ct":
        img = torch.full(shape, -1000.0)
        img[body] = 0.0
        img[organ] = 120.0
        img[inner] = 220.0
        img += 15 * torch.randn(shape, generator=gen)
        return img[None], lab
    img = torch.zeros((2, *shape))
    for c, (t, w, k) in enumerate([(300.0, 550.0, 800.0), (250.0, 650.0, 400.0)]):
        v = torch.full(shape, t)
        v[organ] = w
        v[inner] = k
        v += 20 * torch.randn(shape, generator=gen)
        img[c] = torch.where(body, v.clamp(min=1.0), torch.zeros(()))
    return img, lab


def normalise(img, conf, fingerprint):
    """nnU-Net's CTNormalization / ZScoreNormalization (use_mask_for_norm: statistics
    over the nonzero region, zero outside), as its preprocessor applies them."""
    out = torch.empty_like(img)
    nonzero = (img != 0).any(0)
    for c, scheme in enumerate(conf["normalization_schemes"]):
        x = img[c]
        if scheme == "CTNormalization":
            fp = fingerprint[str(c)]
            x = x.clamp(fp["percentile_00_5"], fp["percentile_99_5"])
            out[c] = (x - fp["mean"]) / max(fp["std"], 1e-8)
        elif conf["use_mask_for_norm"][c]:
            m = nonzero
            v = x[m]
            out[c] = torch.where(m, (x - v.mean()) / max(v.std(unbiased=False).item(), 1e-8), torch.zeros(()))
        else:
            out[c] = (x - x.mean()) / max(x.std(unbiased=False).item(), 1e-8)
    return out


def train_model(net, plans, conf_name, dataset, seed, steps=600, batch=4):
    """Train (cross-entropy + soft Dice, as nnU-Net's loss) on patches cut from phantom
    volumes three times the patch size, drawn at the
    configuration's spacing (in nnU-Net's transposed axis order) and normalised as
    nnU-Net normalises them, until the labels come out mostly right."""
    conf = plans["configurations"][conf_name]
    patch = conf["patch_size"]
    kind = "ct" if conf["normalization_schemes"][0] == "CTNormalization" else "mr"
    spacing = conf["spacing"] if len(patch) == 3 else [3.0, *conf["spacing"]]
    vol = [3 * s for s in patch] if len(patch) == 3 else [4, 3 * patch[0], 3 * patch[1]]
    regions = "regions_class_order" in dataset
    fp = plans["foreground_intensity_properties_per_channel"]
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3, weight_decay=3e-5)
    net.train()
    for step in range(steps):
        xs, ys = [], []
        for _ in range(batch):
            img, lab = body_phantom(gen, vol, spacing, kind)
            img = normalise(img, conf, fp)
            if len(patch) == 2:
                z = int(torch.randint(vol[0], (1,), generator=gen))
                img, lab = img[:, z], lab[z]
            off = [int(torch.randint(v - p + 1, (1,), generator=gen)) for v, p in zip(lab.shape, patch)]
            inner = (lab == 2).nonzero()
            if len(inner) and torch.rand(1, generator=gen).item() < 0.5:
                # foreground oversampling, as nnU-Net's: centre the patch on the smallest class
                c = inner[int(torch.randint(len(inner), (1,), generator=gen))]
                off = [min(max(int(ci) - p // 2, 0), v - p) for ci, v, p in zip(c, lab.shape, patch)]
            sl = tuple(slice(o, o + p) for o, p in zip(off, patch))
            xs.append(img[(slice(None), *sl)])
            ys.append(lab[sl])
        x, y = torch.stack(xs), torch.stack(ys)
        out = net(x)[0]  # deep supervision: the full-resolution head first
        if regions:
            t = torch.stack([(y >= 1), (y >= 2)], 1).float()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(out, t)
            prob, fg = torch.sigmoid(out), t
        else:
            loss = torch.nn.functional.cross_entropy(out, y)
            prob = torch.softmax(out, 1)[:, 1:]
            fg = torch.stack([y == k for k in range(1, prob.shape[1] + 1)], 1).float()
        dims = [0, *range(2, prob.ndim)]
        inter, total = (prob * fg).sum(dims), prob.sum(dims) + fg.sum(dims)
        loss = loss + 1 - ((2 * inter + 1) / (total + 1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"  trained {steps} steps, last loss {loss.item():.3f}")
    return opt


def main(dna_src, out_dir):
    dna_src = Path(dna_src).resolve()
    sys.path.insert(0, str(dna_src.parent if (dna_src / "architectures").is_dir() else dna_src))
    import dynamic_network_architectures  # noqa: F401

    out = Path(out_dir)
    make_variants(out)
    for k, (ds, folder, make_plans, dataset) in enumerate(MODELS):
        trainer, plans_name, conf_name = folder.split("__")
        plans = make_plans(ds)
        assert plans["plans_name"] == plans_name
        mdir = out / ds / folder
        mdir.mkdir(parents=True, exist_ok=True)
        (mdir / "plans.json").write_text(json.dumps(plans, indent=4) + "\n")
        (mdir / "dataset.json").write_text(json.dumps(dataset, indent=4) + "\n")
        patch = plans["configurations"][conf_name]["patch_size"]
        mirror = [0, 1] if len(patch) == 2 else [0, 1, 2]
        regions = "regions_class_order" in dataset
        ref = out / "reference" / f"{ds}__{folder}"
        ref.mkdir(parents=True, exist_ok=True)
        for fold in (0, 1):
            torch.manual_seed(1000 * k + fold)
            net, heads = build(plans, conf_name, dataset)
            opt = train_model(net, plans, conf_name, dataset, 77 + fold)
            ck = {
                "network_weights": net.state_dict(),
                "optimizer_state": opt.state_dict(),
                "grad_scaler_state": None,
                "logging": {"mean_fg_dice": [np.float64(0.1 * fold)], "ema_fg_dice": [np.float64(0.1)],
                            "train_losses": [np.float64(1.0)], "epoch_start_timestamps": [1.7e9]},
                "_best_ema": np.float64(0.1),
                "current_epoch": 1,
                "init_args": {"plans": plans, "configuration": conf_name, "fold": fold, "dataset_json": dataset,
                              "device": torch.device("cuda")},
                "trainer_name": trainer,
                "inference_allowed_mirroring_axes": tuple(mirror),
            }
            fd = mdir / f"fold_{fold}"
            fd.mkdir(exist_ok=True)
            torch.save(ck, fd / "checkpoint_final.pth")
            # the predictor's network: deep supervision off, eval mode
            net.decoder.deep_supervision = False
            net.eval()
            gen = torch.Generator().manual_seed(5 + fold)
            x = torch.randn(2, len(dataset["channel_names"]), *patch, generator=gen)
            with torch.no_grad():
                y = net(x)
            np.save(ref / f"fold_{fold}.input.npy", x.numpy().astype("<f4"))
            np.save(ref / f"fold_{fold}.output.npy", y.numpy().astype("<f4"))
            print(f"{mdir}/fold_{fold}: {sum(p.numel() for p in net.parameters())} parameters, "
                  f"output {list(y.shape)}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
