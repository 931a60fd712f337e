// Lowerings of the elementwise ops: the lists of core/elementwise_ops.h, whose ONNX column gives an
// op's node type when it is one node (cast to the output's dtype first, as the op's dtype rules
// compute it), and the ops below where it takes several.
#include <cmath>
#include <numbers>

#include "onnx/exporter.h"

namespace nabla::onnx::internal {

namespace {

// ---- unary ----------------------------------------------------------------------------------------
void lower_unary(Exporter& e, Call& c, const UnaryAttrs& a) {
  const Value& x = c.x();
  Value& y = c.y();
  const OpId op = c.op;
  const DType dt = y.dtype;
  const std::string xn = e.cast(x, dt);
  auto k = [&](double v) { return e.const_scalar(v, dt); };
  auto out = [&](const std::string& type, std::vector<std::string> ins, std::vector<OAttr> at = {}) {
    e.node(type, std::move(ins), std::move(at), y.name);
  };
  // Integers are their own floor, ceil, rounding and truncation (ONNX's take floats only).
  const bool rounding = op == OpId::floor || op == OpId::ceil || op == OpId::round || op == OpId::trunc;
  if (rounding && !is_floating(dt)) {
    out("Identity", {xn});
  } else if (const char* type = op_row(op).onnx.op_type) {
    out(type, {xn});
  } else {
    switch (op) {
      case OpId::rsqrt: out("Reciprocal", {e.node("Sqrt", {xn})}); break;
      case OpId::square: out("Mul", {xn, xn}); break;
      case OpId::exp2: out("Pow", {k(2.0), xn}); break;
      case OpId::log2: out("Div", {e.node("Log", {xn}), k(std::log(2.0))}); break;
      case OpId::log10: out("Div", {e.node("Log", {xn}), k(std::log(10.0))}); break;
      case OpId::log1p: out("Log", {e.node("Add", {xn, k(1.0)})}); break;
      case OpId::expm1: out("Sub", {e.node("Exp", {xn}), k(1.0)}); break;
      // 1 - erf(x): absolute errors of a few float32 ulps of 1 where erfc is tiny (x > 3)
      case OpId::erfc: out("Sub", {k(1.0), e.node("Erf", {xn})}); break;
      case OpId::logsigmoid: out("Neg", {e.node("Softplus", {e.node("Neg", {xn})})}); break;
      case OpId::gelu:  // x/2 (1 + erf(x/sqrt(2))) (opset 20's Gelu is past 17)
        out("Mul", {e.node("Mul", {xn, k(0.5)}),
                    e.node("Add", {e.node("Erf", {e.node("Div", {xn, k(std::numbers::sqrt2)})}), k(1.0)})});
        break;
      case OpId::gelu_tanh: {  // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        std::string x3 = e.node("Mul", {e.node("Mul", {xn, xn}), xn});
        std::string inner = e.node(
            "Mul", {e.node("Add", {xn, e.node("Mul", {x3, k(0.044715)})}), k(std::sqrt(2.0 / std::numbers::pi))});
        out("Mul", {e.node("Mul", {xn, k(0.5)}), e.node("Add", {e.node("Tanh", {inner}), k(1.0)})});
        break;
      }
      case OpId::silu: out("Mul", {xn, e.node("Sigmoid", {xn})}); break;
      case OpId::mish: out("Mul", {xn, e.node("Tanh", {e.node("Softplus", {xn})})}); break;
      case OpId::hardsigmoid: out("HardSigmoid", {xn}, {af("alpha", 1.0 / 6), af("beta", 0.5)}); break;
      case OpId::hardswish:  // opset 14's HardSwish: lower_hardswish14
        out("Mul", {xn, e.node("HardSigmoid", {xn}, {af("alpha", 1.0 / 6), af("beta", 0.5)})});
        break;
      // trunc: toward zero; frac: what trunc leaves
      case OpId::trunc:
        out("Where", {e.node("Less", {xn, k(0.0)}), e.node("Ceil", {xn}), e.node("Floor", {xn})});
        break;
      case OpId::frac:
        out("Sub", {xn, e.node("Where", {e.node("Less", {xn, k(0.0)}), e.node("Ceil", {xn}), e.node("Floor", {xn})})});
        break;
      case OpId::leaky_relu: out("LeakyRelu", {xn}, {af("alpha", a.p0)}); break;
      case OpId::elu: out("Elu", {xn}, {af("alpha", a.p0)}); break;
      case OpId::softplus:
        // PyTorch returns x itself where beta x > threshold; log1p(exp(t)) - t < 3e-9 there for the
        // default threshold 20.
        if (a.p0 == 1) out("Softplus", {xn});
        else out("Div", {e.node("Softplus", {e.node("Mul", {xn, k(a.p0)})}), k(a.p0)});
        break;
      case OpId::hardtanh:
      case OpId::clamp: {
        std::string lo = std::isinf(a.p0) ? std::string() : k(a.p0), hi = std::isinf(a.p1) ? std::string() : k(a.p1);
        std::vector<std::string> ins{xn, lo, hi};
        if (hi.empty()) ins.pop_back();  // an absent optional input at the end is left out
        out("Clip", ins);
        break;
      }
      default: e.no_mapping("");
    }
  }
  y.sym = x.sym;
}

void lower_hardswish14(Exporter& e, Call& c, const UnaryAttrs&) {
  e.node("HardSwish", {e.cast(c.x(), c.y().dtype)}, {}, c.y().name);
  c.y().sym = c.x().sym;
}

// isnan, isinf, isfinite, logical_not.
void lower_predicate(Exporter& e, Call& c, const UnaryAttrs&) {
  const Value& x = c.x();
  Value& y = c.y();
  if (c.op == OpId::logical_not) {
    e.node("Not", {e.cast(x, DType::boolean)}, {}, y.name);
  } else if (!is_floating(x.dtype)) {
    // Integers and bools are never NaN or infinite (IsNaN/IsInf take floats only): x == x.
    const std::string i = e.cast(x, DType::i64);
    const std::string same = e.node("Equal", {i, i}, {}, c.op == OpId::isfinite ? y.name : std::string());
    if (c.op != OpId::isfinite) e.node("Not", {same}, {}, y.name);
  } else if (c.op == OpId::isfinite) {
    e.node("Not", {e.node("Or", {e.node("IsNaN", {x.name}), e.node("IsInf", {x.name})})}, {}, y.name);
  } else {
    e.node(c.op == OpId::isnan ? "IsNaN" : "IsInf", {x.name}, {}, y.name);
  }
  y.sym = x.sym;
}

// ---- binary ---------------------------------------------------------------------------------------
// fmod (sign of a), remainder (sign of b), floor_divide and atan2, as PyTorch computes them
// (core/scalar_math.h). ONNX's Mod with fmod=0 (Python's %) is for integers only, so float
// remainder and floor_divide are built from Mod fmod=1 as scalar_math.h builds them from std::fmod;
// opsets 13-17 have no Atan2: atan(a / b) plus pi where b < 0.
void lower_division(Exporter& e, OpId op, const std::string& a, const std::string& b, Value& y) {
  const DType dt = y.dtype;
  const bool is_float = is_floating(dt);
  auto c = [&](double v) { return e.const_scalar(v, dt); };
  const std::string zero = is_float ? c(0.0) : e.const_tensor(scalar_tensor(0, dtype(dt)));
  if (op == OpId::atan2) {
    // atan(a / b) + (b < 0 ? (a >= 0 ? pi : -pi) : 0); where b is (+-)0: sign(a) pi/2 (0 for a = 0;
    // signed zeros of a and of b = 0 are not told apart).
    std::string t = e.node("Atan", {e.node("Div", {a, b})});
    std::string pi = e.node("Where", {e.node("GreaterOrEqual", {a, zero}), c(std::numbers::pi), c(-std::numbers::pi)});
    std::string r = e.node("Add", {t, e.node("Where", {e.node("Less", {b, zero}), pi, zero})});
    e.node("Where", {e.node("Equal", {b, zero}), e.node("Mul", {e.node("Sign", {a}), c(std::numbers::pi / 2)}), r}, {},
           y.name);
    return;
  }
  if (op == OpId::fmod) {
    e.node("Mod", {a, b}, {ai("fmod", 1)}, y.name);
    return;
  }
  if (!is_float) {
    // Integers: Mod fmod=0 is Python's remainder; floor_divide = (a - a mod b) / b, exact.
    std::string r = e.node("Mod", {a, b}, {ai("fmod", 0)}, op == OpId::remainder ? y.name : std::string());
    if (op == OpId::floor_divide) e.node("Div", {e.node("Sub", {a, r}), b}, {}, y.name);
    return;
  }
  // mod = fmod(a, b); where mod != 0 and its sign differs from b's, the floor is one lower.
  std::string mod = e.node("Mod", {a, b}, {ai("fmod", 1)});
  std::string fix = e.node("And", {e.node("Not", {e.node("Equal", {mod, zero})}),
                                   e.node("Xor", {e.node("Less", {b, zero}), e.node("Less", {mod, zero})})});
  if (op == OpId::remainder) {
    e.node("Where", {fix, e.node("Add", {mod, b}), mod}, {}, y.name);
    return;
  }
  // floor_divide: div = (a - mod) / b - fix; q = floor(div), one up where div - q > 0.5; b == 0: a / b.
  std::string div =
      e.node("Sub", {e.node("Div", {e.node("Sub", {a, mod}), b}), e.node("Cast", {fix}, {ai("to", onnx_dtype(dt))})});
  std::string q = e.node("Floor", {div});
  std::string up = e.node("Greater", {e.node("Sub", {div, q}), c(0.5)});
  std::string rounded = e.node("Where", {up, e.node("Add", {q, c(1.0)}), q});
  e.node("Where", {e.node("Equal", {b, zero}), e.node("Div", {a, b}), rounded}, {}, y.name);
}

// The ops of NABLA_BINARY_ARITH_OPS, computed in the output's dtype.
void lower_binary(Exporter& e, Call& c, const BinaryAttrs& attrs) {
  const Value& av = *c.iv[0];
  const Value& bv = *c.iv[1];
  Value& y = c.y();
  const OpId op = c.op;
  const DType dt = y.dtype;
  const std::string a = e.cast(av, dt);
  std::string b = e.cast(bv, dt);
  auto k = [&](double v) { return e.const_scalar(v, dt); };
  if (const char* type = op_row(op).onnx.op_type) {
    if (attrs.alpha != 1 && (op == OpId::add || op == OpId::sub)) b = e.node("Mul", {b, k(attrs.alpha)});
    e.node(type, {a, b}, {}, y.name);
  } else if (op == OpId::hypot) {  // sqrt(a^2 + b^2): overflows where a^2 does (std::hypot does not)
    e.node("Sqrt", {e.node("Add", {e.node("Mul", {a, a}), e.node("Mul", {b, b})})}, {}, y.name);
  } else if (op == OpId::xlogy) {  // NaN where b is; 0 where a is 0; else a log(b)
    const std::string prod =
        e.node("Where", {e.node("Equal", {a, k(0.0)}), k(0.0), e.node("Mul", {a, e.node("Log", {b})})});
    e.node("Where", {e.node("IsNaN", {b}), b, prod}, {}, y.name);
  } else if (op == OpId::logaddexp) {
    // max(a, b) + log(1 + exp(-|a - b|)); equal infinities give themselves; NaN propagates.
    const std::string m = e.node("Max", {a, b});
    const std::string d = e.node("Neg", {e.node("Abs", {e.node("Sub", {a, b})})});
    const std::string r = e.node("Add", {m, e.node("Log", {e.node("Add", {e.node("Exp", {d}), k(1.0)})})});
    e.node("Where", {e.node("And", {e.node("Equal", {a, b}), e.node("IsInf", {a})}), a, r}, {}, y.name);
  } else if (op == OpId::threshold_backward) {  // the gradient a where b > 0, else 0
    e.node("Where", {e.node("LessOrEqual", {b, k(0.0)}), k(0.0), a}, {}, y.name);
  } else {
    lower_division(e, op, a, b, y);
  }
  Exporter::sym_broadcast(y, {&av, &bv});
}

// Comparisons (in the operands' promoted dtype) and the logical ops (on bools).
void lower_binary_bool(Exporter& e, Call& c, const BinaryAttrs&) {
  const Value& a = *c.iv[0];
  const Value& b = *c.iv[1];
  Value& y = c.y();
  const bool logical = c.op == OpId::logical_and || c.op == OpId::logical_or || c.op == OpId::logical_xor;
  const DType dt = logical ? DType::boolean : promote_types(a.dtype, b.dtype);
  if (c.op == OpId::ne) {
    e.node("Not", {e.node("Equal", {e.cast(a, dt), e.cast(b, dt)})}, {}, y.name);
  } else {
    e.node(op_row(c.op).onnx.op_type, {e.cast(a, dt), e.cast(b, dt)}, {}, y.name);
  }
  Exporter::sym_broadcast(y, {&a, &b});
}

void lower_pow_scalar(Exporter& e, Call& c, const ScalarAttrs& a) {
  e.node("Pow", {e.cast(c.x(), c.y().dtype), e.const_scalar(a.value, c.y().dtype)}, {}, c.y().name);
  c.y().sym = c.x().sym;
}

void lower_where(Exporter& e, Call& c, const NoAttrs&) {
  Value& y = c.y();
  e.node("Where", {e.cast(*c.iv[0], DType::boolean), e.cast(*c.iv[1], y.dtype), e.cast(*c.iv[2], y.dtype)}, {}, y.name);
  Exporter::sym_broadcast(y, c.iv);
}

// Registers f for every op of a list whose row has an ONNX lowering (the others have none).
template <OpId... ops, class F>
void lower_lowered(LoweringTable& t, F f) {
  ((op_row_is_lowered(ops) ? t[static_cast<size_t>(ops)].add(kMinOpset, f) : (void)0), ...);
}

}  // namespace

void add_elementwise_lowerings(LoweringTable& t) {
  using Fn = void (*)(Exporter&, Call&);
  const Fn unary = [](Exporter& e, Call& c) { lower_unary(e, c, std::get<UnaryAttrs>(c.attrs)); };
  const Fn predicate = [](Exporter& e, Call& c) { lower_predicate(e, c, std::get<UnaryAttrs>(c.attrs)); };
  const Fn binary = [](Exporter& e, Call& c) { lower_binary(e, c, std::get<BinaryAttrs>(c.attrs)); };
  const Fn binary_bool = [](Exporter& e, Call& c) { lower_binary_bool(e, c, std::get<BinaryAttrs>(c.attrs)); };
#define NABLA_IDS(name, ...) OpId::name,
  lower_lowered<NABLA_UNARY_FLOAT_OPS(NABLA_IDS) NABLA_UNARY_SAME_OPS(NABLA_IDS) NABLA_UNARY_PARAM_OPS(NABLA_IDS)
                    OpId::clamp>(t, unary);
  lower_lowered<NABLA_UNARY_BOOL_OPS(NABLA_IDS) OpId::isnan>(t, predicate);
  lower_lowered<NABLA_BINARY_ARITH_OPS(NABLA_IDS) OpId::add>(t, binary);
  lower_lowered<NABLA_BINARY_BOOL_OPS(NABLA_IDS) OpId::eq>(t, binary_bool);
#undef NABLA_IDS
  lower<lower_hardswish14, OpId::hardswish>(t, 14);
  lower<lower_pow_scalar, OpId::pow_scalar>(t);
  lower<lower_where, OpId::where>(t);
}

}  // namespace nabla::onnx::internal
