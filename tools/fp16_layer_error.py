"""Where does a YOLO preset's fp16 error come from? (sweep_presets' error rows)

Runs the model (random weights, BatchNorm calibrated as the sweep builds it) in fp32 and fp16 on
the bundled photos, on the CPU by default, and prints the relative L2 error of every top-level
layer's output against fp32, the head's box and class branches apart, and for models with an
attention block (yolo11's C2PSA) the scale of its attention logits, whose softmax fp16 rounds.

    python3 tools/fp16_layer_error.py --family yolo11 --scales n s m --imgsz 640
"""

from __future__ import annotations

import argparse
import copy


def main(argv=None) -> int:
    import torch

    from yolo_sm.core.engines import EngineConfig
    from yolo_sm.core.engines.base import head_tensor, photo_input, relative_l2
    from yolo_sm.core.models import build_yolo

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", default="yolo11")
    p.add_argument("--scales", nargs="+", default=["n"])
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--device", default="cpu")
    a = p.parse_args(argv)
    for scale in a.scales:
        model = build_yolo(a.family, scale)
        cfg = EngineConfig(
            backend="eager", precision="fp16", layout="nchw", batch=a.batch, imgsz=a.imgsz,
            device=a.device, check=False,
        )  # fmt: skip
        x = photo_input(cfg).float().to(a.device)
        acts: dict[str, list] = {}
        logits: dict[str, tuple] = {}

        def keep(name, acts=acts):
            def hook(mod, args, out):
                if isinstance(out, torch.Tensor):
                    acts.setdefault(name, []).append(out.detach().float().cpu())

            return hook

        def attention_logits(name, logits=logits):
            def hook(att, args):  # the fp32 model's q.k^T * scale, as Attention.forward has it
                xin = args[0]
                b, _, h, w = xin.shape
                qkv = att.qkv(xin).float().view(b, att.num_heads, -1, h * w)
                q, k, _ = qkv.split([att.key_dim, att.key_dim, att.head_dim], dim=2)
                s = (q.transpose(-2, -1) @ k) * att.scale
                logits[name] = (att.num_heads, float(s.abs().max()), float(s.std()))

            return hook

        from ultralytics.nn.modules.block import Attention

        m32 = copy.deepcopy(model).float().eval().to(a.device)
        m16 = copy.deepcopy(model).half().eval().to(a.device)
        for tag, mm in (("fp32", m32), ("fp16", m16)):
            for i, layer in enumerate(mm.det.model):
                layer.register_forward_hook(keep(f"{i}:{type(layer).__name__}"))
            if tag == "fp32":
                for name, mod in mm.named_modules():
                    if isinstance(mod, Attention):
                        mod.register_forward_pre_hook(attention_logits(name))
        with torch.no_grad():
            o32 = head_tensor(m32(x)).float().cpu()
            o16 = head_tensor(m16(x.half())).float().cpu()
        reg = o32.shape[1] - model.det.model[-1].nc
        print(
            f"{a.family} {scale} {a.imgsz} px: head {relative_l2(o16, o32):.4f} "
            f"(box {relative_l2(o16[:, :reg], o32[:, :reg]):.4f}, "
            f"class {relative_l2(o16[:, reg:], o32[:, reg:]):.4f})"
        )
        for name, v in acts.items():
            if len(v) == 2:
                err, top = relative_l2(v[1], v[0]), float(v[0].abs().max())
                print(f"  {name:14s} {err:.4f}  max|fp32| {top:.3g}")
        for name, (heads, mx, sd) in logits.items():
            print(f"  attention {name}: {heads} heads, logits max |{mx:.1f}|, std {sd:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
