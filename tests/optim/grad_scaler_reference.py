#!/usr/bin/env python3 -O
"""Expected values for tests/optim/test_grad_scaler.cpp (GradScalerScripted): PyTorch's own GradScaler class
driving torch.optim.SGD on the CPU.

PyTorch's GradScaler needs CUDA, and its two kernels (torch._amp_foreach_non_finite_check_and_unscale_,
torch._amp_update_scale_) have no CPU implementation in Debian's PyTorch 1.13. So this script runs
torch.cuda.amp.GradScaler's Python code (stages, per-optimizer found_inf, skipped steps, state dict)
unchanged, with `python3 -O` dropping its is_cuda asserts, and the two kernels replaced by Python
transcriptions of their CUDA sources (aten/src/ATen/native/cuda/AmpKernels.cu). Run:

    /usr/bin/python3 -O tests/optim/grad_scaler_reference.py
"""
import math

import torch
import torch.cuda.amp.grad_scaler as gs

assert not __debug__, "run with python3 -O (GradScaler asserts that tensors are on CUDA)"


def foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale):
    inv = inv_scale.item()
    for g in grads:
        # opmath: float32 for float32 gradients; the check is on the value before the multiply.
        if not torch.isfinite(g).all():
            found_inf.fill_(1.0)
        if inv != 1.0:
            g.mul_(inv_scale.to(g.dtype))


def update_scale_(current_scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    if found_inf.item():
        current_scale.fill_(current_scale.item() * backoff_factor)  # float32 tensor: rounds once
        growth_tracker.fill_(0)
    else:
        successful = growth_tracker.item() + 1
        if successful == growth_interval:
            new_scale = torch.tensor(current_scale.item() * growth_factor, dtype=torch.float32).item()
            if math.isfinite(new_scale):
                current_scale.fill_(new_scale)
            growth_tracker.fill_(0)
        else:
            growth_tracker.fill_(successful)
    return current_scale


torch._amp_foreach_non_finite_check_and_unscale_ = foreach_non_finite_check_and_unscale_
torch._amp_update_scale_ = update_scale_
gs.amp_definitely_not_available = lambda: False

# The scripted run: loss 0.5 * sum((w - t)^2), SGD(lr 0.1, momentum 0.9), growth_interval 3,
# an inf in the gradient at step 3 and a NaN at step 7 (steps count from 1).
w = torch.tensor([0.5, -1.0, 2.0, 0.25], requires_grad=True)
t = torch.tensor([1.0, 0.0, -1.0, 0.5])
opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
scaler = gs.GradScaler(growth_interval=3)
scales, stepped = [], []
for step in range(1, 21):
    opt.zero_grad()
    loss = 0.5 * ((w - t) * (w - t)).sum()
    scaler.scale(loss).backward()
    if step == 3:
        w.grad[1] = float("inf")
    if step == 7:
        w.grad[2] = float("nan")
    before = w.detach().clone()
    scaler.step(opt)
    stepped.append(int(not torch.equal(before, w.detach())))
    scaler.update()
    scales.append(scaler.get_scale())
print("scales:", "{" + ", ".join(repr(s) for s in scales) + "}")
print("stepped:", "{" + ", ".join(str(s) for s in stepped) + "}")
print("weights:", "{" + ", ".join(repr(v) for v in w.detach().tolist()) + "}")
print("state_dict:", scaler.state_dict())
