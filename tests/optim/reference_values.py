#!/usr/bin/env python3
"""Expected values for nabla's loss, optimizer and scheduler tests, from first principles.

Plain Python (math only, no numpy or torch), written from the formulas in PyTorch's documentation
(torch.nn.functional losses, the algorithm boxes of torch.optim.*, torch.optim.lr_scheduler) and
independently of nabla's C++ code. Run `python3 tests/optim/reference_values.py` to print the numbers that
tests/nn/test_loss.cpp, tests/optim/test_optimizers.cpp and tests/optim/test_lr_scheduler.cpp hard-code.
"""
import math


def show(name, vals):
    if not isinstance(vals, (list, tuple)):
        vals = [vals]
    print(f"{name}: {{" + ", ".join(repr(float(v)) for v in vals) + "}")


# ---- losses ------------------------------------------------------------------------------------------
X = [[0.2, -1.3, 0.7, 2.1], [-0.5, 0.4, 1.5, -2.0], [1.1, 0.3, -0.8, 0.0]]
T = [3, 0, 1]
W = [0.5, 2.0, 1.0, 0.25]
P = [[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]]
C = 4


def log_softmax(row):
    m = max(row)
    lse = m + math.log(sum(math.exp(v - m) for v in row))
    return [v - lse for v in row]


LP = [log_softmax(r) for r in X]


def ce_indices(weight=None, ignore=-100, ls=0.0):
    """Per-sample losses and the mean denominator: with q = (1 - ls) onehot(y) + ls / C,
    l_n = -sum_c w_c q_c log p_nc; mean divides by sum_n w_{y_n} over non-ignored n."""
    w = weight or [1.0] * C
    per, denom = [], 0.0
    for n, y in enumerate(T):
        if y == ignore:
            per.append(0.0)
            continue
        q = [(1 - ls) * (1.0 if c == y else 0.0) + ls / C for c in range(C)]
        per.append(-sum(w[c] * q[c] * LP[n][c] for c in range(C)))
        denom += w[y]
    return per, denom


def ce_probs(weight=None, ls=0.0):
    w = weight or [1.0] * C
    per = []
    for n in range(len(X)):
        q = [P[n][c] * (1 - ls) + ls / C for c in range(C)]
        per.append(-sum(w[c] * q[c] * LP[n][c] for c in range(C)))
    return per


def reduce3(name, per, denom):
    show(name + "_mean", sum(per) / denom)
    show(name + "_sum", sum(per))
    show(name + "_none", per)


