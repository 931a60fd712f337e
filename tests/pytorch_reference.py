#!/usr/bin/env python3
"""Reference values from PyTorch for nabla's nn/optim tests.

Run where PyTorch is installed: python3 tests/pytorch_reference.py
It prints the numbers that tests/test_nn_loss.cpp, tests/test_optim.cpp, tests/test_optim_scheduler.cpp
and tests/test_nn_module.cpp assert (the tests also derive the optimizer updates from PyTorch's
documented algorithms, so they do not depend on this script to run).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_printoptions(precision=17)


def show(name, t):
    if isinstance(t, torch.Tensor):
        vals = t.detach().double().flatten().tolist()
    elif isinstance(t, (list, tuple)):
        vals = list(t)
    else:
        vals = [t]
    print(f"{name}: " + ", ".join(repr(float(v)) for v in vals))


def losses():
    x = torch.tensor([[0.2, -1.3, 0.7, 2.1], [-0.5, 0.4, 1.5, -2.0], [1.1, 0.3, -0.8, 0.0]], dtype=torch.float64,
                     requires_grad=True)
    t = torch.tensor([3, 0, 1])
    w = torch.tensor([0.5, 2.0, 1.0, 0.25], dtype=torch.float64)
    p = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]], dtype=torch.float64)
    for red in ["mean", "sum", "none"]:
        show(f"ce_{red}", F.cross_entropy(x, t, reduction=red))
        show(f"ce_weight_{red}", F.cross_entropy(x, t, weight=w, reduction=red))
        show(f"ce_ignore0_{red}", F.cross_entropy(x, t, ignore_index=0, reduction=red))
        show(f"ce_ls_{red}", F.cross_entropy(x, t, label_smoothing=0.1, reduction=red))
        show(f"ce_all_{red}", F.cross_entropy(x, t, weight=w, ignore_index=0, label_smoothing=0.2, reduction=red))
        show(f"ce_prob_{red}", F.cross_entropy(x, p, reduction=red))
        show(f"ce_prob_all_{red}", F.cross_entropy(x, p, weight=w, label_smoothing=0.2, reduction=red))
        show(f"nll_weight_{red}", F.nll_loss(x, t, weight=w, reduction=red))
    g, = torch.autograd.grad(F.cross_entropy(x, t, weight=w, ignore_index=0, label_smoothing=0.2), x)
    show("ce_all_grad", g)

    a = torch.tensor([0.5, -1.0, 2.0, 0.1], dtype=torch.float64)
    b = torch.tensor([0.0, 0.5, 0.3, 0.2], dtype=torch.float64)
    for red in ["mean", "sum", "none"]:
        show(f"mse_{red}", F.mse_loss(a, b, reduction=red))
        show(f"l1_{red}", F.l1_loss(a, b, reduction=red))
        show(f"smooth_l1_{red}", F.smooth_l1_loss(a, b, reduction=red, beta=0.5))
        show(f"huber_{red}", F.huber_loss(a, b, reduction=red, delta=0.7))

    pr = torch.tensor([0.1, 0.6, 0.9, 0.35], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0.0, 1.0, 1.0, 0.5], dtype=torch.float64)
    bw = torch.tensor([1.0, 2.0, 0.5, 1.0], dtype=torch.float64)
    z = torch.tensor([-1.5, 0.0, 2.0, 0.3], dtype=torch.float64, requires_grad=True)
    pw = torch.tensor([2.0, 1.0, 0.5, 3.0], dtype=torch.float64)
    for red in ["mean", "sum", "none"]:
        show(f"bce_{red}", F.binary_cross_entropy(pr, y, weight=bw, reduction=red))
        show(f"bcel_{red}", F.binary_cross_entropy_with_logits(z, y, weight=bw, pos_weight=pw, reduction=red))
    g, = torch.autograd.grad(F.binary_cross_entropy(pr, y, weight=bw), pr)
    show("bce_grad", g)
    g, = torch.autograd.grad(F.binary_cross_entropy_with_logits(z, y, weight=bw, pos_weight=pw), z)
    show("bcel_grad", g)
    # BCE at the edges: the log is clamped at -100 and the gradient stays finite.
    e = torch.tensor([0.0, 1.0, 0.5], dtype=torch.float64, requires_grad=True)
    ey = torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64)
    loss = F.binary_cross_entropy(e, ey, reduction="sum")
    show("bce_edge", loss)
    show("bce_edge_grad", torch.autograd.grad(loss, e)[0])

    lp = F.log_softmax(x.detach(), 1)
    for red in ["mean", "sum", "batchmean"]:
        show(f"kl_{red}", F.kl_div(lp, p, reduction=red))
    show("kl_logtarget_batchmean", F.kl_div(lp, p.log(), reduction="batchmean", log_target=True))
    pz = torch.tensor([[0.0, 0.5, 0.5, 0.0]], dtype=torch.float64)
    show("kl_zero_target_sum", F.kl_div(lp[:1], pz, reduction="sum"))


def quadratic_grad(p):
    a = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
    b = torch.tensor([0.1, -0.3, 0.2], dtype=torch.float64)
    return (0.5 * (a * p * p).sum() + (b * p).sum())


def optimizers():
    configs = [
        ("sgd", torch.optim.SGD, dict(lr=0.1)),
        ("sgd_momentum", torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
        ("sgd_nesterov", torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
        ("sgd_maximize", torch.optim.SGD, dict(lr=0.1, momentum=0.5, maximize=True)),
        ("adam", torch.optim.Adam, dict(lr=0.1)),
        ("adam_wd", torch.optim.Adam, dict(lr=0.1, betas=(0.8, 0.9), weight_decay=0.1)),
        ("adam_amsgrad", torch.optim.Adam, dict(lr=0.1, amsgrad=True)),
        ("adamw", torch.optim.AdamW, dict(lr=0.1, weight_decay=0.1)),
        ("adamw_amsgrad", torch.optim.AdamW, dict(lr=0.1, weight_decay=0.1, amsgrad=True)),
        ("rmsprop", torch.optim.RMSprop, dict(lr=0.01)),
        ("rmsprop_centered", torch.optim.RMSprop, dict(lr=0.01, centered=True, momentum=0.9, weight_decay=0.1)),
        ("adagrad", torch.optim.Adagrad, dict(lr=0.1)),
        ("adagrad_decay", torch.optim.Adagrad, dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.1,
                                                    weight_decay=0.1)),
        ("adadelta", torch.optim.Adadelta, dict(lr=1.0)),
        ("adadelta_rho", torch.optim.Adadelta, dict(lr=0.5, rho=0.5, weight_decay=0.1)),
    ]
    for name, cls, kw in configs:
        p = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
        opt = cls([p], foreach=False, **kw)
        traj = []
        for _ in range(5):
            opt.zero_grad()
            quadratic_grad(p).backward()
            opt.step()
            traj += p.detach().tolist()
        show(f"opt_{name}", traj)


def schedulers():
    def run(make, n=12, lr=1.0, opt_cls=torch.optim.SGD, kw=None, metric=None):
        p = torch.zeros(1, requires_grad=True)
        opt = opt_cls([p], lr=lr, **(kw or {}))
        s = make(opt)
        lrs = [opt.param_groups[0]["lr"]]
        moms = [opt.param_groups[0].get("momentum", opt.param_groups[0].get("betas", (0,))[0])]
        for i in range(n):
            opt.step()
            if metric is not None:
                s.step(metric[i])
            else:
                s.step()
            lrs.append(opt.param_groups[0]["lr"])
            moms.append(opt.param_groups[0].get("momentum", opt.param_groups[0].get("betas", (0,))[0]))
        return lrs, moms

    L = torch.optim.lr_scheduler
    show("sched_step", run(lambda o: L.StepLR(o, 3, 0.5))[0])
    show("sched_multistep", run(lambda o: L.MultiStepLR(o, [2, 5, 5], 0.1))[0])
    show("sched_exp", run(lambda o: L.ExponentialLR(o, 0.9))[0])
    show("sched_cosine", run(lambda o: L.CosineAnnealingLR(o, 5, 0.1), n=15)[0])
    show("sched_linear", run(lambda o: L.LinearLR(o, 0.25, 1.0, 4), n=6)[0])
    show("sched_lambda", run(lambda o: L.LambdaLR(o, lambda e: 0.95 ** e), n=5)[0])
    lrs, moms = run(lambda o: L.OneCycleLR(o, 1.0, total_steps=10), n=10, kw=dict(momentum=0.9))
    show("sched_onecycle_lr", lrs)
    show("sched_onecycle_momentum", moms)
    lrs, moms = run(lambda o: L.OneCycleLR(o, 0.5, total_steps=12, three_phase=True, anneal_strategy="linear"), n=12,
                    opt_cls=torch.optim.Adam)
    show("sched_onecycle3_lr", lrs)
    show("sched_onecycle3_beta1", moms)
    metric = [1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85, 0.85, 0.85]
    show("sched_plateau",
         run(lambda o: L.ReduceLROnPlateau(o, factor=0.5, patience=2, cooldown=1, min_lr=0.2), metric=metric)[0])
    show("sched_sequential",
         run(lambda o: L.SequentialLR(o, [L.LinearLR(o, 0.1, 1.0, 3), L.CosineAnnealingLR(o, 5)], [3]), n=10)[0])
    show("sched_chained", run(lambda o: L.ChainedScheduler([L.ExponentialLR(o, 0.9), L.StepLR(o, 2, 0.5)]), n=6)[0])


def batchnorm():
    x = torch.tensor([[1.0, -2.0], [3.0, 0.5], [-1.0, 4.0], [2.0, 1.5]], dtype=torch.float64)
    bn = nn.BatchNorm1d(2).double()
    show("bn_train_out", bn(x))
    show("bn_running_mean_1", bn.running_mean)
    show("bn_running_var_1", bn.running_var)
    bn(x * 2)
    show("bn_running_mean_2", bn.running_mean)
    show("bn_running_var_2", bn.running_var)
    bn.eval()
    show("bn_eval_out", bn(x))
    bn2 = nn.BatchNorm1d(2, momentum=None).double()
    bn2(x)
    bn2(x * 2)
    show("bn_cma_running_mean", bn2.running_mean)
    show("bn_cma_running_var", bn2.running_var)


def reprs():
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
        nn.Linear(8 * 14 * 14, 10))
    print(model)
    for m in [nn.LayerNorm(10), nn.LayerNorm([3, 4], eps=1e-6), nn.GroupNorm(2, 6), nn.Embedding(10, 3, padding_idx=0),
              nn.Bilinear(2, 3, 4), nn.ConvTranspose2d(2, 4, 3, stride=2, output_padding=1),
              nn.ConvTranspose2d(2, 4, (3, 5), stride=(2, 1), padding=(1, 2), bias=False), nn.AvgPool2d(2),
              nn.AvgPool2d((2, 3), stride=1), nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True),
              nn.AdaptiveAvgPool2d(1), nn.AdaptiveAvgPool2d((2, 3)), nn.LeakyReLU(0.2), nn.GELU(approximate="tanh"),
              nn.ELU(), nn.Softmax(dim=1), nn.LogSoftmax(dim=-1), nn.Unflatten(1, (2, 5)), nn.Conv1d(2, 3, 3, bias=False),
              nn.Conv2d(4, 8, (3, 5), stride=2, dilation=(1, 2), groups=2), nn.BatchNorm1d(5, momentum=None, affine=False),
              nn.Dropout2d(0.1), nn.Linear(3, 2, bias=False), nn.Identity(), nn.Flatten(0, 2), nn.SiLU(), nn.Tanh(),
              nn.Sigmoid(), nn.CrossEntropyLoss(), nn.Dropout(1e-05)]:
        print(m)
    ml = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    print(ml)
    md = nn.ModuleDict({"a": nn.Linear(1, 1), "b": nn.Tanh()})
    print(md)


if __name__ == "__main__":
    print("torch", torch.__version__)
    losses()
    optimizers()
    schedulers()
    batchnorm()
    reprs()
