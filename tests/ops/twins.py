"""PyTorch twins of op-registry entries that take more than one expression (see tests/ops/opinfo.h).

Each function takes the inputs as torch tensors and returns what the entry's `fn` returns in nabla,
in the same order. The registry names them as `T.<function>(...)`.
"""
import torch


def inplace(x, op):
    """The registry's inplace_outputs (tests/ops/opinfo_core.cpp): the op on a clone of x, and on the
    strided view big[..., 0] of big = 2 * stack([x, x], -1)."""
    d = x.clone()
    op(d)
    big = torch.stack([x, x], -1) * 2
    v = big.select(-1, 0)
    op(v)
    return [d, big]


def copy_into_view(x):
    b = x[0] * 2
    b[1] = x[1] * 3
    b[:, 2].mul_(x[0][:, 0])
    return b.sin()


class Skip(Exception):
    """Raised by a twin for a sample PyTorch cannot reproduce (random draws from nabla's generator);
    the suite reports the case with this reason instead of comparing it."""


def rms_norm(x, shape, weight=None, eps=None):
    """F.rms_norm (PyTorch 2.4), written out where torch has none (1.13): x / sqrt(mean(x^2) + eps)
    over the trailing dims `shape`, eps the dtype's machine epsilon by default, 16-bit inputs in
    float32, then times weight."""
    import torch.nn.functional as F
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, tuple(shape), weight, eps)
    dims = tuple(range(-len(shape), 0))
    e = torch.finfo(x.dtype).eps if eps is None else eps
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    y = (xf * torch.rsqrt(xf.pow(2).mean(dims, keepdim=True) + e)).type_as(x)
    return y * weight if weight is not None else y


