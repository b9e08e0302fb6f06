"""The U-Nets nnU-Net v2's plans name, rebuilt in PyTorch from the plans' arch_kwargs.

The module tree is laid out so that ``state_dict()`` names every tensor exactly as a
checkpoint of dynamic_network_architectures' ``PlainConvUNet`` / ``ResidualEncoderUNet``
does (aliases included: each conv block is reachable as ``conv``/``norm`` and as
``all_modules.N``, and the decoder holds the encoder as ``decoder.encoder``), so weights
load by name and any difference in name or shape is a refusal, not a silent mismatch.
Only inference is modelled: no deep-supervision heads in the output, dropout is identity.
"""

from __future__ import annotations

import functools
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import nn


class PlansError(ValueError):
    """A plans entry the converter cannot turn into a network (the message names it)."""


def _conv_cls(name: Optional[str], what: str):
    table = {
        "torch.nn.modules.conv.Conv2d": 2,
        "torch.nn.Conv2d": 2,
        "torch.nn.modules.conv.Conv3d": 3,
        "torch.nn.Conv3d": 3,
    }
    if name not in table:
        raise PlansError(f"{what}: conv_op {name!r} is not supported (Conv2d or Conv3d)")
    return table[name]


def _norm_factory(name: Optional[str], kwargs: Optional[dict], dim: int, what: str, device=None):
    if name is None:
        return None
    short = name.split(".")[-1]
    inst = {2: nn.InstanceNorm2d, 3: nn.InstanceNorm3d}
    batch = {2: nn.BatchNorm2d, 3: nn.BatchNorm3d}
    if short == f"InstanceNorm{dim}d":
        cls = inst[dim]
        allowed = {"eps", "affine", "momentum", "track_running_stats"}
    elif short == f"BatchNorm{dim}d":
        cls = batch[dim]
        allowed = {"eps", "affine", "momentum", "track_running_stats"}
    else:
        raise PlansError(f"{what}: norm_op {name!r} is not supported with a {dim}-D conv_op "
                         f"(InstanceNorm{dim}d, BatchNorm{dim}d or null)")
    kw = dict(kwargs or {})
    bad = sorted(set(kw) - allowed)
    if bad:
        raise PlansError(f"{what}: norm_op_kwargs {bad} are not supported")
    return lambda ch: cls(ch, **kw, device=device)


def _nonlin_factory(name: Optional[str], kwargs: Optional[dict], what: str):
    if name is None:
        return None
    short = name.split(".")[-1]
    kw = dict(kwargs or {})
    kw.pop("inplace", None)  # in-place or not, the values are the same
    if short == "LeakyReLU":
        allowed, cls = {"negative_slope"}, nn.LeakyReLU
    elif short == "ReLU":
        allowed, cls = set(), nn.ReLU
    elif short == "ELU":
        allowed, cls = {"alpha"}, nn.ELU
    elif short == "GELU":
        allowed, cls = set(), nn.GELU
    else:
        raise PlansError(f"{what}: nonlin {name!r} is not supported (LeakyReLU, ReLU, ELU, GELU or null)")
    bad = sorted(set(kw) - allowed)
    if bad:
        raise PlansError(f"{what}: nonlin_kwargs {bad} are not supported for {short}")
    return lambda: cls(**kw)


def _dropout_factory(name: Optional[str], what: str):
    if name is None:
        return None
    if name.split(".")[-1] not in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d"):
        raise PlansError(f"{what}: dropout_op {name!r} is not supported")
    # inference: dropout is the identity, but it holds a place in all_modules
    return lambda: nn.Identity()


class _Ops:
    """The layer factories one network uses everywhere."""

    def __init__(self, kw: dict, what: str, device=None):
        self.dim = _conv_cls(kw.get("conv_op"), what)
        self.conv = functools.partial({2: nn.Conv2d, 3: nn.Conv3d}[self.dim], device=device)
        self.tconv = functools.partial({2: nn.ConvTranspose2d, 3: nn.ConvTranspose3d}[self.dim], device=device)
        self.pool = {2: nn.AvgPool2d, 3: nn.AvgPool3d}[self.dim]
        self.norm = _norm_factory(kw.get("norm_op"), kw.get("norm_op_kwargs"), self.dim, what, device)
        self.nonlin = _nonlin_factory(kw.get("nonlin"), kw.get("nonlin_kwargs"), what)
        self.dropout = _dropout_factory(kw.get("dropout_op"), what)
        self.bias = bool(kw.get("conv_bias", False))