def losses():
    reduce3("ce", *ce_indices())
    reduce3("ce_weight", *ce_indices(weight=W))
    reduce3("ce_ignore0", *ce_indices(ignore=0))
    reduce3("ce_ls", *ce_indices(ls=0.1))
    reduce3("ce_all", *ce_indices(weight=W, ignore=0, ls=0.2))
    per = ce_probs()
    reduce3("ce_prob", per, len(X))
    per = ce_probs(weight=W, ls=0.2)
    reduce3("ce_prob_all", per, len(X))
    # Gradient of ce_all (mean) w.r.t. X: d/dx_nk of -sum_c w_c q_c (x_nc - lse_n)
    #   = -w_k q_k + (sum_c w_c q_c) softmax_nk, divided by the mean's denominator.
    per, denom = ce_indices(weight=W, ignore=0, ls=0.2)
    grad = []
    for n, y in enumerate(T):
        if y == 0:
            grad += [0.0] * C
            continue
        q = [0.8 * (1.0 if c == y else 0.0) + 0.2 / C for c in range(C)]
        s = sum(W[c] * q[c] for c in range(C))
        sm = [math.exp(v) for v in LP[n]]
        grad += [(-W[k] * q[k] + s * sm[k]) / denom for k in range(C)]
    show("ce_all_grad", grad)

    a = [0.5, -1.0, 2.0, 0.1]
    b = [0.0, 0.5, 0.3, 0.2]
    d = [x - y for x, y in zip(a, b)]
    for name, per in [
        ("mse", [v * v for v in d]),
        ("l1", [abs(v) for v in d]),
        ("smooth_l1", [0.5 * v * v / 0.5 if abs(v) < 0.5 else abs(v) - 0.25 for v in d]),
        ("huber", [0.5 * v * v if abs(v) <= 0.7 else 0.7 * (abs(v) - 0.35) for v in d]),
    ]:
        reduce3(name, per, len(per))

    pr = [0.1, 0.6, 0.9, 0.35]
    y = [0.0, 1.0, 1.0, 0.5]
    bw = [1.0, 2.0, 0.5, 1.0]
    per = [-w * (t * math.log(x) + (1 - t) * math.log(1 - x)) for x, t, w in zip(pr, y, bw)]
    reduce3("bce", per, 4)
    show("bce_grad", [w * (x - t) / (x * (1 - x)) / 4 for x, t, w in zip(pr, y, bw)])
    # At the edges the logs are clamped at -100: x = 0, y = 1 -> 100; x = 1, y = 1 -> 0; x = 0.5, y = 0 -> log 2.
    show("bce_edge_sum", 100 + 0 + math.log(2))
    # The gradient (x - y) / max(x (1 - x), 1e-12): -1e12, 0, 2.
    show("bce_edge_grad", [-1e12, 0.0, 2.0])

    z = [-1.5, 0.0, 2.0, 0.3]
    pw = [2.0, 1.0, 0.5, 3.0]
    sig = lambda v: 1 / (1 + math.exp(-v))
    # l = -w [pw y log sigmoid(z) + (1 - y) log(1 - sigmoid(z))]
    per = [-w * (p * t * math.log(sig(v)) + (1 - t) * math.log(1 - sig(v))) for v, t, w, p in zip(z, y, bw, pw)]
    reduce3("bcel", per, 4)
    # dl/dz = -w [pw y (1 - sigmoid) - (1 - y) sigmoid]
    show("bcel_grad", [-w * (p * t * (1 - sig(v)) - (1 - t) * sig(v)) / 4 for v, t, w, p in zip(z, y, bw, pw)])

    # kl_div(input = log-probabilities LP, target P): pointwise t (log t - x).
    per = [P[n][c] * (math.log(P[n][c]) - LP[n][c]) for n in range(3) for c in range(C)]
    show("kl_mean", sum(per) / len(per))
    show("kl_sum", sum(per))
    show("kl_batchmean", sum(per) / 3)
    # log_target: exp(t) (t - x) with t = log P: the same numbers.
    show("kl_logtarget_batchmean", sum(per) / 3)
    # A zero target contributes 0 (0 log 0 = 0).
    pz = [0.0, 0.5, 0.5, 0.0]
    show("kl_zero_target_sum", sum(t * (math.log(t) - x) for t, x in zip(pz, LP[0]) if t > 0))


# ---- optimizers ----------------------------------------------------------------------------------------
# Problem: f(p) = 0.5 sum a_i p_i^2 + sum b_i p_i, so grad_i = a_i p_i + b_i; p starts at P0.
A = [1.0, 2.0, 0.5]
B = [0.1, -0.3, 0.2]
P0 = [1.0, -2.0, 3.0]


def grad(p):
    return [a * x + b for a, x, b in zip(A, p, B)]


def run(update, steps=5):
    p = list(P0)
    state = [dict() for _ in p]
    traj = []
    for t in range(1, steps + 1):
        g = grad(p)
        for i in range(len(p)):
            p[i] = update(p[i], g[i], state[i], t)
        traj += p
    return traj


def sgd(lr, momentum=0.0, dampening=0.0, wd=0.0, nesterov=False, maximize=False):
    def up(p, g, s, t):
        g = -g if maximize else g
        g = g + wd * p
        if momentum != 0:
            s["b"] = g if "b" not in s else momentum * s["b"] + (1 - dampening) * g
            g = g + momentum * s["b"] if nesterov else s["b"]
        return p - lr * g
    return up


