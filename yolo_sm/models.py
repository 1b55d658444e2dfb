"""Model builders: YOLO families at any width/depth, the wide conv stack, ResNet backbones.

All models come with random weights (nothing is downloaded), in eval mode, Conv+BN fused, and
return one tensor: the head output. Each carries ``.layer_table`` data through :func:`layers`, so
:func:`channel_table` and the profilers can name layers the same way (``model.4 C2f``).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from yolo_sm.errors import UserError

FAMILIES = {"yolov8": "v8/yolov8.yaml", "yolo11": "11/yolo11.yaml"}
MIN_WIDTH, MAX_WIDTH = 0.0625, 4.0


@dataclass(frozen=True)
class LayerRef:
    """One layer of a model as the tables name it."""

    index: int
    name: str  # module path, e.g. "model.4" or "layer3"
    module_type: str  # e.g. "C2f", "Conv", "Bottleneck"
    stage: str  # backbone / neck / head
    module: nn.Module
    requested_channels: float | None = None  # width-scaled channels before rounding and cap
    capped: bool = False  # ultralytics' max_channels cap lowered this layer's width


class YoloForward(nn.Module):
    """An ultralytics DetectionModel that returns one tensor: the head's raw output.

    Default (``decode=False``): shape (B, 4*reg_max + nc, anchors), the DFL box logits and the
    class logits of all three levels, before the box decode and sigmoid. That is the tensor the
    numerical checks compare (decoded boxes are dominated by exact anchor offsets and would hide
    errors), and the decode belongs with NMS in post-processing. ``decode=True`` returns
    ultralytics' inference output (B, 4 + nc, anchors): boxes in pixels and class probabilities.
    The head runs its raw path by keeping ``training`` set on the head module alone (its BN is
    fused, so only the decode branch changes); :meth:`train` preserves that.
    """

    def __init__(self, det: nn.Module, meta: dict, decode: bool = False):
        super().__init__()
        self.det = det
        self.meta = meta
        self.decode = decode
        self.train(False)

    def train(self, mode: bool = True):
        super().train(mode)
        self.det.model[-1].training = mode or not self.decode
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.det(x)
        if isinstance(out, dict):
            return torch.cat((out["boxes"], out["scores"]), 1)
        while isinstance(out, (tuple, list)):
            out = out[0]
        return out


def _yaml_path(family: str) -> Path:
    if family not in FAMILIES:
        raise UserError(f"unknown family {family!r}: choose one of {', '.join(FAMILIES)}")
    from yolo_sm._offline import prepare_ultralytics

    prepare_ultralytics()
    import ultralytics

    path = Path(ultralytics.__file__).parent / "cfg" / "models" / FAMILIES[family]
    if not path.exists():
        raise UserError(f"this ultralytics ({ultralytics.__version__}) ships no {family} YAML")
    return path


def preset(family: str, scale: str) -> tuple[float, float, int]:
    """(depth, width, max_channels) of a preset such as ('yolov8', 's'), from ultralytics' YAML."""
    from ultralytics.nn.tasks import yaml_model_load

    d = yaml_model_load(_yaml_path(family))
    if scale not in d.get("scales", {}):
        raise UserError(
            f"unknown {family} preset {scale!r}: choose one of {', '.join(d['scales'])}"
        )
    depth, width, max_ch = d["scales"][scale]
    return float(depth), float(width), int(max_ch)


