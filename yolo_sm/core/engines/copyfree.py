"""Backend ``copyfree`` (fp16/bf16 NHWC, CUDA): each ``Conv`` block one cuDNN graph (BN folded,
bias/SiLU/residual fused) writing into its slice of the concat that reads it, SPPF's pools and the
upsamples too, the head's branches into their slice of its one raw output; one CUDA graph."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from yolo_sm.core.engines.qconv import (
    CL,
    conv_graph,
    conv_out_hw,
    finish_graph,
    import_cudnn,
    time_plans,
)
from yolo_sm.core.nms import cached_kernel, kernel_failed, triton_cdiv

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
        self.cudnn = cudnn
        self.w = w.to(x.dtype).contiguous(memory_format=CL)
        self.b = b.float().reshape(1, -1, 1, 1).contiguous(memory_format=CL)
        g, self.handle, tensor, self.X, self.W, out = conv_graph(
            cudnn, x.device, io, x, self.w, io, conv, dt.FLOAT
        )
        self.B = tensor("B", self.b, dt.FLOAT)
        out = g.bias(input=out, bias=self.B)
        if silu:
            out = g.swish(input=out)
        self.R = None
        if res is not None:
            self.R = tensor("R", res, io)
            out = g.add(a=out, b=self.R)
        out.set_output(True).set_data_type(io).set_dim(list(y.shape)).set_stride(list(y.stride()))
        self.Y = out
        finish_graph(g, [cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        self.graph = g
        # the fastest of the first PLANS ranked plans on these very tensors
        best, _ = time_plans(cudnn, g, self.handle, self._feeds(x, y, res), x.device, PLANS, 3, 1)
        if best is None:
            raise RuntimeError("cuDNN built no plan for this convolution")
        self.plan, self.ws_bytes = best[1], best[3].numel()

    def _feeds(self, x, y, res) -> dict:
        feeds = {self.X: x, self.W: self.w, self.B: self.b, self.Y: y, self.R: res}
        return {node: t for node, t in feeds.items() if node is not None}

    def __call__(self, x, y, res=None) -> None:
        self.cudnn.set_stream(self.handle, torch.cuda.current_stream(x.device).cuda_stream)
        # a workspace per call, as every buffer (CopyFree.forward): none is shared between
        # CUDA graphs of this module replayed side by side
        ws = torch.empty(self.ws_bytes, dtype=torch.uint8, device=x.device)
        self.graph.execute_plan_at_index(self._feeds(x, y, res), ws, self.plan, handle=self.handle)


class CopyFree(nn.Module):
    """``model`` (yolo_sm's YOLO: an ultralytics DetectionModel as ``.det``, in fp16/bf16 NHWC
    on a GPU) run layer by layer, its buffers planned per input shape (on its first call) and
    allocated anew by every forward: CUDA graphs captured from it (a pipeline's slots) share
    none, each holds its own in its pool."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        det = getattr(model, "det", model)
        if not hasattr(det, "model") or not hasattr(det.model[-1], "f"):
            raise TypeError("the copyfree engine runs ultralytics YOLO detectors only")
        self.layers = list(det.model)
        self.save = set(getattr(det, "save", ()))
        self.graphs: dict = {}
        self.shapes: dict = {}  # input shape -> each layer's output shape
        self.buffers: dict = {}  # this forward's
        self.counts = {"strided": 0, "copied": 0}
        self.concat_copies = 0  # a concatenation input that landed outside its slice
        self.pointwise: dict = {}  # the head's 1x1 convolutions' (weight, bias) for the kernel
        self._bind_head()

    def conv(self, block, x, y=None, res=None) -> torch.Tensor:
        """``block`` (an ultralytics Conv, or a plain Conv2d: no SiLU) on ``x`` into ``y`` (a
        new NHWC tensor where None), plus ``res``; returns ``y``."""
        plain = isinstance(block, nn.Conv2d)
        conv = block if plain else block.conv
        silu = not plain and isinstance(block.act, nn.SiLU)
        if conv.groups != 1 or not (plain or silu or isinstance(block.act, nn.Identity)):
            # not fused here: PyTorch's own kernels (an ultralytics-fused block has no bn)
            fused = not plain and not hasattr(block, "bn")
            r = block.forward_fuse(x) if fused else type(block).forward(block, x)
            return r if y is None else y.copy_(r if res is None else r + res)
        n, _, h, w = x.shape
        if y is None:
            hw = conv_out_hw(h, w, conv.kernel_size, conv.padding, conv.stride, conv.dilation)
            # allocated NHWC: .contiguous() of a new tensor would be a copy in every forward
            y = _empty((n, conv.out_channels, *hw), x)

        def packed():  # x, y and res as packed NHWC tensors
            rc = None if res is None else res.contiguous(memory_format=CL)
            return x.contiguous(memory_format=CL), torch.empty_like(y, memory_format=CL), rc

        key = (id(block), x.shape, x.stride(), y.stride(), res is not None)
        if key not in self.graphs:
            wt, b = (conv.weight, conv.bias) if plain else _folded(block)
            if b is None:
                b = torch.zeros(conv.out_channels, device=x.device)
            try:
                self.graphs[key] = (_Graph(conv, wt, b, x, y, silu, res), False)
                self.counts["strided"] += 1
            except Exception:  # noqa: BLE001 - cuDNN declined the strides: packed copies
                xc, yc, rc = packed()
                self.graphs[key] = (_Graph(conv, wt, b, xc, yc, silu, rc), True)
                self.counts["copied"] += 1
        graph, copies = self.graphs[key]
        if not copies:
            graph(x, y, res)
            return y
        xc, yc, rc = packed()
        graph(xc, yc, rc)
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

    def _buffer(self, key, shape, like) -> torch.Tensor:
        full = (key, tuple(shape))
        if full not in self.buffers:
            self.buffers[full] = _empty(shape, like)
        return self.buffers[full]

    def _shapes(self, x) -> dict[int, tuple]:
        """Each layer's output shape on ``x``'s shape, from one pass of the plain model (hooks
        read them) on the first input of that shape."""
        key = tuple(x.shape)
        if key not in self.shapes:
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
            self.shapes[key] = shapes
        return self.shapes[key]

    def _destinations(self, x) -> dict[int, torch.Tensor]:
        """Layer index -> the slice of the concatenation buffer its output is written into."""
        shapes = self._shapes(x)
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

    def forward(self, x: torch.Tensor):
        # new buffers (the caching allocator's; under a capture, the graph's pool)
        self.buffers = {}
        dest = self._destinations(x)
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
        if name == "Detect" and m.training and getattr(m, "one2one_cv2", None) is None:
            return self._detect(i, m, x)
        nearest2 = isinstance(m, nn.Upsample) and m.mode == "nearest" and m.scale_factor == 2.0
        if nearest2 and out is not None:
            return window_into(x, out, up=2)
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
            pool_into(m.m, buf[:, (k - 1) * c : k * c], buf[:, k * c : (k + 1) * c])
        return self.conv(m.cv2, buf, out)

    def _detect(self, i, m, xs):
        """The raw head output (B, 4 * reg_max + nc, anchors): the transposed view of one
        (B, anchors, channels) buffer, each level's box and class branches writing their
        channel slices of its rows (ultralytics' head concatenates three times). The branches'
        last (1x1) convolutions run as :func:`pointwise_into`: cuDNN computed a level's slice
        of that buffer wrongly, its batch stride exceeding the level (methods.md)."""
        n, nb = xs[0].shape[0], 4 * m.reg_max
        sizes = [t.shape[2] * t.shape[3] for t in xs]
        raw = self._buffer(("head", i), (n, sum(sizes), m.no), xs[0])
        a0 = 0
        for x, a, box, cls in zip(xs, sizes, m.cv2, m.cv3, strict=True):
            lvl = raw[:, a0 : a0 + a].unflatten(1, x.shape[2:]).permute(0, 3, 1, 2)
            for branch, dst in ((box, lvl[:, :nb]), (cls, lvl[:, nb:])):
                if not pointwise_into(branch[-1], branch[:-1](x), dst, self.pointwise):
                    self.concat_copies += 1
            a0 += a
        return raw.transpose(1, 2)


def _empty(shape, like) -> torch.Tensor:
    """A new tensor of ``like``'s dtype and device, NHWC where it has four dimensions."""
    fmt = CL if len(shape) == 4 else torch.contiguous_format
    return torch.empty(shape, dtype=like.dtype, device=like.device, memory_format=fmt)


def pool_into(pool: nn.MaxPool2d, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``pool(x)`` written into ``y`` (:func:`window_into` for a same-size max pool)."""
    k, p = pool.kernel_size, pool.padding
    same = pool.stride in (1, (1, 1)) and pool.dilation in (1, (1, 1)) and isinstance(k, int)
    return window_into(x, y, k) if same and p == k // 2 else y.copy_(pool(x))


def window_into(x: torch.Tensor, y: torch.Tensor, k: int = 1, up: int = 1) -> torch.Tensor:
    """``y`` = the max over each ``k`` x ``k`` window (stride 1, same padding) of ``x``
    upsampled ``up`` times (nearest): a max pool (``up`` 1) or an upsample (``k`` 1), ``x`` and
    ``y`` either a channel slice of an NHWC buffer. One Triton kernel reads and writes the slices
    (PyTorch's NHWC pool copies its input to a packed tensor and its output into ``y``); PyTorch's
    ops and a copy where it cannot run."""
    kernel = cached_kernel(_WINDOW, _define_window)
    n, c, h, w = x.shape
    if kernel is not None:
        try:
            grid = (triton_cdiv(h * w * up * up * c, 512), n)
            kernel[grid](x, y, c, h, w, *x.stride(), *y.stride(), K=k, UP=up, BLOCK=512)
            return y
        except Exception as e:  # noqa: BLE001 - a kernel that does not compile here
            kernel_failed(_WINDOW, "max-pool / upsample", e, "PyTorch's ops and a copy run instead")
    if k > 1:
        x = F.max_pool2d(x, k, 1, k // 2)
    if up > 1:
        return y.unflatten(2, (h, up)).unflatten(4, (w, up)).copy_(x[:, :, :, None, :, None])
    return y.copy_(x)


def pointwise_into(conv: nn.Conv2d, x: torch.Tensor, y: torch.Tensor, cache: dict) -> bool:
    """``conv(x)`` (a 1x1, stride-1 convolution with a bias) written into ``y``, a view of any
    strides whose channels are adjacent, by one Triton kernel (a GEMM over pixels, bias in its
    epilogue) reading NHWC ``x``; ``cache`` keeps the kernel's (weight, bias) per convolution.
    True where the kernel wrote ``y``; False where PyTorch's convolution and a copy did."""
    kernel = cached_kernel(_POINTWISE, _define_pointwise)
    one = conv.kernel_size == (1, 1) and conv.stride == (1, 1) and conv.padding in ((0, 0), 0)
    if kernel is not None and one and conv.groups == 1 and x.stride(1) == 1 == y.stride(1):
        if id(conv) not in cache:  # (in, out) rows for tl.dot; the bias in float32
            w = conv.weight.detach().reshape(conv.out_channels, -1).t().to(x.dtype).contiguous()
            b = conv.bias if conv.bias is not None else w.new_zeros(conv.out_channels)
            cache[id(conv)] = (w, b.detach().float().contiguous())
        w, b = cache[id(conv)]
        from triton import next_power_of_2 as pow2  # importable: the kernel was made

        n, k, h, wd = x.shape
        bn, bk = max(16, pow2(y.shape[1])), min(64, max(16, pow2(k)))  # tl.dot's least is 16
        try:
            kernel[(triton_cdiv(h * wd, 64), n)](
                x, w, b, y, h * wd, k, y.shape[1], wd, x.stride(0), x.stride(2), x.stride(3),
                y.stride(0), y.stride(2), y.stride(3), BM=64, BN=bn, BK=bk,
            )  # fmt: skip
            return True
        except Exception as e:  # noqa: BLE001 - a kernel that does not compile here
            kernel_failed(_POINTWISE, "1x1 convolution", e, "PyTorch's convolution and a copy run")
    y.copy_(nn.Conv2d.forward(conv, x))
    return False


_POINTWISE: dict = {}


def _define_pointwise(triton, tl):
    @triton.jit
    def pointwise_conv_into(x, w, b, y, M, K, N, W, sxn, sxh, sxw, syn, syh, syw,
                            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
        n = tl.program_id(1).to(tl.int64)
        p = tl.program_id(0) * BM + tl.arange(0, BM)  # pixels of image n, row-major
        co, ks = tl.arange(0, BN), tl.arange(0, BK)
        iy, ix = p // W, p % W
        src = n * sxn + iy * sxh + ix * sxw  # x's channels are adjacent
        acc = tl.zeros((BM, BN), tl.float32)
        live, co_ok = p < M, co < N
        for k0 in range(0, K, BK):
            kk = k0 + ks
            k_ok = kk < K
            a = tl.load(
                x + src[:, None] + kk[None, :], mask=live[:, None] & k_ok[None, :], other=0.0
            )
            wt = tl.load(w + kk[:, None] * N + co[None, :], mask=k_ok[:, None] & co_ok[None, :],
                         other=0.0)  # fmt: skip
            acc = tl.dot(a, wt, acc)
        acc += tl.load(b + co, mask=co_ok, other=0.0)[None, :]
        dst = n * syn + iy[:, None] * syh + ix[:, None] * syw + co[None, :]
        tl.store(y + dst, acc.to(y.dtype.element_ty), mask=live[:, None] & co_ok[None, :])

    return pointwise_conv_into


_WINDOW: dict = {}


def _define_window(triton, tl):
    @triton.jit
    def max_pool_upsample_into(x, y, C, H, W, sxn, sxc, sxh, sxw, syn, syc, syh, syw,
                               K: tl.constexpr, UP: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
        n = tl.program_id(1).to(tl.int64)
        q = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # (oy, ox, c), channels fastest
        live = q < H * UP * W * UP * C
        ch, oy, ox = q % C, q // (W * UP * C), (q // C) % (W * UP)
        acc = tl.full((BLOCK,), float("-inf"), tl.float32)
        for dy in tl.static_range(K):
            for dx in tl.static_range(K):
                iy, ix = oy // UP + dy - K // 2, ox // UP + dx - K // 2
                ok = live & (iy >= 0) & (iy < H) & (ix >= 0) & (ix < W)
                at = n * sxn + ch * sxc + iy * sxh + ix * sxw
                v = tl.load(x + at, mask=ok, other=float("-inf"))
                acc = tl.maximum(acc, v.to(tl.float32))
        at = n * syn + ch * syc + oy * syh + ox * syw
        tl.store(y + at, acc.to(y.dtype.element_ty), mask=live)

    return max_pool_upsample_into
