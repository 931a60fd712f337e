#!/usr/bin/env python3
"""The PyTorch side of nabla's differential suite (tests/ops/test_differential.cpp).

  torch_diff.py CASES.json TENSORS.safetensors RESULTS.json

CASES.json lists the cases nabla ran: each names an op-registry entry, its PyTorch twin (a Python
expression over the inputs x[0], x[1], ...), the inputs, nabla's outputs, the cotangents of its
vector-Jacobian product and nabla's gradients (all stored in TENSORS.safetensors), or the error
nabla raised. This script runs every twin in PyTorch on the same inputs and writes one verdict per
case to RESULTS.json: {"id": ..., "ok": bool, "known": reason or null, "msg": text}.

A case agrees when both sides raise, or when neither does and
  - the number of outputs, and each output's shape and dtype, are the same;
  - float values agree within the case's tolerance (|a - b| <= atol + rtol |b|) with NaN and
    +-inf in the same places; integer and bool values are equal;
  - the gradients of sum_k <y_k, v_k> with respect to the inputs that require grad agree the same
    way (an input PyTorch's graph does not reach has a zero gradient).

Modes: "forward" (values and gradients), "inplace_output" (y = twin(x)[0]; y.mul_(2); then the
gradient of <y, v>: both raise, as when the op saved its output, or both give the same gradient).

In "inplace_output" mode, where PyTorch refuses (it saved y) and nabla does not, nabla's gradient
must equal that of 2 y: nabla may keep less than PyTorch, never compute a wrong gradient.

KNOWN lists the deliberate differences from PyTorch 2.x, PyTorch bugs nabla does not copy, and the
places where PyTorch 1.13 (what Debian ships) differs from 2.x, which nabla follows: a case they
match is reported as a known difference, not a failure. Written for Debian's python3-torch (1.13) and numpy; no other packages.
"""
import fnmatch
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "io"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_reader  # noqa: E402  (tests/io/safetensors_reader.py: a reader from the specification)
import twins as T  # noqa: E402

torch.set_num_threads(1)

# Deliberate differences from PyTorch 2.x, PyTorch bugs nabla does not copy, and the places where
# PyTorch 1.13 (what Debian ships) differs from 2.x, which nabla follows. A case that fails and
# matches an entry (fnmatch globs over its op, sample, dtype and mode, and over the mismatch
# message; `torch`: a version prefix) is reported as a known difference with the reason.
NEGATIVE_INDICES = ("deliberate: nabla accepts negative indices (counting from the end) in index_select, "
                    "index_add, gather and scatter; PyTorch raises")
SRC_LARGER = ("PyTorch's backward rejects the gradient of a scatter src larger than the index (it has the "
              "index's shape); nabla gives one of src's shape, zero where the index does not reach")
