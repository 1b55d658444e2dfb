"""The copy-free engine (backend ``copyfree``, fp16/bf16 NHWC, CUDA only): a YOLO whose
convolutions write straight into their slice of the concatenation that reads them.

Each ultralytics ``Conv`` block (convolution + bias + SiLU, BatchNorm folded) is one cuDNN
frontend graph with bias, SiLU and, in a bottleneck, the residual add in its epilogue; its output
tensor is a channel slice of a preallocated NHWC buffer (cuDNN takes strided tensors). A C2f
block's branches, the neck's upsample and the backbone features the neck concatenates all land
in their slice of one buffer, so no concatenation copy and no separate bias kernel remains in the
backbone and neck. Left as PyTorch: SPPF's three max-pools (each written into its slice by one
copy) and the detection head's own concatenations. The planned forward is captured in one CUDA
graph like the ``cudagraph`` backend. ``info['convs']``: how many convolutions ran as graphs
with a strided input and output, and how many needed a contiguous copy (cuDNN declined).
"""

from __future__ import annotations

import torch
from torch import nn

from yolo_sm.core.engines.qconv import import_cudnn

_HANDLES: dict = {}  # one cuDNN handle per device
#: cuDNN's ranked plans each convolution graph times on its own tensors before it keeps one
PLANS = 4


def _folded(block) -> tuple[torch.Tensor, torch.Tensor]:
    """(weight, bias) of an ultralytics Conv block with its BatchNorm folded in."""
    conv, bn = block.conv, getattr(block, "bn", None)
    w = conv.weight.detach().float()
    b = conv.bias.detach().float() if conv.bias is not None else w.new_zeros(w.shape[0])
    if bn is not None:  # in float32: the engine's fp16 would round the folded scale twice
        s = bn.weight.float() / torch.sqrt(bn.running_var.float() + bn.eps)
        w = w * s.reshape(-1, 1, 1, 1)
        b = (b - bn.running_mean.float()) * s + bn.bias.float()
    return w, b


class _Graph:
    """One cuDNN graph: conv(x, w) + bias, then SiLU and a residual add where asked, written
    into ``y``; every tensor with the strides it has (a slice of a larger buffer included)."""

    def __init__(self, conv: nn.Conv2d, w, b, x, y, silu: bool, res):
        cudnn = import_cudnn("the copyfree engine")
        dt = cudnn.data_type
        io = {torch.float16: dt.HALF, torch.bfloat16: dt.BFLOAT16}[x.dtype]
        if x.device not in _HANDLES:
            _HANDLES[x.device] = cudnn.create_handle()
        self.cudnn, self.handle = cudnn, _HANDLES[x.device]
        k = w.shape[0]
        self.w = w.to(x.dtype).contiguous(memory_format=torch.channels_last)
        self.b = b.float().reshape(1, k, 1, 1).contiguous(memory_format=torch.channels_last)
        g = cudnn.pygraph(
            io_data_type=io,
            intermediate_data_type=dt.FLOAT,
            compute_data_type=dt.FLOAT,
            handle=self.handle,
        )

        def tensor(name, t, dtype=io):
            return g.tensor(name=name, dim=list(t.shape), stride=list(t.stride()), data_type=dtype)

        self.X, self.W, self.B = tensor("X", x), tensor("W", self.w), tensor("B", self.b, dt.FLOAT)
        out = g.conv_fprop(
            image=self.X,
            weight=self.W,
            padding=list(conv.padding),
            stride=list(conv.stride),
            dilation=list(conv.dilation),
            compute_data_type=dt.FLOAT,
        )
        out = g.bias(input=out, bias=self.B)
        if silu:
            out = g.swish(input=out)
        self.R = None
        if res is not None:
            self.R = tensor("R", res)
            out = g.add(a=out, b=self.R)
        out.set_output(True).set_data_type(io).set_dim(list(y.shape)).set_stride(list(y.stride()))
        self.Y = out
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        g.check_support()
        self.graph, self.plan = g, self._fastest(x, y, res)

    def _fastest(self, x, y, res, plans: int = PLANS, reps: int = 3) -> int:
        """The fastest of cuDNN's first ``plans`` ranked plans on these very tensors (CUDA
        events, ``reps`` calls after one warm-up); a plan that does not build is skipped."""
        g, best = self.graph, None
        stream = torch.cuda.current_stream(x.device)
        self.cudnn.set_stream(self.handle, stream.cuda_stream)
        for i in range(min(plans, g.get_execution_plan_count())):
            try:
                g.build_plan_at_index(i)
                ws = torch.empty(
                    max(g.get_workspace_size_plan_at_index(i), 1),
                    dtype=torch.uint8,
                    device=x.device,
                )
                g.execute_plan_at_index(self._feeds(x, y, res), ws, i, handle=self.handle)
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(stream)
                for _ in range(reps):
                    g.execute_plan_at_index(self._feeds(x, y, res), ws, i, handle=self.handle)
                b.record(stream)
                b.synchronize()
            except Exception:  # noqa: BLE001 - a plan that declines is skipped
                continue
            if best is None or a.elapsed_time(b) < best[0]:
                best = (a.elapsed_time(b), i, ws)
        if best is None:
            raise RuntimeError("cuDNN built no plan for this convolution")
        self.ws = best[2]
        return best[1]

    def _feeds(self, x, y, res) -> dict:
        feeds = {self.X: x, self.W: self.w, self.B: self.b, self.Y: y}
        if self.R is not None:
            feeds[self.R] = res
        return feeds

    def __call__(self, x, y, res=None) -> None:
        self.cudnn.set_stream(self.handle, torch.cuda.current_stream(x.device).cuda_stream)
        self.graph.execute_plan_at_index(
            self._feeds(x, y, res), self.ws, self.plan, handle=self.handle
        )