def build_yolo(
    family: str = "yolov8",
    width: float | str = 1.0,
    depth: float | None = None,
    max_channels: int = 2048,
    nc: int = 80,
    fuse: bool = True,
    seed: int = 0,
    decode: bool = False,
    calibrate: bool = True,
) -> YoloForward:
    """A YOLO detector from ultralytics' YAML with random weights, fused Conv+BN, in eval mode.

    ``width`` is a multiplier (0.0625 to 4) or a preset letter (n/s/m/l/x, whose YAML depth and
    max_channels then apply unless ``depth`` is given). ``depth`` defaults to 0.33 (v8/11 n/s).
    ultralytics rounds each layer's channels up to a multiple of 8 after capping the YAML
    channels at ``max_channels``: see :func:`channel_table` for where that bites.

    ``calibrate`` (default) sets the BatchNorm statistics from photos and noise before fusing
    (:func:`calibrate_bn`): with ultralytics' default init and identity BN statistics, activations
    shrink about tenfold per layer (std ~5e-9 after the backbone of YOLOv8s), so fp16 would run
    on subnormals and zeros and the output would not depend on the input.
    """
    scale = None
    if isinstance(width, str) and not _is_number(width):
        scale = width
        p_depth, width, max_channels = preset(family, scale)
        depth = p_depth if depth is None else depth
    width = float(width)
    depth = 0.33 if depth is None else float(depth)
    if not (MIN_WIDTH <= width <= MAX_WIDTH) or math.isnan(width):
        raise UserError(f"width must be between {MIN_WIDTH} and {MAX_WIDTH}, got {width}")
    if not 0 < depth <= 4:
        raise UserError(f"depth must be in (0, 4], got {depth}")
    if int(max_channels) <= 0 or int(nc) <= 0:
        raise UserError("max_channels and nc must be positive integers")
    path = _yaml_path(family)
    from ultralytics.nn.tasks import DetectionModel, yaml_model_load

    cfg = copy.deepcopy(yaml_model_load(path))
    cfg["scales"] = {"custom": [depth, width, int(max_channels)]}
    cfg["scale"] = "custom"
    torch.manual_seed(seed)
    det = DetectionModel(cfg, ch=3, nc=nc, verbose=False)
    if calibrate:
        calibrate_bn(det, seed=seed)
    det.eval()
    if fuse:
        det = det.fuse(verbose=False)
    for p in det.parameters():
        p.requires_grad_(False)
    n_backbone = len(cfg["backbone"])
    meta = {
        "family": family,
        "width": width,
        "depth": depth,
        "max_channels": int(max_channels),
        "nc": nc,
        "scale": scale,
        "yaml": [list(x) for x in cfg["backbone"] + cfg["head"]],
        "n_backbone": n_backbone,
        "fused": fuse,
    }
    return YoloForward(det, meta, decode=decode)


def calibration_batches(imgsz: int = 160, seed: int = 0) -> list[torch.Tensor]:
    """Inputs for :func:`calibrate_bn`: ultralytics' two bundled photos (bus, zidane),
    letterboxed, as they are and mirrored, then uniform noise in [0, 1) (what the timing and the
    numerical checks feed): two batches of four."""
    from yolo_sm.images import load_images

    real = torch.from_numpy(load_images(None, imgsz))
    gen = torch.Generator().manual_seed(seed + 1)
    noise = torch.rand(4, 3, imgsz, imgsz, generator=gen)
    return [torch.cat([real, real.flip(3)]), noise]


def calibrate_bn(
    model: nn.Module, batches: list[torch.Tensor] | None = None, seed: int = 0
) -> nn.Module:
    """Give every BatchNorm the running statistics of its input over the calibration forwards
    (train mode, cumulative average; default :func:`calibration_batches`), so each conv's output
    has unit scale on photos and on noise, as in a trained network. Weights are untouched;
    returns ``model`` with its mode restored."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return model
    was_training = model.training
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative moving average over the calibration forwards
    model.train()
    with torch.no_grad():
        for x in batches if batches is not None else calibration_batches(seed=seed):
            model(x)
    model.train(was_training)
    return model


def build(family: str, width: float | str = 1.0, **kw) -> nn.Module:
    """Any model by family name: ``yolov8`` / ``yolo11`` (``width`` multiplier or preset letter),
    ``wide`` (the wide conv stack, ``width`` = width factor) or ``resnet18`` ... ``resnet152``
    (``width`` ignored). ``kw`` (depth, max_channels, ...) applies to the YOLO families only."""
    fam = str(family).lower()
    if fam == "wide":
        return wide_conv_stack(float(width))
    if fam.startswith("resnet"):
        try:
            depth = int(fam[6:] or 101)
        except ValueError:
            raise UserError(f"unknown family {family!r}: use resnet18/34/50/101/152") from None
        return resnet_backbone(depth)
    return build_yolo(fam, width, **kw)


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def layers(model: nn.Module) -> list[LayerRef]:
    """The model's layers in forward order, with stage and (for YOLO) requested widths."""
    if isinstance(model, YoloForward):
        return _yolo_layers(model)
    if hasattr(model, "layer_refs"):
        return model.layer_refs()
    return [
        LayerRef(i, name, type(m).__name__, "backbone", m)
        for i, (name, m) in enumerate(model.named_children())
    ]