def rotary(x, interleaved=False, offset=0, positions=None, theta=10000.0):
    """nn::functional::rotary_embedding: pair i of the row at position p rotated by p * theta^(-2i/D)."""
    T, D = x.shape[-2], x.shape[-1]
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    pos = (torch.arange(offset, offset + T) if positions is None else positions).to(wide)
    inv_freq = theta ** (torch.arange(0, D, 2, dtype=wide) * (-1.0 / D))
    ang = pos.unsqueeze(-1) * inv_freq
    c, s = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * c - b * s, a * s + b * c], -1).flatten(-2)
    a, b = x[..., :D // 2], x[..., D // 2:]
    return torch.cat([a * c - b * s, a * s + b * c], -1)


def reductions(f):
    """The registry's reductions(): the loss with reduction mean, sum and none."""
    return [f("mean"), f("sum"), f("none")]


def instance_norm_stats(x, w, b, rm, rv):
    """The registry's nn.instance_norm: the output with input statistics (updating running_mean/var in
    place, momentum 0.3, eps 1e-3), the updated statistics, and the output normalized with them."""
    import torch.nn.functional as F
    rm, rv = rm.detach().clone(), rv.detach().clone()
    y = F.instance_norm(x, rm, rv, w, b, use_input_stats=True, momentum=0.3, eps=1e-3)
    y_eval = F.instance_norm(x, rm, rv, w, b, use_input_stats=False, momentum=0.3, eps=1e-3)
    return [y, rm, rv, y_eval]


def batch_norm_eval(x, w, b, rm, rv, eps=1e-5):
    """Eval-mode batch norm where the running statistics are differentiable inputs: PyTorch treats
    them as constants, so the twin is batch norm's formula, checked against F.batch_norm."""
    import torch.nn.functional as F
    shape = [1, -1] + [1] * (x.dim() - 2)
    y = (x - rm.view(shape)) * torch.rsqrt(rv.view(shape) + eps) * w.view(shape) + b.view(shape)
    ref = F.batch_norm(x.detach(), rm.detach(), rv.detach(), w.detach(), b.detach(), False, 0.0, eps)
    if not torch.allclose(y.detach(), ref, rtol=1e-5, atol=1e-6):
        raise AssertionError("batch_norm_eval: the formula disagrees with F.batch_norm")
    return y


def batch_norm_running_stats(x):
    """The registry's bn_train(x, stats=True): running mean and variance after two updates."""
    import torch.nn.functional as F
    c = x[0].shape[1]
    rm = torch.zeros(c, dtype=x[0].dtype)
    rv = torch.ones(c, dtype=x[0].dtype)
    F.batch_norm(x[0], rm, rv, x[1], x[2], True, 0.1, 1e-5)
    F.batch_norm(x[0].detach() * 2 + 1, rm, rv, x[1], x[2], True, 0.3, 1e-5)
    return [rm, rv]


def interpolate(x):
    """The registry's nn.interpolate: nearest x2, (bi/tri)linear to size 3, linear x1.5 with
    align_corners."""
    import torch.nn.functional as F
    linear = {3: "linear", 4: "bilinear", 5: "trilinear"}[x.dim()]
    return [F.interpolate(x, scale_factor=2), F.interpolate(x, size=3, mode=linear),
            F.interpolate(x, scale_factor=1.5, mode=linear, align_corners=True)]


def index_put_slice(x, j, v):
    """The registry's index_put: y[:, j] = v on a copy."""
    y = x.clone()
    y[:, j] = v
    return y


def interpolate_modes(x):
    """The registry's nn.interpolate_modes (tests/ops/opinfo_nn_spatial.cpp)."""
    import torch.nn.functional as F
    out = [F.interpolate(x, scale_factor=1.7, mode="nearest-exact"), F.interpolate(x, size=2, mode="nearest-exact"),
           F.interpolate(x, size=2, mode="area"), F.interpolate(x, size=5, mode="area"),
           F.interpolate(x, scale_factor=0.6, mode="area")]
    if x.dim() == 4:
        out += [F.interpolate(x, size=(5, 2), mode="bicubic"),
                F.interpolate(x, scale_factor=1.5, mode="bicubic", align_corners=True),
                F.interpolate(x, scale_factor=(2.5, 0.7), mode="bicubic")]
    return out


# ---- recurrent layers (tests/ops/opinfo_rnn.cpp) ----------------------------------------------------------
def rnn_config(t):
    v = int(t.item())
    digit = lambda k: (v // k) % 10  # noqa: E731
    return {"num_layers": digit(1), "bidirectional": digit(10) != 0, "proj_size": digit(100),
            "bias": digit(1000) != 0, "batch_first": digit(10000) != 0, "dropout": digit(100000) != 0,
            "state": digit(1000000) != 0}


def packed_lengths(L, N):
    return [L - (N - 1 - b) % L for b in range(N)]


def rnn(x, kind, nonlinearity="tanh", packed=False):
    """nn.RNN/LSTM/GRU with the sample's weights (registration order), as opinfo_rnn.cpp's rnn_fn."""
    import torch.nn as nn
    c = rnn_config(x[-1])
    if c["dropout"]:
        raise Skip("random: dropout between layers draws its masks from nabla's generator")
    lstm = kind == "LSTM"
    gates = {"RNN": 1, "LSTM": 4, "GRU": 3}[kind]
    states = (2 if lstm else 1) if c["state"] else 0
    first = 1 + states
    hidden = x[first].shape[0] // gates
    inp = x[0]
    opts = dict(num_layers=c["num_layers"], bias=c["bias"], batch_first=c["batch_first"],
                bidirectional=c["bidirectional"])
    if kind == "RNN":
        m = nn.RNN(inp.shape[-1], hidden, nonlinearity=nonlinearity, **opts)
    elif lstm:
        m = nn.LSTM(inp.shape[-1], hidden, proj_size=c["proj_size"], **opts)
    else:
        m = nn.GRU(inp.shape[-1], hidden, **opts)
    weights = list(x[first:-1])
    if len(weights) != len(m._flat_weights_names):
        raise AssertionError(f"{len(weights)} weights for {len(m._flat_weights_names)} parameters")
    m._flat_weights = weights
    h = None
    if states:
        h = (x[1], x[2]) if lstm else x[1]
    if packed:
        L, N = (inp.shape[1], inp.shape[0]) if c["batch_first"] else (inp.shape[0], inp.shape[1])
        p = nn.utils.rnn.pack_padded_sequence(inp, packed_lengths(L, N), c["batch_first"], enforce_sorted=False)
        out, hn = m(p, h)
        out = nn.utils.rnn.pad_packed_sequence(out, c["batch_first"])[0]
    else:
        out, hn = m(inp, h)
    return [out, hn[0], hn[1]] if lstm else [out, hn]


def rnn_cell(x, kind, nonlinearity="tanh"):
    """nn.RNNCell/LSTMCell/GRUCell with the sample's weights, as opinfo_rnn.cpp's cells."""
    import torch.nn as nn
    c = rnn_config(x[-1])
    lstm = kind == "LSTM"
    gates = {"RNN": 1, "LSTM": 4, "GRU": 3}[kind]
    states = (2 if lstm else 1) if c["state"] else 0
    first = 1 + states
    hidden = x[first].shape[0] // gates
    if kind == "RNN":
        m = nn.RNNCell(x[0].shape[-1], hidden, bias=c["bias"], nonlinearity=nonlinearity)
    elif lstm:
        m = nn.LSTMCell(x[0].shape[-1], hidden, bias=c["bias"])
    else:
        m = nn.GRUCell(x[0].shape[-1], hidden, bias=c["bias"])
    names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if c["bias"] else [])
    for name, t in zip(names, x[first:-1]):
        delattr(m, name)
        setattr(m, name, t)
    h = None
    if states:
        h = (x[1], x[2]) if lstm else x[1]
    out = m(x[0], h)
    return list(out) if lstm else out


def pad_sequence(x):
    import torch.nn as nn
    small = x[0].shape[-1] == 1
    return nn.utils.rnn.pad_sequence([x[0], x[1], x[2]], small, 0.5 if small else 0.0)


def pack_padded_sequence(x):
    import torch.nn as nn
    p = nn.utils.rnn.pack_padded_sequence(x[0], packed_lengths(x[0].shape[0], x[0].shape[1]), False,
                                          enforce_sorted=False)
    return [p.data, nn.utils.rnn.pad_packed_sequence(p, False, 0.5, x[0].shape[0] + 1)[0]]


# ---- attention and Transformer layers (tests/ops/opinfo_attention.cpp) ------------------------------------
def sdpa_reference(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """scaled_dot_product_attention as PyTorch 2.x documents it (1.13 has no such function)."""
    L, S = q.shape[-2], k.shape[-2]
    s = 1 / (q.shape[-1] ** 0.5) if scale is None else scale
    w = q @ k.transpose(-2, -1) * s
    if is_causal:
        w = w.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        w = w.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else w + attn_mask
    return torch.softmax(w, -1) @ v


def sdpa(x):
    import torch.nn.functional as F
    f = getattr(F, "scaled_dot_product_attention", sdpa_reference)
    if len(x) == 4:
        return f(x[0], x[1], x[2], attn_mask=x[3])
    if f is sdpa_reference:
        return [f(x[0], x[1], x[2]), f(x[0], x[1], x[2], scale=0.7), f(x[0], x[1], x[2], is_causal=True)]
    return [f(x[0], x[1], x[2]), f(x[0], x[1], x[2], scale=0.7), f(x[0], x[1], x[2], is_causal=True)]


def flash(x):
    """opinfo_attention.cpp's flash: grouped-query heads, scales 0.5 and 0.8 (causal without a bias)."""
    q, k, v = x[0], x[1], x[2]
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    bias = x[3] if len(x) > 3 else None

    def attend(scale, causal):
        s = q @ k.transpose(-2, -1) * scale
        if bias is not None:
            s = s + bias
        if causal:
            s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
        return torch.softmax(s, -1) @ v

    return [attend(0.5, False), attend(0.8, bias is None)]


def sdpa_gqa(x):
    """scaled_dot_product_attention(..., enable_gqa=True): key/value heads repeated to the query's."""
    g = x[0].shape[-3] // x[1].shape[-3]
    return sdpa_reference(x[0], x[1].repeat_interleave(g, -3), x[2].repeat_interleave(g, -3))


def set_tensors(m, named):
    """Replaces parameters of module m (dotted names) by the given tensors."""
    for name, t in named.items():
        *path, leaf = name.split(".")
        owner = m
        for p in path:
            owner = getattr(owner, p)
        delattr(owner, leaf)
        setattr(owner, leaf, t)


def mha(x):
    """opinfo_attention.cpp's mha: packed weights, 2 heads; outputs, averaged and per-head weights."""
    import torch.nn as nn
    self_attn = len(x) == 5
    p = 1 if self_attn else 3
    m = nn.MultiheadAttention(x[p].shape[1], 2, dtype=x[0].dtype)
    set_tensors(m, {"in_proj_weight": x[p], "in_proj_bias": x[p + 1], "out_proj.weight": x[p + 2],
                    "out_proj.bias": x[p + 3]})
    q, k, v = (x[0], x[0], x[0]) if self_attn else (x[0], x[1], x[2])
    kpm = x[7] if len(x) > 7 else None
    am = x[8] if len(x) > 8 else None
    if kpm is not None and kpm.is_floating_point() and am is not None and torch.__version__.startswith("1."):
        # PyTorch 1.13 merges a float key_padding_mask into a float attn_mask with masked_fill (any
        # nonzero value masks); 2.x adds the two, as nabla does: merge them that way here.
        heads = 2
        if kpm.dim() == 1:  # unbatched: attn_mask (L, S) or (heads, L, S)
            am = am + kpm
        else:  # kpm (N, S); attn_mask (L, S) or (N * heads, L, S)
            am = am + kpm.repeat_interleave(heads, 0).unsqueeze(1)
        kpm = None
    out, w = m(q, k, v, key_padding_mask=kpm, attn_mask=am)
    _, wh = m(q, k, v, key_padding_mask=kpm, attn_mask=am, average_attn_weights=False)
    return [out, w, wh]


def mha_kdim_vdim(x):
    import torch.nn as nn
    e = x[3].shape[0]
    m = nn.MultiheadAttention(e, 1 if e % 2 else 2, add_bias_kv=True, add_zero_attn=True, kdim=x[4].shape[1],
                              vdim=x[5].shape[1], batch_first=True, dtype=x[0].dtype)
    set_tensors(m, {"q_proj_weight": x[3], "k_proj_weight": x[4], "v_proj_weight": x[5], "in_proj_bias": x[6],
                    "bias_k": x[7], "bias_v": x[8], "out_proj.weight": x[9], "out_proj.bias": x[10]})
    return list(m(x[0], x[1], x[2], average_attn_weights=False))


def encoder_layer(x):
    """opinfo_attention.cpp's encoder_layer on the samples that give all 12 parameters: post-norm
    relu and pre-norm gelu, eval mode."""
    import torch.nn as nn
    if len(x) < 13:
        raise Skip("the layer's parameters come from nabla's generator (the all_parameters samples "
                   "compare the same layer with given parameters)")
    names = ["self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
             "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
             "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"]
    outs = []
    for pre_gelu in (False, True):
        layer = nn.TransformerEncoderLayer(x[0].shape[-1], 2, dim_feedforward=x[5].shape[0], dropout=0.0,
                                           activation="gelu" if pre_gelu else "relu", norm_first=pre_gelu,
                                           dtype=x[0].dtype)
        layer.eval()
        set_tensors(layer, dict(zip(names, x[1:13])))
        kpm = x[13] if len(x) > 13 else None
        mask = x[14] if len(x) > 14 else None
        outs.append(layer(x[0], src_mask=mask, src_key_padding_mask=kpm))
    return outs


# ---- the model zoo's blocks (tests/ops/opinfo_vision.cpp) -------------------------------------------------
def vit_encoder_block(x):
    """torchvision's ViT EncoderBlock (2 heads, eval) written with torch.nn, so that the differential
    suite's Python needs no torchvision (tests/vision/ compares whole models with torchvision's)."""
    import torch.nn as nn
    import torch.nn.functional as F
    if len(x) < 13:
        raise Skip("the block's parameters come from nabla's generator (the all_parameters samples "
                   "compare the same block with given parameters)")
    e = x[0].shape[-1]
    m = nn.MultiheadAttention(e, 2, batch_first=True, dtype=x[0].dtype)
    set_tensors(m, {"in_proj_weight": x[3], "in_proj_bias": x[4], "out_proj.weight": x[5], "out_proj.bias": x[6]})
    h = F.layer_norm(x[0], (e,), x[1], x[2], 1e-6)
    a = m(h, h, h, need_weights=False)[0] + x[0]
    y = F.layer_norm(a, (e,), x[7], x[8], 1e-6)
    return a + F.linear(F.gelu(F.linear(y, x[9], x[10])), x[11], x[12])


def _swin():
    try:
        from torchvision.models import swin_transformer
    except ImportError as e:
        raise Skip(f"torchvision: {e}")
    return swin_transformer


def shifted_window_attention(x):
    """torchvision's functional on opinfo_vision.cpp's samples: window [2, 2] and shift [1, 1] for
    L = 4 tokens a window, else window [2, 1] and shift [1, 0]."""
    L = x[3].shape[-1]
    window, shift = ([2, 2], [1, 1]) if L == 4 else ([2, 1], [1, 0])
    return _swin().shifted_window_attention(x[0], x[1], x[2], x[3], window, x[3].shape[1], shift,
                                            qkv_bias=x[4], proj_bias=x[5])


def shifted_window_attention_module(x):
    """torchvision's ShiftedWindowAttention (window [2, 2], shift [1, 1]) with the given
    qkv/proj weights and biases and bias table."""
    sw = _swin()
    m = sw.ShiftedWindowAttention(x[0].shape[-1], [2, 2], [1, 1], x[5].shape[1]).to(x[0].dtype)
    set_tensors(m, {"qkv.weight": x[1], "qkv.bias": x[2], "proj.weight": x[3], "proj.bias": x[4],
                    "relative_position_bias_table": x[5]})
    return m(x[0])


def patch_merging(x):
    sw = _swin()
    m = sw.PatchMerging(x[0].shape[-1]).to(x[0].dtype)
    set_tensors(m, {"norm.weight": x[1], "norm.bias": x[2], "reduction.weight": x[3]})
    return m(x[0])


# ---- linear algebra (tests/ops/opinfo_linalg.cpp) ---------------------------------------------------------
def wc(a):
    """A well-conditioned matrix from a: a + n I."""
    n = a.shape[-1]
    return a + n * torch.eye(n, dtype=a.dtype)


def spd(a):
    """A symmetric positive-definite matrix from a: a a^T + n I."""
    n = a.shape[-1]
    return a @ a.mT + n * torch.eye(n, dtype=a.dtype)


def sym(a):
    return a + a.mT


def solve(x):
    A = wc(x[0])
    out = [torch.linalg.solve(A, x[1])]
    if x[1].dim() == x[0].dim():
        out.append(torch.linalg.solve(A, x[1].mT, left=False))
    return out


def qr(a):
    out = list(torch.linalg.qr(a))
    if a.shape[-2] <= a.shape[-1]:
        out += list(torch.linalg.qr(a, mode="complete"))
    return out


def svd(a):
    """Sign-invariant functions of the reduced SVD: S, |U|, |Vh|, U diag(S^2) Vh."""
    U, S, Vh = torch.linalg.svd(a, full_matrices=False)
    return [S, U.abs(), Vh.abs(), (U * (S * S).unsqueeze(-2)) @ Vh]


def eigh(a):
    L, V = torch.linalg.eigh(a)
    return [L, V.abs(), (V * (L * L).unsqueeze(-2)) @ V.mT]


def matrix_norms(a):
    inf = float("inf")
    M = torch.linalg.matrix_norm
    return [M(a), M(a, "nuc")] + [M(a, o) for o in (1, -1, inf, -inf, 2, -2)] + \
        [M(a, "fro", (0, -1), True), M(a, 1, (-1, 0), True)]