def adam(lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, amsgrad=False, decoupled=False):
    def up(p, g, s, t):
        if wd:
            if decoupled:
                p = p * (1 - lr * wd)
            else:
                g = g + wd * p
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        v = s["v"]
        if amsgrad:
            s["vmax"] = max(s.get("vmax", 0.0), s["v"])
            v = s["vmax"]
        mhat = s["m"] / (1 - b1 ** t)
        vhat = v / (1 - b2 ** t)
        return p - lr * mhat / (math.sqrt(vhat) + eps)
    return up


def rmsprop(lr, alpha=0.99, eps=1e-8, wd=0.0, momentum=0.0, centered=False):
    def up(p, g, s, t):
        g = g + wd * p
        s["v"] = alpha * s.get("v", 0.0) + (1 - alpha) * g * g
        v = s["v"]
        if centered:
            s["ga"] = alpha * s.get("ga", 0.0) + (1 - alpha) * g
            v = v - s["ga"] ** 2
        d = math.sqrt(v) + eps
        if momentum > 0:
            s["b"] = momentum * s.get("b", 0.0) + g / d
            return p - lr * s["b"]
        return p - lr * g / d
    return up


def adagrad(lr, lr_decay=0.0, wd=0.0, init=0.0, eps=1e-10):
    def up(p, g, s, t):
        g = g + wd * p
        clr = lr / (1 + (t - 1) * lr_decay)
        s["sum"] = s.get("sum", init) + g * g
        return p - clr * g / (math.sqrt(s["sum"]) + eps)
    return up


def adadelta(lr, rho=0.9, eps=1e-6, wd=0.0):
    def up(p, g, s, t):
        g = g + wd * p
        s["v"] = rho * s.get("v", 0.0) + (1 - rho) * g * g
        delta = math.sqrt(s.get("u", 0.0) + eps) / math.sqrt(s["v"] + eps) * g
        s["u"] = rho * s.get("u", 0.0) + (1 - rho) * delta * delta
        return p - lr * delta
    return up


def adamax(lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, maximize=False):
    def up(p, g, s, t):
        g = -g if maximize else g
        g = g + wd * p
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["u"] = max(b2 * s.get("u", 0.0), abs(g) + eps)
        return p - lr / (1 - b1 ** t) * s["m"] / s["u"]
    return up


def nadam(lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, psi=4e-3, decoupled=False):
    def up(p, g, s, t):
        if wd:
            if decoupled:
                p = p * (1 - lr * wd)
            else:
                g = g + wd * p
        mu = b1 * (1 - 0.5 * 0.96 ** (t * psi))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * psi))
        s["prod"] = s.get("prod", 1.0) * mu
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        d = math.sqrt(s["v"] / (1 - b2 ** t)) + eps
        return p - lr * (1 - mu) / (1 - s["prod"]) * g / d - lr * mu_next / (1 - s["prod"] * mu_next) * s["m"] / d
    return up


def radam(lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, decoupled=False):
    def up(p, g, s, t):
        if wd:
            if decoupled:
                p = p * (1 - lr * wd)
            else:
                g = g + wd * p
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        mhat = s["m"] / (1 - b1 ** t)
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
        if rho_t > 5:
            r = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            return p - lr * mhat * r * math.sqrt(1 - b2 ** t) / (math.sqrt(s["v"]) + eps)
        return p - lr * mhat
    return up