def _vec(v, dim: int, what: str) -> List[int]:
    if isinstance(v, int):
        return [v] * dim
    if not isinstance(v, (list, tuple)) or len(v) != dim or not all(isinstance(i, int) and i > 0 for i in v):
        raise PlansError(f"{what}: {v!r} is not {dim} positive integers")
    return list(v)


def _per_stage(v, n: int, what: str) -> list:
    if isinstance(v, int):
        return [v] * n
    if not isinstance(v, (list, tuple)) or len(v) != n:
        raise PlansError(f"{what}: {v!r} must have {n} entries (one per stage)")
    return list(v)


class ConvBlock(nn.Module):
    """conv -> [dropout] -> [norm] -> [nonlin] ('same' padding; nonlin before norm when
    nonlin_first). The pieces are attributes and, in order, ``all_modules``."""

    def __init__(self, ops: _Ops, cin: int, cout: int, kernel, stride, nonlin: bool = True,
                 nonlin_first: bool = False, dropout: bool = True, bias: Optional[bool] = None):
        super().__init__()
        k = _vec(kernel, ops.dim, "kernel")
        s = _vec(stride, ops.dim, "stride")
        seq = []
        self.conv = ops.conv(cin, cout, k, s, padding=[(i - 1) // 2 for i in k], dilation=1,
                             bias=ops.bias if bias is None else bias)
        seq.append(self.conv)
        if dropout and ops.dropout is not None:
            self.dropout = ops.dropout()
            seq.append(self.dropout)
        if ops.norm is not None:
            self.norm = ops.norm(cout)
            seq.append(self.norm)
        if nonlin and ops.nonlin is not None:
            self.nonlin = ops.nonlin()
            seq.append(self.nonlin)
            if nonlin_first and ops.norm is not None:
                seq[-1], seq[-2] = seq[-2], seq[-1]
        self.all_modules = nn.Sequential(*seq)

    def forward(self, x):
        return self.all_modules(x)


class ConvStack(nn.Module):
    """n ConvBlocks; the first carries the stride (``convs.N``)."""

    def __init__(self, ops: _Ops, n: int, cin: int, cout: int, kernel, stride, nonlin_first=False):
        super().__init__()
        if not isinstance(n, int) or n < 1:
            raise PlansError(f"a stage must have at least one conv (got {n!r})")
        blocks = [ConvBlock(ops, cin if i == 0 else cout, cout, kernel, stride if i == 0 else 1,
                            nonlin_first=nonlin_first) for i in range(n)]
        self.convs = nn.Sequential(*blocks)

    def forward(self, x):
        return self.convs(x)


class ResBlock(nn.Module):
    """ResNet-D basic block: two convs (the second without nonlin) plus a skip that
    average-pools when strided and projects (1x1 conv + norm) when the width changes."""

    def __init__(self, ops: _Ops, cin: int, cout: int, kernel, stride):
        super().__init__()
        s = _vec(stride, ops.dim, "stride")
        self.conv1 = ConvBlock(ops, cin, cout, kernel, s)
        self.conv2 = ConvBlock(ops, cout, cout, kernel, 1, nonlin=False, dropout=False)
        self.nonlin2 = ops.nonlin() if ops.nonlin is not None else nn.Identity()
        strided = any(i != 1 for i in s)
        skip = []
        if strided:
            skip.append(ops.pool(s, s))
        if cin != cout:
            skip.append(ConvBlock(ops, cin, cout, 1, 1, nonlin=False, dropout=False, bias=False))
        self.skip = nn.Sequential(*skip) if skip else nn.Identity()

    def forward(self, x):
        return self.nonlin2(self.conv2(self.conv1(x)) + self.skip(x))


class ResStack(nn.Module):
    def __init__(self, ops: _Ops, n: int, cin: int, cout: int, kernel, stride):
        super().__init__()
        if not isinstance(n, int) or n < 1:
            raise PlansError(f"a stage must have at least one block (got {n!r})")
        self.blocks = nn.Sequential(*[ResBlock(ops, cin if i == 0 else cout, cout, kernel, stride if i == 0 else 1)
                                      for i in range(n)])

    def forward(self, x):
        return self.blocks(x)


class _Encoder(nn.Module):
    def __init__(self, ops: _Ops, features: List[int], kernels: List[List[int]], strides: List[List[int]]):
        super().__init__()
        self.output_channels = features
        self.kernel_sizes = kernels
        self.strides = strides


class PlainEncoder(_Encoder):
    def __init__(self, ops, cin, features, kernels, strides, n_convs, nonlin_first):
        super().__init__(ops, features, kernels, strides)
        stages = []
        for s in range(len(features)):
            # each stage is a Sequential (room for a pooling op): names are stages.S.0.convs...
            stages.append(nn.Sequential(ConvStack(ops, n_convs[s], cin, features[s], kernels[s], strides[s],
                                                  nonlin_first)))
            cin = features[s]
        self.stages = nn.Sequential(*stages)

    def forward(self, x):
        skips = []
        for st in self.stages:
            x = st(x)
            skips.append(x)
        return skips


class ResidualEncoder(_Encoder):
    def __init__(self, ops, cin, features, kernels, strides, n_blocks, stem_channels):
        super().__init__(ops, features, kernels, strides)
        stem = features[0] if stem_channels is None else stem_channels
        self.stem = ConvStack(ops, 1, cin, stem, kernels[0], 1)
        cin = stem
        stages = []
        for s in range(len(features)):
            stages.append(ResStack(ops, n_blocks[s], cin, features[s], kernels[s], strides[s]))
            cin = features[s]
        self.stages = nn.Sequential(*stages)

    def forward(self, x):
        x = self.stem(x)
        skips = []
        for st in self.stages:
            x = st(x)
            skips.append(x)
        return skips


class Decoder(nn.Module):
    """Transposed conv up, concatenate the skip, n convs; a 1x1 head per stage (the heads
    of the coarser stages exist for deep supervision: their weights load, they do not run)."""

    def __init__(self, ops: _Ops, encoder: _Encoder, num_classes: int, n_convs: List[int], nonlin_first: bool):
        super().__init__()
        self.encoder = encoder  # registered: checkpoints name its tensors decoder.encoder.* too
        feats, n = encoder.output_channels, len(encoder.output_channels)
        stages, tconvs, heads = [], [], []
        for s in range(1, n):
            below, skip = feats[-s], feats[-(s + 1)]
            st = encoder.strides[-s]
            tconvs.append(ops.tconv(below, skip, st, st, bias=ops.bias))
            stages.append(ConvStack(ops, n_convs[s - 1], 2 * skip, skip, encoder.kernel_sizes[-(s + 1)], 1,
                                    nonlin_first))
            heads.append(ops.conv(skip, num_classes, 1, 1, 0, bias=True))
        self.stages = nn.ModuleList(stages)
        self.transpconvs = nn.ModuleList(tconvs)
        self.seg_layers = nn.ModuleList(heads)

    def forward(self, skips):
        x = skips[-1]
        for s in range(len(self.stages)):
            x = self.transpconvs[s](x)
            x = self.stages[s](torch.cat((x, skips[-(s + 2)]), 1))
        return self.seg_layers[-1](x)


class UNet(nn.Module):
    def __init__(self, encoder: _Encoder, decoder: Decoder, dim: int):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.dim = dim

    def forward(self, x):
        return self.decoder(self.encoder(x))


# the kwargs each class takes (besides input_channels / num_classes); others are refused
_COMMON = {"n_stages", "features_per_stage", "conv_op", "kernel_sizes", "strides", "n_conv_per_stage_decoder",
           "conv_bias", "norm_op", "norm_op_kwargs", "dropout_op", "dropout_op_kwargs", "nonlin", "nonlin_kwargs",
           "deep_supervision"}
ARCH_KWARGS = {
    "PlainConvUNet": _COMMON | {"n_conv_per_stage", "nonlin_first"},
    "ResidualEncoderUNet": _COMMON | {"n_blocks_per_stage", "block", "bottleneck_channels", "stem_channels"},
}
SUPPORTED_CLASSES = (
    "dynamic_network_architectures.architectures.unet.PlainConvUNet",
    "dynamic_network_architectures.architectures.unet.ResidualEncoderUNet",
    "dynamic_network_architectures.architectures.residual_unet.ResidualEncoderUNet",
)


def build_network(class_name: str, kw: Dict[str, Any], input_channels: int, num_classes: int,
                  device=None) -> UNet:
    """The network nnU-Net's plans describe (configuration's architecture entry); on
    device "meta" it has the shapes and no memory (Module.to_empty gives it some)."""
    if class_name not in SUPPORTED_CLASSES:
        raise PlansError(f"network_class_name {class_name!r} is not supported (supported: "
                         + ", ".join(SUPPORTED_CLASSES) + ")")
    short = class_name.split(".")[-1]
    what = f"architecture.arch_kwargs of {short}"
    unknown = sorted(set(kw) - ARCH_KWARGS[short])
    if unknown:
        raise PlansError(f"{what}: {unknown} are not supported")
    ops = _Ops(kw, what, device)
    n = kw.get("n_stages")
    if not isinstance(n, int) or n < 1:
        raise PlansError(f"{what}: n_stages {n!r} is not a positive integer")
    feats = _per_stage(kw.get("features_per_stage"), n, f"{what}: features_per_stage")
    kernels = [_vec(k, ops.dim, f"{what}: kernel_sizes") for k in _per_stage(kw.get("kernel_sizes"), n,
                                                                               f"{what}: kernel_sizes")]
    strides = [_vec(s, ops.dim, f"{what}: strides") for s in _per_stage(kw.get("strides"), n, f"{what}: strides")]
    dec = _per_stage(kw.get("n_conv_per_stage_decoder"), n - 1, f"{what}: n_conv_per_stage_decoder")
    if short == "PlainConvUNet":
        nf = bool(kw.get("nonlin_first", False))
        enc = PlainEncoder(ops, input_channels, feats, kernels, strides,
                           _per_stage(kw.get("n_conv_per_stage"), n, f"{what}: n_conv_per_stage"), nf)
        decoder = Decoder(ops, enc, num_classes, dec, nf)
    else:
        block = kw.get("block")
        if block is not None and str(block).split(".")[-1] != "BasicBlockD":
            raise PlansError(f"{what}: block {block!r} is not supported (BasicBlockD)")
        if kw.get("bottleneck_channels") is not None:
            raise PlansError(f"{what}: bottleneck_channels {kw['bottleneck_channels']!r} is not supported "
                             "(BottleneckD blocks)")
        stem = kw.get("stem_channels")
        if stem is not None and (not isinstance(stem, int) or stem < 1):
            raise PlansError(f"{what}: stem_channels {stem!r} is not a positive integer")
        enc = ResidualEncoder(ops, input_channels, feats, kernels, strides,
                              _per_stage(kw.get("n_blocks_per_stage"), n, f"{what}: n_blocks_per_stage"), stem)
        decoder = Decoder(ops, enc, num_classes, dec, False)
    return UNet(enc, decoder, ops.dim)


def check_weight_shapes(net: nn.Module, shapes: Dict[str, Sequence[int]], source: str) -> None:
    """Every name the network has must be in shapes (a checkpoint's, by name) with its
    shape, and shapes may hold no other."""
    own = net.state_dict()
    if not isinstance(shapes, dict):
        raise PlansError(f"{source}: network_weights is not a dict of tensors")
    for name, t in own.items():
        if name not in shapes:
            raise PlansError(f"{source}: weight {name!r} is missing (the plans' network has it, shape "
                             f"{list(t.shape)})")
        if tuple(shapes[name]) != tuple(t.shape):
            raise PlansError(f"{source}: weight {name!r} has shape {list(shapes[name])}, the plans' network "
                             f"needs {list(t.shape)}")
    extra = sorted(set(shapes) - set(own))
    if extra:
        raise PlansError(f"{source}: weight {extra[0]!r} does not fit the plans' network"
                         + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""))


def load_weights(net: nn.Module, weights: Dict[str, torch.Tensor], source: str) -> None:
    """Loads a checkpoint's network_weights by name: every name the network has must be
    there with its shape, and the checkpoint may hold no other."""
    own = net.state_dict()
    if not isinstance(weights, dict):
        raise PlansError(f"{source}: network_weights is not a dict of tensors")
    for name, w in weights.items():
        if not isinstance(w, torch.Tensor):
            raise PlansError(f"{source}: weight {name!r} is not a tensor")
    check_weight_shapes(net, {k: tuple(w.shape) for k, w in weights.items()}, source)
    net.load_state_dict({k: weights[k].float() if weights[k].is_floating_point() else weights[k] for k in own},
                        strict=True)


class Window2D(nn.Module):
    """A 2-D network as a window one voxel thick: [B, C, 1, X, Y] -> [B, K, 1, X, Y]."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x.squeeze(2)).unsqueeze(2)


def window_shape(patch: Sequence[int]) -> List[int]:
    return [1, *patch] if len(patch) == 2 else list(patch)