KNOWN = [
    dict(op="scatter_", sample="2d", reason=NEGATIVE_INDICES),
    dict(op="scatter_scalar", sample="negative_indices", reason=NEGATIVE_INDICES),
    dict(op="index_add_", sample="noncontiguous_negative", reason=NEGATIVE_INDICES),
    dict(op="scatter*", sample="*src_larger_than_index", msg="*invalid gradient*", reason=SRC_LARGER),
    dict(op="scatter_", sample="empty_index", msg="*invalid gradient*", reason=SRC_LARGER),
    dict(op="isclose", sample="sweep:*", msg="PyTorch raises*did not match*",
         reason="deliberate: nabla's isclose/allclose compare tensors of different dtypes in their promoted dtype; "
                "PyTorch requires equal dtypes"),
    dict(op="hardswish", sample="sweep:float*", msg="gradient of input 0: NaN positions differ*",
         reason="PyTorch's hardswish gradient at NaN depends on the tensor's length (1 from its scalar loop, NaN "
                "from its vectorized one); nabla's is NaN"),
    dict(op="selu", sample="sweep:float*", msg="gradient of input 0: NaN positions differ*",
         reason="PyTorch's selu (elu) gradient at NaN depends on the tensor's length and dtype (the scale from its "
                "scalar loop, NaN from its vectorized one); nabla's is the scale, as PyTorch's formula gives"),
    dict(op="atan2", sample="sweep:bool,float*", msg="*Negation*bool*",
         reason="PyTorch's atan2 backward negates the bool input and raises; nabla differentiates the float input"),
    dict(op="atan2", sample="sweep:uint8,float*", msg="gradient of input 1*",
         reason="PyTorch's atan2 backward negates the uint8 input, which wraps around (-200 becomes 56): its "
                "gradient for the float input is wrong; nabla's is right"),
    # Under autocast (mode "autocast"): PyTorch 1.13's CPU lists against 2.x's, which nabla follows.
    *[dict(op=o, mode="autocast", torch="1.", msg="output 0: dtype BF16 in nabla, torch.float32 in PyTorch",
           reason="PyTorch 2.x's CPU lower-precision list holds conv_transpose1d/2d/3d, prelu and the RNN layers "
                  "(mkldnn_rnn_layer); 1.13's does not")
      for o in ("conv_transpose2d", "nn.ConvTranspose2d", "nn.conv_transpose1d_3d", "nn.ConvTranspose1d_3d",
                "nn.PReLU", "nn.LSTM*", "nn.GRU*")],
    *[dict(op=o, mode="autocast", torch="1.", msg="output *: dtype BF16 in nabla, torch.float32 in PyTorch",
           reason="PyTorch 1.13's CPU float32 list holds linalg_matrix_norm; 2.x's does not (its SVD orders go "
                  "through svdvals, which is on it)")
      for o in ("linalg.matrix_norm*", "linalg.norm")],
    dict(mode="autocast", torch="1.", msg="PyTorch raises*BFloat16*",
         reason="PyTorch 1.13's CPU has no bfloat16 kernel for an op of the twin (mish, eye, nearest interpolation, "
                "embedding_bag); nabla computes it in float32 and rounds once"),
    dict(op="nn.BatchNorm2d_eval", mode="autocast", msg="PyTorch raises*formula disagrees*",
         reason="the twin checks its formula against F.batch_norm at float32 tolerance, which bfloat16 misses"),
    dict(op="optim.NAdam", torch="1.", msg="*after step*",
         reason="PyTorch 1.13's NAdam multiplies the momentum product by mu twice (mu_product * mu * mu_next); "
                "2.x and nabla use mu_product * mu_next"),
]

TORCH_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8, "BOOL": torch.bool}
DTYPE_NAMES = {v: k for k, v in TORCH_DTYPES.items()}


def known_reason(case, msg):
    for k in KNOWN:
        fields = {"op": case["op"], "sample": case["sample"], "dtype": case["dtype"], "mode": case["mode"], "msg": msg}
        if all(fnmatch.fnmatchcase(fields[f], k.get(f, "*")) for f in fields) and \
                torch.__version__.startswith(k.get("torch", "")):
            return k["reason"]
    return None