def optimizers():
    configs = [
        ("sgd", sgd(0.1)),
        ("sgd_momentum", sgd(0.1, momentum=0.9, dampening=0.1, wd=0.01)),
        ("sgd_nesterov", sgd(0.1, momentum=0.9, nesterov=True)),
        ("sgd_maximize", sgd(0.1, momentum=0.5, maximize=True)),
        ("adam", adam(0.1)),
        ("adam_wd", adam(0.1, b1=0.8, b2=0.9, wd=0.1)),
        ("adam_amsgrad", adam(0.1, b2=0.5, amsgrad=True)),
        ("adamw", adam(0.1, wd=0.1, decoupled=True)),
        ("adamw_amsgrad", adam(0.1, b2=0.5, wd=0.1, decoupled=True, amsgrad=True)),
        ("adam_no_amsgrad_b2", adam(0.1, b2=0.5)),
        ("rmsprop", rmsprop(0.01)),
        ("rmsprop_centered", rmsprop(0.01, centered=True, momentum=0.9, wd=0.1)),
        ("adagrad", adagrad(0.1)),
        ("adagrad_decay", adagrad(0.1, lr_decay=0.1, init=0.1, wd=0.1)),
        ("adadelta", adadelta(1.0)),
        ("adadelta_rho", adadelta(0.5, rho=0.5, wd=0.1)),
        ("adamax", adamax(0.1)),
        ("adamax_wd", adamax(0.1, b1=0.8, b2=0.5, wd=0.1, maximize=False)),
        ("nadam", nadam(0.1)),
        ("nadamw", nadam(0.1, b2=0.9, wd=0.1, psi=0.5, decoupled=True)),
        ("radam", radam(0.1)),
        ("radam_wd", radam(0.1, b2=0.5, wd=0.1)),
    ]
    for name, up in configs:
        show("opt_" + name, run(up))
    # RAdam rectifies once rho_t > 5: with beta2 = 0.9 from step 6 on (rho_6 = 5.39), so 8 steps.
    show("opt_radam_rectified", run(radam(0.1, b2=0.9, wd=0.1, decoupled=True), steps=8))


