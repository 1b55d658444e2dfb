"""Layer lists and channel tables: one row per layer with channels, shapes, parameters, FLOPs."""

from __future__ import annotations

import copy
import dataclasses
import math

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from yolo_sm.core.models.common import LayerRef, hooked
from yolo_sm.core.models.yolo import YoloForward


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
    meta, modules, out = model.meta, model.det.model, []
    for i, m in enumerate(modules):
        kind, args = type(m).__name__, meta["yaml"][i][3]
        stage = "head" if i == len(modules) - 1 else "neck"
        stage = "backbone" if i < meta["n_backbone"] and stage != "head" else stage
        ref = LayerRef(i, f"model.{i}", kind, stage, m)
        sized = args and isinstance(args[0], (int, float)) and kind not in ("Concat", "Upsample")
        if sized and stage != "head":
            c, cap, w = args[0], meta["max_channels"], meta["width"]
            ref = dataclasses.replace(
                ref, requested_channels=c * w, capped=c > cap, capped_channels=min(c, cap) * w
            )
        out.append(ref)
    return out


def channel_table(model: nn.Module, imgsz: int = 640, bytes_per_element: int = 2):
    """One row per layer: channels, stride, output size, params, FLOPs (2 per MAC of Conv2d and
    Linear, per image), ``activation_bytes`` (per image), ``in_elems``, ``conv_io_elems``,
    ``conv_weight_elems`` (elements). Shapes from a meta-device forward.
    """
    import pandas as pd

    refs = layers(model)
    shapes: dict[int, dict] = {}
    conv = {r.index: [0, 0, 0] for r in refs}  # FLOPs, conv in+out elements, weight elements

    def conv_hook(idx):
        def hook(mod, inp, out):
            k = math.prod(mod.kernel_size) if isinstance(mod, nn.Conv2d) else 1
            cin = mod.in_channels // mod.groups if isinstance(mod, nn.Conv2d) else mod.in_features
            c = conv[idx]
            c[0] += 2 * cin * k * out[0].numel()  # per image: out[0] drops batch
            c[1] += inp[0][0].numel() + out[0].numel()
            c[2] += mod.weight.numel()

        return hook

    def layer_hook(idx):
        def hook(mod, inp, out):
            ins = [t for t in tree_leaves(inp) if isinstance(t, torch.Tensor) and t.dim() == 4]
            if isinstance(out, dict) and "boxes" in out:  # detection head (raw, undecoded)
                outs = [out["boxes"], out["scores"]]
            else:
                outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            main = outs[0]
            shapes[idx] = {
                "in_channels": sum(t.shape[1] for t in ins),
                "in_elems": sum(t[0].numel() for t in ins),
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
    with hooked(hooks), torch.no_grad():
        meta_model(torch.empty(1, 3, imgsz, imgsz, device="meta"))
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
                # rounded up to a multiple of 8 (after the cap, which `capped` reports)
                "rounded": r.capped_channels is not None and out_ch != r.capped_channels,
                "capped": r.capped,
                "stride": imgsz // s["out_h"] if s.get("out_h") else None,
                "out_h": s.get("out_h"),
                "out_w": s.get("out_w"),
                "params": sum(p.numel() for p in r.module.parameters()),
                "flops": conv[r.index][0],
                "activation_bytes": s.get("out_elems", 0) * bytes_per_element,
                "in_elems": s.get("in_elems", 0),
                "conv_io_elems": conv[r.index][1],
                "conv_weight_elems": conv[r.index][2],
            }
        )
    df = pd.DataFrame(rows)
    df.attrs.update({"imgsz": imgsz, "flops_convention": "2 per multiply-add (Conv2d, Linear)"})
    return df


def model_flops(model: nn.Module, imgsz: int = 640) -> int:
    """Total FLOPs per image (2 per multiply-add), from :func:`channel_table`."""
    return int(channel_table(model, imgsz)["flops"].sum())