def _yolo_layers(model: YoloForward) -> list[LayerRef]:
    meta = model.meta
    out = []
    for i, m in enumerate(model.det.model):
        spec = meta["yaml"][i]
        kind = type(m).__name__
        stage = "backbone" if i < meta["n_backbone"] else "neck"
        if i == len(model.det.model) - 1:
            stage = "head"
        requested, capped = None, False
        args = spec[3]
        if args and isinstance(args[0], (int, float)) and kind not in ("Concat", "Upsample"):
            if stage != "head":
                requested = args[0] * meta["width"]
                capped = args[0] > meta["max_channels"]
        out.append(LayerRef(i, f"model.{i}", kind, stage, m, requested, capped))
    return out


def channel_table(model: nn.Module, imgsz: int = 640, bytes_per_element: int = 2):
    """One row per layer: index, name, module_type, stage, in/out channels, stride, out H x W,
    params, FLOPs, activation bytes, and where the real width differs from the requested one.

    FLOPs count 2 per multiply-add of every Conv2d and Linear (the ultralytics/thop "GFLOPs"
    convention), bias, activations, pooling, upsampling and the box decode excluded; per image.
    ``activation_bytes`` is the layer's output per image at ``bytes_per_element`` (2: fp16).
    Shapes come from a forward on the meta device, so nothing is computed.
    """
    import pandas as pd

    refs = layers(model)
    shapes: dict[int, dict] = {}
    flops = {r.index: 0 for r in refs}

    def conv_hook(idx):
        def hook(mod, inp, out):
            k = math.prod(mod.kernel_size) if isinstance(mod, nn.Conv2d) else 1
            cin = mod.in_channels // mod.groups if isinstance(mod, nn.Conv2d) else mod.in_features
            flops[idx] += 2 * cin * k * out[0].numel()  # per image: out[0] drops batch

        return hook

    def layer_hook(idx):
        def hook(mod, inp, out):
            ins = [t for t in _flat(inp) if isinstance(t, torch.Tensor) and t.dim() == 4]
            if isinstance(out, dict) and "boxes" in out:  # detection head (raw, undecoded)
                outs = [out["boxes"], out["scores"]]
            else:
                outs = [t for t in _flat(out) if isinstance(t, torch.Tensor)]
            main = outs[0]
            shapes[idx] = {
                "in_channels": sum(t.shape[1] for t in ins),
                "out_channels": sum(t.shape[1] for t in outs),
                "out_h": main.shape[2] if main.dim() == 4 else None,
                "out_w": main.shape[3] if main.dim() == 4 else None,
                "out_elems": sum(t[0].numel() for t in outs),
            }

        return hook

    # Shapes from a forward on the meta device: no arithmetic, any width in milliseconds.
    meta_model = copy.deepcopy(model).float().to("meta")
    if isinstance(meta_model, YoloForward):  # skip the box decode (it reads stride values)
        meta_model.decode = False
        meta_model.train(False)
    hooks = []
    for r in layers(meta_model):
        hooks.append(r.module.register_forward_hook(layer_hook(r.index)))
        for sub in r.module.modules():
            if isinstance(sub, (nn.Conv2d, nn.Linear)):
                hooks.append(sub.register_forward_hook(conv_hook(r.index)))
    try:
        with torch.no_grad():
            meta_model(torch.empty(1, 3, imgsz, imgsz, device="meta"))
    finally:
        for h in hooks:
            h.remove()
    rows = []
    for r in refs:
        s = shapes.get(r.index, {})
        out_ch = s.get("out_channels")
        rows.append(
            {
                "index": r.index,
                "layer": r.name,
                "module_type": r.module_type,
                "stage": r.stage,
                "in_channels": s.get("in_channels"),
                "out_channels": out_ch,
                "requested_channels": r.requested_channels,
                "rounded": r.requested_channels is not None and out_ch != r.requested_channels,
                "capped": r.capped,
                "stride": imgsz // s["out_h"] if s.get("out_h") else None,
                "out_h": s.get("out_h"),
                "out_w": s.get("out_w"),
                "params": sum(p.numel() for p in r.module.parameters()),
                "flops": flops[r.index],
                "activation_bytes": s.get("out_elems", 0) * bytes_per_element,
            }
        )
    df = pd.DataFrame(rows)
    df.attrs.update({"imgsz": imgsz, "flops_convention": "2 per multiply-add (Conv2d, Linear)"})
    return df