def flatten(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        flat = []
        for o in out:
            flat.extend(flatten(o))
        return flat
    if out is None:
        return [None]
    raise TypeError(f"the twin returned a {type(out).__name__}, not tensors")


class Mismatch(Exception):
    pass


def compare(what, got, want, rtol, atol):
    """got: PyTorch's tensor; want: nabla's (dtype name, numpy array)."""
    dtype, arr = want
    if got is None:
        raise Mismatch(f"{what}: PyTorch gives None, nabla a {dtype} tensor of shape {list(arr.shape)}")
    got = got.detach()
    if list(got.shape) != list(arr.shape):
        raise Mismatch(f"{what}: shape {list(arr.shape)} in nabla, {list(got.shape)} in PyTorch")
    if DTYPE_NAMES.get(got.dtype) != dtype:
        raise Mismatch(f"{what}: dtype {dtype} in nabla, {got.dtype} in PyTorch")
    g = got.to(torch.float64).numpy() if got.dtype in (torch.float16, torch.bfloat16) else got.numpy()
    w = arr
    if g.size == 0:
        return
    if not (np.issubdtype(g.dtype, np.floating)):
        if not np.array_equal(g, w):
            bad = np.argwhere(g != w)[0]
            raise Mismatch(f"{what}: differs at {tuple(bad)}: nabla {w[tuple(bad)]}, PyTorch {g[tuple(bad)]}")
        return
    g = g.astype(np.float64)
    w = w.astype(np.float64)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    if not np.array_equal(nan_g, nan_w):
        bad = tuple(np.argwhere(nan_g != nan_w)[0])
        raise Mismatch(f"{what}: NaN positions differ, first at {bad}: nabla {w[bad]}, PyTorch {g[bad]}")
    inf_g, inf_w = np.isinf(g), np.isinf(w)
    if not np.array_equal(inf_g, inf_w) or not np.array_equal(g[inf_g], w[inf_w]):
        bad = tuple(np.argwhere((inf_g != inf_w) | (inf_g & (g != w)))[0])
        raise Mismatch(f"{what}: infinities differ, first at {bad}: nabla {w[bad]}, PyTorch {g[bad]}")
    fin = ~(nan_g | inf_g)
    err = np.abs(g[fin] - w[fin]) - (atol + rtol * np.abs(g[fin]))
    if err.size and err.max() > 0:
        idx = tuple(np.argwhere(fin)[int(err.argmax())])
        raise Mismatch(f"{what}: values differ, worst at {idx}: nabla {w[idx]!r}, PyTorch {g[idx]!r} "
                       f"(|diff| {abs(w[idx] - g[idx]):.3g}, tolerance {atol:g} + {rtol:g} |value|)")


def run_twin(case, tensors):
    env = {"torch": torch, "F": F, "nn": nn, "T": T, "math": math}
    xs = []
    for inp in case["inputs"]:
        dtype, arr = tensors[inp["name"]]
        t = torch.from_numpy(np.array(arr, copy=True))
        if dtype == "BF16":  # the reader gives bfloat16 as float32 (exact)
            t = t.to(torch.bfloat16)
        if inp["grad"]:
            t.requires_grad_(True)
        xs.append(t)
    env["x"] = xs
    return xs, flatten(eval(case["twin"], env))


def vjp(outputs, case, tensors, xs):
    """Gradients of sum_k <y_k, v_k> with respect to the inputs that require grad (zeros where the
    graph does not reach an input)."""
    ins = [xs[int(i)] for i in case["grads"]]
    ys, vs = [], []
    for k, name in case["cotangents"].items():
        y = outputs[int(k)]
        if y is not None and y.requires_grad:
            ys.append(y)
            vs.append(torch.from_numpy(np.array(tensors[name][1], copy=True)).to(y.dtype))
    if not ys or not ins:
        return [torch.zeros_like(t) for t in ins]
    gs = torch.autograd.grad(ys, ins, grad_outputs=vs, allow_unused=True)
    return [torch.zeros_like(t) if g is None else g for g, t in zip(gs, ins)]


def check_forward(case, tensors):
    try:
        xs, outs = run_twin(case, tensors)
    except T.Skip:
        raise
    except Exception as e:  # PyTorch raises
        if case["error"] is not None:
            return "both raise"
        raise Mismatch(f"PyTorch raises ({type(e).__name__}: {str(e).splitlines()[0][:200]}), nabla does not")
    if case["error"] is not None:
        raise Mismatch(f"nabla raises ({case['error'][:200]}), PyTorch does not")
    rtol, atol = case["rtol"], case["atol"]
    if len(outs) != len(case["outputs"]):
        raise Mismatch(f"{len(case['outputs'])} outputs in nabla, {len(outs)} in PyTorch")
    for k, (got, name) in enumerate(zip(outs, case["outputs"])):
        compare(f"output {k}", got, tensors[name], rtol, atol)
    if not case["grads"]:
        return "forward"
    try:
        gs = vjp(outs, case, tensors, xs)
    except Exception as e:
        if case["grad_error"] is not None:
            return "both raise in backward"
        raise Mismatch(f"PyTorch's backward raises ({str(e).splitlines()[0][:200]}), nabla's does not")
    if case["grad_error"] is not None:
        raise Mismatch(f"nabla's backward raises ({case['grad_error'][:200]}), PyTorch's does not")
    for (i, name), g in zip(case["grads"].items(), gs):
        compare(f"gradient of input {i}", g, tensors[name], rtol, atol)
    return "forward and gradients"


def check_inplace_output(case, tensors):
    """y = twin(x)[0]; y.mul_(2); gradient of <y, v>: PyTorch raises exactly when the op saved y."""
    try:
        xs, outs = run_twin(case, tensors)
        y = outs[0]
        y.mul_(2)
        v = torch.from_numpy(np.array(tensors[case["cotangents"]["0"]][1], copy=True))
        ins = [xs[int(i)] for i in case["grads"]]
        gs = torch.autograd.grad([y], ins, grad_outputs=[v], allow_unused=True)
        gs = [torch.zeros_like(t) if g is None else g for g, t in zip(gs, ins)]
    except T.Skip:
        raise
    except Exception as e:
        if case["grad_error"] is not None:
            return "both raise"
        # PyTorch refuses (it saved the output, or y is a leaf or a view of one in PyTorch and not in
        # nabla). nabla did not need y: its gradient must then be that of 2 y.
        try:
            xs, outs = run_twin(case, tensors)
            v = torch.from_numpy(np.array(tensors[case["cotangents"]["0"]][1], copy=True))
            ins = [xs[int(i)] for i in case["grads"]]
            gs = torch.autograd.grad([outs[0] * 2], ins, grad_outputs=[v], allow_unused=True)
        except Exception as e2:
            raise Mismatch(f"PyTorch raises ({str(e2).splitlines()[0][:200]}), nabla gives a gradient")
        for (i, name), g, t in zip(case["grads"].items(), gs, ins):
            compare(f"gradient of input {i}", torch.zeros_like(t) if g is None else g, tensors[name], case["rtol"],
                    case["atol"])
        return f"PyTorch refuses ({str(e).splitlines()[0][:80]}); nabla's gradient equals that of 2 y"
    if case["grad_error"] is not None:
        raise Mismatch(f"nabla raises ({case['grad_error'][:200]}), PyTorch gives a gradient")
    for (i, name), g in zip(case["grads"].items(), gs):
        compare(f"gradient of input {i}", g, tensors[name], case["rtol"], case["atol"])
    return "same gradient after the in-place change"


def check_autocast(case, tensors):
    """The twin under torch.autocast("cpu", dtype=torch.bfloat16): the same number of outputs, each
    of the same dtype and shape as nabla's under autocast(kCPU, kBFloat16), or both raise."""
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            _, outs = run_twin(case, tensors)
    except T.Skip:
        raise
    except Exception as e:
        if case["error"] is not None:
            return "both raise"
        raise Mismatch(f"PyTorch raises ({type(e).__name__}: {str(e).splitlines()[0][:200]}), nabla does not")
    if case["error"] is not None:
        raise Mismatch(f"nabla raises ({case['error'][:200]}), PyTorch does not")
    if len(outs) != len(case["outputs"]):
        raise Mismatch(f"{len(case['outputs'])} outputs in nabla, {len(outs)} in PyTorch")
    for k, (got, name) in enumerate(zip(outs, case["outputs"])):
        dtype, arr = tensors[name]
        if got is None:
            raise Mismatch(f"output {k}: PyTorch gives None, nabla a {dtype} tensor")
        if DTYPE_NAMES.get(got.dtype) != dtype:
            raise Mismatch(f"output {k}: dtype {dtype} in nabla, {got.dtype} in PyTorch")
        if list(got.shape) != list(arr.shape):
            raise Mismatch(f"output {k}: shape {list(arr.shape)} in nabla, {list(got.shape)} in PyTorch")
    return "output dtypes"


def check_optimizer(case, tensors):
    """The optimizer `twin` over params; after each step with the recorded gradients, the
    parameters must agree with nabla's."""
    params = [torch.from_numpy(np.array(tensors[i["name"]][1], copy=True)).requires_grad_(True)
              for i in case["inputs"]]
    try:
        opt = eval(case["twin"], {"torch": torch, "params": params})
        for step, (grads, after) in enumerate(zip(case["grads"], case["outputs"])):
            for p, g in zip(params, grads):
                p.grad = torch.from_numpy(np.array(tensors[g][1], copy=True))
            opt.step()
            for k, (p, name) in enumerate(zip(params, after)):
                compare(f"parameter {k} after step {step + 1}", p, tensors[name], case["rtol"], case["atol"])
    except Mismatch:
        raise
    except Exception as e:
        if case["error"] is not None:
            return "both raise"
        raise Mismatch(f"PyTorch raises ({type(e).__name__}: {str(e).splitlines()[0][:200]}), nabla does not")
    if case["error"] is not None:
        raise Mismatch(f"nabla raises ({case['error'][:200]}), PyTorch does not")
    return f"{len(case['grads'])} steps"


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    cases = json.load(open(sys.argv[1]))
    tensors, _ = safetensors_reader.parse(sys.argv[2])
    results = []
    for case in cases:
        try:
            how = {"forward": check_forward, "inplace_output": check_inplace_output, "autocast": check_autocast,
                   "optimizer": check_optimizer}[case["mode"]](case, tensors)
            results.append({"id": case["id"], "ok": True, "known": None, "msg": how})
        except T.Skip as e:  # a sample PyTorch cannot reproduce
            results.append({"id": case["id"], "ok": True, "known": f"not comparable: {e}", "msg": str(e)})
        except Mismatch as e:
            known = known_reason(case, str(e))
            results.append({"id": case["id"], "ok": known is not None, "known": known, "msg": str(e)})
        except Exception as e:  # a broken twin or a crash in PyTorch itself
            results.append({"id": case["id"], "ok": False, "known": None,
                            "msg": f"the twin failed to run: {type(e).__name__}: {str(e).splitlines()[0][:300]}"})
    with open(sys.argv[3], "w") as f:
        json.dump({"torch_version": torch.__version__, "results": results}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