# ---- schedulers (closed forms where they exist) -------------------------------------------------------
def schedulers():
    show("sched_step", [1.0 * 0.5 ** (e // 3) for e in range(13)])
    ms = [2, 5, 5]
    show("sched_multistep", [0.1 ** sum(1 for m in ms if m <= e) for e in range(13)])
    show("sched_exp", [0.9 ** e for e in range(13)])
    # Cosine: eta_min + (1 - eta_min)(1 + cos(pi e / T)) / 2 holds for e <= T; past T the recursive
    # form continues periodically (period 2T), which equals the closed form for all e.
    show("sched_cosine", [0.1 + 0.9 * (1 + math.cos(math.pi * e / 5)) / 2 for e in range(16)])
    show("sched_linear", [0.25 + 0.75 * min(e, 4) / 4 for e in range(7)])
    show("sched_lambda", [0.95 ** e for e in range(6)])

    # OneCycle (two phases, cos): initial = max/25, min = initial/1e4, phase 1 ends at 0.3 T - 1.
    def cos_anneal(s, e, pct):
        return e + (s - e) / 2 * (math.cos(math.pi * pct) + 1)

    def lin_anneal(s, e, pct):
        return (e - s) * pct + s

    def onecycle(max_lr, total, phases, anneal, bm=0.85, mm=0.95):
        lr = {"init": max_lr / 25, "max": max_lr, "min": max_lr / 25 / 1e4}
        mom = {"max": mm, "base": bm}
        lrs, moms = [], []
        for step in range(total + 1):
            start = 0.0
            for i, (end, l0, l1, m0, m1) in enumerate(phases):
                if step <= end or i == len(phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(anneal(lr[l0], lr[l1], pct))
                    moms.append(anneal(mom[m0], mom[m1], pct))
                    break
                start = end
        return lrs, moms

    lrs, moms = onecycle(1.0, 10, [(0.3 * 10 - 1, "init", "max", "max", "base"), (10 - 1, "max", "min", "base", "max")],
                         cos_anneal)
    show("sched_onecycle_lr", lrs)
    show("sched_onecycle_momentum", moms)
    lrs, moms = onecycle(0.5, 12, [(0.3 * 12 - 1, "init", "max", "max", "base"),
                                   (2 * 0.3 * 12 - 2, "max", "init", "base", "max"),
                                   (12 - 1, "init", "min", "max", "max")], lin_anneal)
    show("sched_onecycle3_lr", lrs)
    show("sched_onecycle3_beta1", moms)

    # ReduceLROnPlateau(factor 0.5, patience 2, cooldown 1, min_lr 0.2, threshold 1e-4 rel, mode min).
    metric = [1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85, 0.85, 0.85]
    lr, best, bad, cool = 1.0, math.inf, 0, 0
    out = [lr]
    for m in metric:
        if m < best * (1 - 1e-4):
            best, bad = m, 0
        else:
            bad += 1
        if cool > 0:
            cool -= 1
            bad = 0
        if bad > 2:
            new = max(lr * 0.5, 0.2)
            if lr - new > 1e-8:
                lr = new
            cool, bad = 1, 0
        out.append(lr)
    show("sched_plateau", out)

    # SequentialLR([LinearLR(0.1, 1.0, 3), CosineAnnealingLR(T_max=5)], milestones=[3]):
    # epochs 0..2 follow LinearLR (0.1, 0.4, 0.7), epoch 3 restarts the cosine at its epoch 0 (1.0),
    # then cos for epochs 1..6 of the second scheduler.
    seq = [0.1 + 0.9 * min(e, 3) / 3 for e in range(3)]
    seq += [(1 + math.cos(math.pi * k / 5)) / 2 for k in range(0, 8)]
    show("sched_sequential", seq)
    # ChainedScheduler([ExponentialLR(0.9), StepLR(2, 0.5)]): the factors multiply.
    show("sched_chained", [0.9 ** e * 0.5 ** (e // 2) for e in range(7)])

    # ConstantLR(factor 0.25, total_iters 3) and PolynomialLR(total_iters 4, power 2).
    show("sched_constant", [0.25 if e < 3 else 1.0 for e in range(6)])
    show("sched_polynomial", [(1 - min(e, 4) / 4) ** 2 for e in range(7)])
    # MultiplicativeLR(lambda e: 0.9 if e % 2 else 0.5): the factors compound from epoch 1 on.
    mult, lr = [1.0], 1.0
    for e in range(1, 7):
        lr *= 0.9 if e % 2 else 0.5
        mult.append(lr)
    show("sched_multiplicative", mult)

    # CosineAnnealingWarmRestarts(T_0 3, T_mult 2, eta_min 0.1): periods of 3, 6, 12 epochs; T_cur
    # counts the epochs since the last restart (epochs 0-2, 3-8, 9-20).
    def sgdr(e, T0, Tm, eta):
        start, Ti = 0.0, T0
        while e >= start + Ti:
            start, Ti = start + Ti, Ti * Tm
        return eta + (1 - eta) * (1 + math.cos(math.pi * (e - start) / Ti)) / 2
    show("sched_sgdr", [sgdr(e, 3, 2, 0.1) for e in range(12)])
    show("sched_sgdr_fractional", [sgdr(e, 3, 2, 0.1) for e in (2.5, 3.25, 9.0)])

    # CyclicLR(base 0.1, max 1.0, step_size_up 2, step_size_down 4) with SGD momentum cycling
    # (0.8..0.9): cycle = floor(1 + t / 6), x = 1 + t / 6 - cycle, height x / r below r = 1/3 and
    # (x - 1) / (r - 1) above; triangular2 halves the amplitude every cycle; exp_range(gamma 0.9)
    # scales it by 0.9^t.
    def cyclic(t, scale):
        cycle = math.floor(1 + t / 6)
        x = 1 + t / 6 - cycle
        r = 2 / 6
        h = x / r if x <= r else (x - 1) / (r - 1)
        return 0.1 + 0.9 * h * scale(cycle, t), 0.9 - 0.1 * h * scale(cycle, t)
    for name, f in (("triangular", lambda c, t: 1.0), ("triangular2", lambda c, t: 1 / 2 ** (c - 1)),
                    ("exp_range", lambda c, t: 0.9 ** t)):
        vals = [cyclic(t, f) for t in range(14)]
        show("sched_cyclic_" + name, [v[0] for v in vals])
        if name == "triangular":
            show("sched_cyclic_momentum", [v[1] for v in vals])


if __name__ == "__main__":
    losses()
    optimizers()
    schedulers()