def _flat(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flat(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _flat(y)
    else:
        yield x


def model_flops(model: nn.Module, imgsz: int = 640) -> int:
    """Total FLOPs per image (2 per multiply-add), from :func:`channel_table`."""
    return int(channel_table(model, imgsz)["flops"].sum())


def width_summary(
    family: str = "yolov8",
    widths=(0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0),
    depth: float = 0.33,
    max_channels: int = 2048,
    imgsz: int = 640,
):
    """One row per width: GFLOPs and parameters per image, ratios to width 1.0, and how many
    layers ultralytics rounded or capped (from :func:`channel_table`)."""
    import pandas as pd

    rows = []
    for w in widths:
        m = build_yolo(family, w, depth=depth, max_channels=max_channels, calibrate=False)
        t = channel_table(m, imgsz)
        rows.append(
            {
                "family": family,
                "width": float(w),
                "gflops_per_img": t.flops.sum() / 1e9,
                "params": int(t.params.sum()),
                "layers_rounded": int(t.rounded.sum()),
                "layers_capped": int(t.capped.sum()),
                "max_out_channels": int(t.out_channels.max()),
            }
        )
    df = pd.DataFrame(rows)
    base = df.loc[(df.width - 1.0).abs().idxmin()]
    df["flops_vs_width1"] = df.gflops_per_img / base.gflops_per_img
    df["params_vs_width1"] = df.params / base.params
    return df


# --- the wide conv stack ----------------------------------------------------------------------


class WideConvStack(nn.Module):
    """Conv3x3+BN+SiLU blocks whose output channels are ``int(base * width_factor)`` (the
    width-scaling article's WideConvBlock: 256 -> 320 and 512 -> 640 at x1.25). Each stage opens
    with a stride-2 block; BN is fused for inference like the YOLO models."""

    def __init__(self, width_factor, base_channels, blocks_per_stage, in_channels):
        super().__init__()
        from yolo_sm._offline import prepare_ultralytics

        prepare_ultralytics()
        from ultralytics.nn.modules import Conv
        from ultralytics.utils.torch_utils import fuse_conv_and_bn

        self.width_factor = width_factor
        blocks, self._stages = [], []
        c_in = in_channels
        for s, base in enumerate(base_channels):
            c_out = int(base * width_factor)
            for b in range(blocks_per_stage):
                blocks.append(Conv(c_in, c_out, 3, 2 if b == 0 else 1))
                self._stages.append(f"stage{s}")
                c_in = c_out
        self.blocks = nn.Sequential(*blocks)
        self._fuse_fn = fuse_conv_and_bn

    def fuse(self) -> WideConvStack:
        """Fold each block's BatchNorm into its conv (eval-mode arithmetic unchanged)."""
        for conv in self.blocks:
            if hasattr(conv, "bn"):
                conv.conv = self._fuse_fn(conv.conv, conv.bn)
                delattr(conv, "bn")
                conv.forward = conv.forward_fuse
        return self

    def forward(self, x):
        return self.blocks(x)

    def layer_refs(self) -> list[LayerRef]:
        return [
            LayerRef(i, f"blocks.{i}", "WideConvBlock", self._stages[i], m)
            for i, m in enumerate(self.blocks)
        ]


def wide_conv_stack(
    width_factor: float = 1.0,
    base_channels: tuple[int, ...] = (64, 128, 256, 512),
    blocks_per_stage: int = 2,
    in_channels: int = 3,
    fuse: bool = True,
    seed: int = 0,
) -> WideConvStack:
    """The wide conv stack, random weights, eval mode: isolates width from the rest of YOLO."""
    if not (0 < width_factor <= MAX_WIDTH):
        raise UserError(f"width_factor must be in (0, {MAX_WIDTH}], got {width_factor}")
    if blocks_per_stage < 1 or not base_channels:
        raise UserError("wide_conv_stack needs at least one stage and one block per stage")
    torch.manual_seed(seed)
    stack = WideConvStack(width_factor, tuple(base_channels), blocks_per_stage, in_channels)
    calibrate_bn(stack, seed=seed)
    if fuse:
        stack.fuse()
    for p in stack.parameters():
        p.requires_grad_(False)
    return stack.eval()


# --- ResNet backbones -------------------------------------------------------------------------


class ResNetDetector(nn.Module):
    """A torchvision ResNet trunk (stem, layer1-4) with a small single-scale detection head on
    the stride-32 map: 3x3 conv to 256 + ReLU, then ``anchors*(4+nc)`` logits. Returns
    (B, 4+nc, anchors*H*W) like the YOLO head."""

    STAGES = ("stem", "layer1", "layer2", "layer3", "layer4", "head")

    def __init__(self, trunk: nn.Module, nc: int, anchors: int):
        super().__init__()
        self.stem = nn.Sequential(trunk.conv1, trunk.bn1, trunk.relu, trunk.maxpool)
        self.layer1, self.layer2, self.layer3, self.layer4 = (
            trunk.layer1,
            trunk.layer2,
            trunk.layer3,
            trunk.layer4,
        )
        c5 = trunk.fc.in_features
        self.nc, self.anchors = nc, anchors
        self.head = nn.Sequential(
            nn.Conv2d(c5, 256, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(256, anchors * (4 + nc), 1),
        )

    def forward(self, x):
        for name in self.STAGES:
            x = getattr(self, name)(x)
        b, _, h, w = x.shape
        return (
            x.view(b, self.anchors, 4 + self.nc, h * w).transpose(1, 2).reshape(b, 4 + self.nc, -1)
        )

    def layer_refs(self) -> list[LayerRef]:
        return [
            LayerRef(
                i,
                n,
                type(getattr(self, n)).__name__,
                "head" if n == "head" else "backbone",
                getattr(self, n),
            )
            for i, n in enumerate(self.STAGES)
        ]


def resnet_backbone(
    depth: int = 101, nc: int = 1, anchors: int = 2, fuse: bool = True, seed: int = 0
) -> ResNetDetector:
    """torchvision ResNet-``depth`` (18/34/50/101/152), random weights, BN folded into the convs,
    with a small detection head (defaults: one class and two anchors, as a face detector)."""
    import torchvision

    builders = {18: "resnet18", 34: "resnet34", 50: "resnet50", 101: "resnet101", 152: "resnet152"}
    if depth not in builders:
        raise UserError(f"ResNet depth must be one of {', '.join(map(str, builders))}, got {depth}")
    torch.manual_seed(seed)
    trunk = getattr(torchvision.models, builders[depth])(weights=None)
    calibrate_bn(trunk, seed=seed)
    trunk.eval()
    if fuse:
        _fuse_resnet(trunk)
    det = ResNetDetector(trunk, nc, anchors).eval()
    for p in det.parameters():
        p.requires_grad_(False)
    return det


def _fuse_resnet(trunk: nn.Module) -> None:
    """Fold every BatchNorm into the conv before it (eval-mode arithmetic is unchanged)."""
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    def fold(parent, conv_name, bn_name):
        setattr(
            parent,
            conv_name,
            fuse_conv_bn_eval(getattr(parent, conv_name), getattr(parent, bn_name)),
        )
        setattr(parent, bn_name, nn.Identity())

    fold(trunk, "conv1", "bn1")
    for layer in (trunk.layer1, trunk.layer2, trunk.layer3, trunk.layer4):
        for block in layer:
            for i in (1, 2, 3):
                if hasattr(block, f"conv{i}"):
                    fold(block, f"conv{i}", f"bn{i}")
            if block.downsample is not None:
                ds = block.downsample
                ds[0] = fuse_conv_bn_eval(ds[0], ds[1])
                ds[1] = nn.Identity()