class CopyFree(nn.Module):
    """``model`` (yolo_sm's YOLO: an ultralytics DetectionModel as ``.det``, in fp16/bf16 NHWC
    on a GPU) run layer by layer with every buffer planned per input shape (on its first call)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        det = getattr(model, "det", model)
        if not hasattr(det, "model") or not hasattr(det.model[-1], "f"):
            raise TypeError("the copyfree engine runs ultralytics YOLO detectors only")
        self.layers = list(det.model)
        self.save = set(getattr(det, "save", ()))
        self.graphs: dict = {}
        self.buffers: dict = {}
        self.counts = {"strided": 0, "copied": 0}
        self.concat_copies = 0  # a concatenation input that landed outside its slice
        self._bind_head()

    # -- convolutions ---------------------------------------------------------------------
    def conv(self, block, x, y=None, res=None) -> torch.Tensor:
        """``block`` (an ultralytics Conv, or a plain Conv2d: no SiLU) on ``x`` into ``y`` (a
        new NHWC tensor where None), plus ``res``; returns ``y``."""
        plain = isinstance(block, nn.Conv2d)
        conv = block if plain else block.conv
        silu = not plain and isinstance(block.act, nn.SiLU)
        if conv.groups != 1 or not (plain or silu or isinstance(block.act, nn.Identity)):
            # not fused here: PyTorch's own kernels (an ultralytics-fused block has no bn)
            if plain or hasattr(block, "bn"):
                r = type(block).forward(block, x)
            else:
                r = block.forward_fuse(x)
            return r if y is None else y.copy_(r if res is None else r + res)
        n, _, h, w = x.shape
        (pr, pc), (sr, sc), (dr, dc) = conv.padding, conv.stride, conv.dilation
        r, s = conv.kernel_size
        ho = (h + 2 * pr - dr * (r - 1) - 1) // sr + 1
        wo = (w + 2 * pc - dc * (s - 1) - 1) // sc + 1
        if y is None:
            y = torch.empty((n, conv.out_channels, ho, wo), dtype=x.dtype, device=x.device)
            y = y.contiguous(memory_format=torch.channels_last)
        key = (id(block), x.shape, x.stride(), y.stride(), res is not None)
        if key not in self.graphs:
            wt, b = (conv.weight, conv.bias) if plain else _folded(block)
            if b is None:
                b = torch.zeros(conv.out_channels, device=x.device)
            try:
                self.graphs[key] = (_Graph(conv, wt, b, x, y, silu, res), False)
                self.counts["strided"] += 1
            except Exception:  # noqa: BLE001 - cuDNN declined the strides: packed copies
                xc = x.contiguous(memory_format=torch.channels_last)
                yc = torch.empty_like(y, memory_format=torch.channels_last)
                rc = None if res is None else res.contiguous(memory_format=torch.channels_last)
                self.graphs[key] = (_Graph(conv, wt, b, xc, yc, silu, rc), True)
                self.counts["copied"] += 1
        graph, packed = self.graphs[key]
        if not packed:
            graph(x, y, res)
            return y
        cl = torch.channels_last
        yc = torch.empty_like(y, memory_format=cl)
        rc = None if res is None else res.contiguous(memory_format=cl)
        graph(x.contiguous(memory_format=cl), yc, rc)
        return y.copy_(yc)

    def _bind_head(self) -> None:
        """The head's Conv blocks and the last convolution of each of its branches (cv2, cv3)
        run as graphs too, into new tensors; its DFL stays PyTorch's."""
        head = self.layers[-1]
        branches = [s for name in ("cv2", "cv3") for s in getattr(head, name, ())]
        mods = [m for s in branches for m in s.modules() if type(m).__name__ == "Conv"]
        mods += [s[-1] for s in branches if isinstance(s[-1], nn.Conv2d)]
        for mod in mods:
            mod.forward = lambda x, _m=mod: self.conv(_m, x)

    # -- buffers ----------------------------------------------------------------------------
    def _buffer(self, key, shape, like) -> torch.Tensor:
        full = (key, tuple(shape))
        if full not in self.buffers:
            buf = torch.empty(shape, dtype=like.dtype, device=like.device)
            self.buffers[full] = buf.contiguous(memory_format=torch.channels_last)
        return self.buffers[full]

    def _destinations(self, x) -> dict[int, torch.Tensor]:
        """Layer index -> the slice of the concatenation buffer its output is written into,
        from one shape pass of the plain model (hooks read each layer's output shape)."""
        shapes: dict[int, tuple] = {}
        hooks = [
            m.register_forward_hook(lambda m, a, o, i=i: shapes.__setitem__(i, tuple(o.shape)))
            for i, m in enumerate(self.layers[:-1])
        ]
        try:
            self.model(x)
        finally:
            for h in hooks:
                h.remove()
        dest = {}
        for i, m in enumerate(self.layers):
            if type(m).__name__ != "Concat" or m.d != 1:
                continue
            srcs = [i - 1 if j == -1 else j for j in m.f]
            n, _, h, w = shapes[srcs[0]]
            total = sum(shapes[j][1] for j in srcs)
            buf = self._buffer(("concat", i), (n, total, h, w), x)
            c0 = 0
            for j in srcs:
                c = shapes[j][1]
                if j not in dest:  # a layer feeds one concatenation in a YOLO
                    dest[j] = buf[:, c0 : c0 + c]
                c0 += c
            dest[i] = buf
        return dest

    # -- the forward ------------------------------------------------------------------------
    def forward(self, x: torch.Tensor):
        key = ("dest", tuple(x.shape))
        if key not in self.buffers:
            self.buffers[key] = self._destinations(x)
        dest = self.buffers[key]
        self.concat_copies = 0  # of this forward
        y: list = []
        for i, m in enumerate(self.layers):
            if m.f != -1:
                x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
            x = self._layer(i, m, x, dest.get(i))
            y.append(x if i in self.save or i in dest else None)
        return x if torch.is_tensor(x) else x[0]  # the head's raw output (its hook's tensor)

    def _layer(self, i, m, x, out):
        name = type(m).__name__
        if name == "Conv":
            return self.conv(m, x, out)
        if name == "C2f":
            return self._c2f(i, m, x, out)
        if name == "SPPF":
            return self._sppf(i, m, x, out)
        nearest2 = isinstance(m, nn.Upsample) and m.mode == "nearest" and m.scale_factor == 2.0
        if nearest2 and out is not None:
            n, c, h, w = x.shape
            out.unflatten(2, (h, 2)).unflatten(4, (w, 2)).copy_(x[:, :, :, None, :, None])
            return out
        if name == "Concat" and out is not None:
            c0 = 0
            for t in x:  # each input was written into its slice; one that was not is copied
                c = t.shape[1]
                if t.data_ptr() != out[:, c0 : c0 + c].data_ptr():
                    out[:, c0 : c0 + c].copy_(t)
                    self.concat_copies += 1
                c0 += c
            return out
        r = m(x)
        if out is not None:
            self.concat_copies += 1
            return out.copy_(r)
        return r

    def _c2f(self, i, m, x, out):
        n, _, h, w = x.shape
        c = m.c
        buf = self._buffer(("c2f", i), (n, (2 + len(m.m)) * c, h, w), x)
        self.conv(m.cv1, x, buf[:, : 2 * c])
        for k, b in enumerate(m.m):
            inp = buf[:, (1 + k) * c : (2 + k) * c]
            t = self.conv(b.cv1, inp)
            self.conv(b.cv2, t, buf[:, (2 + k) * c : (3 + k) * c], inp if b.add else None)
        return self.conv(m.cv2, buf, out)

    def _sppf(self, i, m, x, out):
        n, _, h, w = x.shape
        c = m.cv1.conv.out_channels
        buf = self._buffer(("sppf", i), (n, 4 * c, h, w), x)
        self.conv(m.cv1, x, buf[:, :c])
        for k in range(1, 4):
            buf[:, k * c : (k + 1) * c].copy_(m.m(buf[:, (k - 1) * c : k * c]))
        return self.conv(m.cv2, buf, out)
