// ONNX export (onnx/): models and op families exported, checked by Debian's python3-onnx
// (onnx.checker, full_check) and run in ONNX Runtime (onnxruntime-node, through tests/onnx/run_ort.js)
// against nabla's own outputs, at two batch sizes where the batch axis is dynamic. One Node process
// and one Python process serve every model of a test. Without node + onnxruntime-node (scripts/test.sh
// installs it into .deps/onnxruntime) or python3-onnx the tests skip, unless NABLA_REQUIRE_ORT=1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "nabla.h"
#include "onnx/export.h"
#include "tests/common/sanitizers.h"
#include "tests/onnx/ort.h"
#include "vision/vision.h"

using namespace nabla;
namespace fs = std::filesystem;

namespace {

using nabla::testing::have_onnx_checker;
constexpr const char* kPython = nabla::testing::kOnnxPython;

// A module made of a function, for op-family cases.
struct Fn : nn::Module {
  explicit Fn(std::function<Tensor(Fn&, Tensor)> f) : nn::Module("Fn"), f_(std::move(f)) {}
  Tensor forward(Tensor x) override { return f_(*this, x); }
  Tensor p(const std::string& name) const { return named_parameters(false)[name]; }
  std::function<Tensor(Fn&, Tensor)> f_;
};

struct Case {
  std::string name;
  std::shared_ptr<nn::Module> model;
  std::vector<Tensor> batches;  // example input at each batch size; the first is traced
  onnx::ExportOptions options;
  std::vector<Tensor> expected;
  std::string file;
  std::vector<Tensor> batches2;           // a second input at each batch size (forward(x, x2)), or none
  std::map<std::string, int> expect_ops;  // op type -> how many nodes of it the graph must hold
  bool over_2gib = false;                 // weights past protobuf's limit: external data without asking
};

// Exports every case, checks every file with onnx.checker, runs them all in ONNX Runtime and
// compares with nabla (|ort - nabla| <= 1e-4 |nabla| + 1e-5). Returns the largest absolute error
// and the largest relative one (where |nabla| >= 1e-3).
std::pair<double, double> run_cases(std::vector<Case>& cases, const std::string& tag) {
  fs::path dir = fs::temp_directory_path() / ("nabla_onnx_" + tag + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct RemoveDir {  // also when an export throws
    fs::path p;
    ~RemoveDir() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } remove_dir{dir};
  std::ostringstream jobs;
  jobs << "[";
  std::string files;
  for (size_t c = 0; c < cases.size(); ++c) {
    Case& k = cases[c];
    k.file = (dir / (k.name + ".onnx")).string();
    k.model->train();  // export switches to eval itself and restores this
    const bool two = !k.batches2.empty();
    onnx::export_model(*k.model,
                       two ? std::vector<Tensor>{k.batches[0], k.batches2[0]} : std::vector<Tensor>{k.batches[0]},
                       k.file, k.options);
    EXPECT_EQ(fs::exists(k.file + ".data"), k.options.external_data || k.over_2gib) << k.name;
    if (k.options.external_data || k.over_2gib)
      EXPECT_LT(fs::file_size(k.file), 4096u) << k.name << ": weights left in the model";
    EXPECT_TRUE(k.model->is_training()) << k.name << ": export did not restore the training flag";
    k.model->eval();
    {
      autograd::NoGradGuard ng;
      for (size_t b = 0; b < k.batches.size(); ++b)
        k.expected.push_back(
            (two ? k.model->forward(k.batches[b], k.batches2[b]) : k.model->forward(k.batches[b])).contiguous());
    }
    files += " '" + k.file;
    for (auto it = k.expect_ops.begin(); it != k.expect_ops.end(); ++it)
      files += (it == k.expect_ops.begin() ? "|" : ",") + it->first + "=" + std::to_string(it->second);
    files += "'";
    jobs << (c ? "," : "") << "{\"model\":\"" << k.file << "\",\"runs\":[";
    for (size_t b = 0; b < k.batches.size(); ++b) {
      std::string out = (dir / (k.name + "_out" + std::to_string(b) + ".bin")).string();
      jobs << (b ? "," : "") << "{\"inputs\":[";
      for (size_t i = 0; i < (two ? 2u : 1u); ++i) {
        const Tensor& x = i == 0 ? k.batches[b] : k.batches2[b];
        std::string in = (dir / (k.name + "_in" + std::to_string(b) + "_" + std::to_string(i) + ".bin")).string();
        std::string name = !k.options.input_names.empty() ? k.options.input_names[i]
                           : two                          ? "input_" + std::to_string(i)
                                                          : std::string("input");
        jobs << (i ? "," : "") << nabla::testing::ort_input(name, x, in);
      }
      jobs << "],\"output\":\"" << out << "\"}";
    }
    jobs << "]}";
  }
  jobs << "]";
  std::string jobs_file = (dir / "jobs.json").string();
  std::ofstream(jobs_file) << jobs.str();

  // Each argument: a file, then optionally |Op=count,... (the graph's node counts by op type). The
  // checker reads the file by its path (a ModelProto over 2 GiB cannot be checked in memory), and
  // the node count needs no weights.
  std::string check = std::string(kPython) +
                      " -c 'import onnx, sys, collections\nfor a in sys.argv[1:]:\n"
                      "  p, _, spec = a.partition(\"|\")\n"
                      "  onnx.checker.check_model(p, full_check=True)\n  m = onnx.load(p, load_external_data=False)\n"
                      "  ops = collections.Counter(n.op_type for n in m.graph.node)\n"
                      "  for item in filter(None, spec.split(\",\")):\n    op, n = item.split(\"=\")\n"
                      "    assert ops[op] == int(n), (p, op, n, dict(ops))' " +
                      files;
  EXPECT_EQ(std::system(check.c_str()), 0) << "onnx.checker rejected a model: " << check;
  std::string run = nabla::testing::run_ort_command(jobs_file);
  EXPECT_EQ(std::system(run.c_str()), 0) << run;

  double worst = 0, worst_abs = 0;
  for (Case& k : cases) {
    for (size_t b = 0; b < k.batches.size(); ++b) {
      std::string out = (dir / (k.name + "_out" + std::to_string(b) + ".bin")).string();
      const Tensor& want = k.expected[b];
      std::ifstream f(out, std::ios::binary);
      std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      EXPECT_EQ(bytes.size(), want.nbytes())
          << k.name << " batch " << k.batches[b].sizes()[0]
          << ": ONNX Runtime's output has a different size than nabla's " << want.sizes();
      if (bytes.size() != want.nbytes()) continue;
      Tensor got = empty(want.sizes(), dtype(want.dtype()));
      std::memcpy(got.data_ptr(), bytes.data(), bytes.size());
      Tensor g64 = got.to(kFloat64), w64 = want.to(kFloat64);
      Tensor err = (g64 - w64).abs();
      // Relative error where the value is not tiny (near zero the absolute 1e-5 rules).
      double rel = (err / w64.abs().clamp_min(1e-3)).max().item<double>();
      worst = std::max(worst, rel);
      worst_abs = std::max(worst_abs, err.max().item<double>());
      EXPECT_TRUE((err <= w64.abs() * 1e-4 + 1e-5).all().item<bool>())
          << k.name << " (input " << k.batches[b].sizes() << "): max |ort - nabla| = " << err.max().item<double>()
          << "\nONNX Runtime: " << got.flatten().slice(0, 0, 6) << "\nnabla: " << want.flatten().slice(0, 0, 6);
    }
  }
  return {worst_abs, worst};
}

onnx::ExportOptions dynamic_batch() {
  onnx::ExportOptions o;
  o.dynamic_axes = {{"input", {{0, "batch"}}}, {"output", {{0, "batch"}}}};
  return o;
}

Case make_case(std::string name, std::shared_ptr<nn::Module> m, IntArrayRef shape, bool dynamic = true) {
  Case c{std::move(name), std::move(m), {}, dynamic ? dynamic_batch() : onnx::ExportOptions{}, {}, {}};
  Shape s(shape.begin(), shape.end());
  c.batches.push_back(randn(s));
  if (dynamic) {
    s[0] = 5;
    c.batches.push_back(randn(s));
  }
  return c;
}

// Running statistics that are not the identity, so batch norm is really checked.
void warm_batch_norms(nn::Module& m, const Tensor& x) {
  autograd::NoGradGuard ng;
  m.train();
  for (int i = 0; i < 3; ++i) m.forward(x * (1.0 + i) + 0.5);
}

}  // namespace

// ---- op families --------------------------------------------------------------------------------
TEST(Onnx, OpFamiliesMatchOnnxRuntime) {
  NABLA_NEEDS_ORT();
  manual_seed(0);
  std::vector<Case> cases;
  // Elementwise unary ops, each a slice of the output.
  cases.push_back(make_case("unary", std::make_shared<Fn>([](Fn&, Tensor x) {
                              Tensor a = x.abs() + 0.5;
                              return stack({exp(x * 0.5),
                                            log(a),
                                            sqrt(a),
                                            rsqrt(a),
                                            tanh(x),
                                            sigmoid(x),
                                            gelu(x),
                                            gelu_tanh(x),
                                            relu(x),
                                            neg(x),
                                            silu(x),
                                            mish(x),
                                            softplus(x),
                                            softplus(x, 2.0),
                                            leaky_relu(x, 0.2),
                                            elu(x, 0.7),
                                            selu(x),
                                            hardsigmoid(x),
                                            hardswish(x),
                                            hardtanh(x, -0.5, 0.5),
                                            relu6(x * 4),
                                            clamp(x, -0.3, 0.8),
                                            clamp_min(x, 0.1),
                                            square(x),
                                            reciprocal(a),
                                            sin(x),
                                            cos(x),
                                            erf(x),
                                            logsigmoid(x),
                                            log1p(a),
                                            expm1(x),
                                            log2(a),
                                            log10(a),
                                            exp2(x),
                                            floor(x * 3),
                                            ceil(x * 3),
                                            sign(x),
                                            atan(x),
                                            sinh(x),
                                            cosh(x)},
                                           1);
                            }),
                            {2, 3, 4}));
  // Binary ops with broadcasting, scalars, parameters, comparisons, where and casts.
  {
    auto m = std::make_shared<Fn>([](Fn& self, Tensor x) {
      Tensor w = self.p("w");
      Tensor a = x.abs() + 0.5;
      return stack({x + w,
                    x - w * 2,
                    x * w,
                    x / (w.abs() + 1),
                    add(x, w, 0.5),
                    sub(x, w, 3),
                    pow(a, 1.5),
                    pow(a, w),
                    maximum(x, w),
                    minimum(x, w),
                    2 - x,
                    3 / a,
                    x * 0.25 + 1,
                    where(x > w, x, w),
                    where(x <= 0, x * 2, 1.0),
                    (x >= 0).to(kFloat32),
                    (x < w).to(kFloat32),
                    (x == x).to(kFloat32) - (x != w).to(kFloat32),
                    logical_and(x > 0, w > 0).to(kFloat32),
                    logical_or(x > 0, w > 0).to(kFloat32),
                    logical_not(x > 0).to(kFloat32),
                    isfinite(x).to(kFloat32),
                    x.masked_fill(x > w, -2.0),
                    x.masked_fill(x < 0, full({}, 0.5)),
                    x.gather(2, (x > 0).to(kInt64) * 3),
                    x.gather(1, (x > 0).to(kInt64) * 2 - 1)},
                   1);
    });
    m->register_parameter("w", randn({3, 4}));
    cases.push_back(make_case("binary", m, {2, 3, 4}));
  }
  // Division family (fmod, remainder, floor_divide on floats and integers, atan2) with mixed signs.
  {
    auto m = std::make_shared<Fn>([](Fn& self, Tensor x) {  // x: (B, 3, 4)
      Tensor w = self.p("w");
      Tensor wd = where(w >= 0, w + 0.3, w - 0.3);  // |wd| >= 0.3
      // Integers of both signs (a float that requires grad does not cast to int64): xi in
      // {-13, -9, 0, 7, 12}, wi in {-3, 2}.
      auto i64 = [](const Tensor& b) { return b.to(kInt64); };
      Tensor xi = i64(x > 0) * 7 + i64(x > 1) * 5 - i64(x < -0.5) * 9 - i64(x < -1) * 4;
      Tensor wi = i64(w > 0) * 5 - 3;
      Tensor x3 = x * 3;
      return stack(
          {fmod(x3, wd), remainder(x3, wd), floor_divide(x3, wd), remainder(x, 0.7), fmod(x, -0.7),
           floor_divide(x, full({}, -0.4)), atan2(x, wd), atan2(x, w * 0), atan2(w, x), remainder(xi, wi).to(kFloat32),
           fmod(xi, wi).to(kFloat32), floor_divide(xi, wi).to(kFloat32), remainder(xi, 3).to(kFloat32)},
          1);
    });
    m->register_parameter("w", randn({3, 4}));
    cases.push_back(make_case("division", m, {2, 3, 4}));
    cases.back().expect_ops = {{"Mod", 10}, {"Atan", 3}};
  }
  // cumsum (float, int), dynamic batch.
  cases.push_back(make_case(
      "cumsum", std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 4, 6)
        return cat({x.cumsum(2), x.cumsum(1), (x > 0).to(kInt64).cumsum(2).to(kFloat32), x.cumsum(-1).cumsum(0)}, 2);
      }),
      {2, 4, 6}));
  cases.back().expect_ops = {{"CumSum", 5}};
  // Scatters (static batch: the index is built for it): scatter with a tensor and a scalar source and
  // a source larger than the index, scatter_add with repeated indices.
  {
    auto m = std::make_shared<Fn>([](Fn& self, Tensor x) {    // x: (2, 4, 6)
      Tensor perm = self.p("order").argsort(2);               // a permutation per row: (2, 4, 6)
      Tensor few = perm.slice(2, 0, 3);                       // (2, 4, 3), distinct per row
      Tensor dup = (perm.slice(2, 0, 4) > 2).to(kInt64) * 5;  // (2, 4, 4), repeats 0 and 5
      Tensor src = x * 2 + 1;
      return cat({x.scatter(2, perm, src), x.scatter(2, few, -3.0), x.scatter(2, few, src),
                  x.scatter_add(2, dup, src.slice(2, 1, 5))},
                 2);
    });
    m->register_parameter("order", randn({2, 4, 6}));
    cases.push_back(make_case("scatter", m, {2, 4, 6}, /*dynamic=*/false));
    cases.back().expect_ops = {{"ScatterElements", 4}};
  }
  // Sorting: sort (both orders), argsort through gather, topk (largest and smallest) -> TopK.
  cases.push_back(make_case("sort_topk", std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 5, 6)
                              auto [sv, si] = x.sort(2);
                              auto [dv, di] = x.sort(1, true);
                              auto [tv, ti] = x.topk(3, 2);
                              auto [bv, bi] = x.topk(2, 1, false);
                              return cat(
                                  {sv.flatten(1), si.to(kFloat32).flatten(1), dv.flatten(1), di.to(kFloat32).flatten(1),
                                   x.gather(2, x.argsort(2)).flatten(1), tv.flatten(1), ti.to(kFloat32).flatten(1),
                                   bv.flatten(1), bi.to(kFloat32).flatten(1)},
                                  1);
                            }),
                            {2, 5, 6}));
  cases.back().expect_ops = {{"TopK", 10}};  // two per float sort: the NaN flag's order, then the values'
  // Shapes: views, slices, concatenation.
  cases.push_back(
      make_case("shapes", std::make_shared<Fn>([](Fn&, Tensor x) {                                  // x: (B, 3, 4, 5)
                  Tensor a = x.permute({0, 2, 3, 1}).reshape({-1, 4 * 5 * 3});                      // (B, 60)
                  Tensor b = x.transpose(2, 3).flatten(1);                                          // (B, 60)
                  Tensor c = x.view({x.size(0), 3, 20}).slice(2, 2, 17, 3).flatten(1);              // (B, 15)
                  Tensor d = x.narrow(1, 1, 2).select(2, 3).unsqueeze(1).squeeze(1).flatten(1);     // (B, 10)
                  Tensor e = x.select(1, 0).mean({1}).unsqueeze(-1).expand({-1, 5, 3}).flatten(1);  // (B, 15)
                  Tensor f = x.flatten(2).unflatten(2, {2, 10}).sum({2}).flatten(1);                // (B, 30)
                  Tensor g = x.slice(3, -2).flatten(1).contiguous().clone();                        // (B, 24)
                  return cat({a, b, c, d, e, f, g}, 1);
                }),
                {2, 3, 4, 5}));
  // Reductions and softmax.
  cases.push_back(make_case(
      "reductions", std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 6, 7)
        auto [mx, imx] = x.max(2, false);
        auto [mn, imn] = x.min(1, true);
        return cat({mx, imx.to(kFloat32), mn.flatten(1), imn.flatten(1).to(kFloat32), x.argmax(1).to(kFloat32),
                    x.sum({1}), x.mean({2}, true).squeeze(2), x.amax({1}), x.amin({2}), softmax(x, 2).select(1, 0),
                    log_softmax(x, 1).select(2, 6), x.sum({1, 2}, true).flatten(1), x.mean({-1}) * 2},
                   1);
      }),
      {2, 6, 7}));
  // Matrix products.
  {
    auto m = std::make_shared<Fn>([](Fn& self, Tensor x) {        // x: (B, 4, 8)
      Tensor y = matmul(x, self.p("w"));                          // (B, 4, 6)
      Tensor z = linear(y, self.p("lw"), self.p("lb"));           // (B, 4, 5)
      Tensor f = z.flatten(1);                                    // (B, 20)
      Tensor g = addmm(self.p("ab"), f, self.p("am"), 0.5, 2.0);  // (B, 3)
      Tensor h = mm(f, self.p("am"));
      return cat({g, h, matmul(z, z.transpose(1, 2)).flatten(1), bmm(x, x.transpose(1, 2)).flatten(1)}, 1);
    });
    m->register_parameter("w", randn({8, 6}));
    m->register_parameter("lw", randn({5, 6}));
    m->register_parameter("lb", randn({5}));
    m->register_parameter("am", randn({20, 3}));
    m->register_parameter("ab", randn({3}));
    cases.push_back(make_case("linalg", m, {2, 4, 8}));
  }
  // Convolution, pooling, batch norm (as its own node: no conv before it), in eval mode.
  {
    auto m = std::make_shared<nn::Sequential>(
        std::make_shared<nn::BatchNorm2d>(3),
        std::make_shared<nn::Conv2d>(3, 8, 3, nn::Conv2dOptions{.stride = 2, .padding = 1}),
        std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Conv2d>(8, 8, 3, nn::Conv2dOptions{.padding = 2, .dilation = 2, .groups = 4}),
        std::make_shared<nn::MaxPool2d>(3, nn::MaxPool2dOptions{.stride = 2, .padding = 1}),
        std::make_shared<nn::AvgPool2d>(3, nn::AvgPool2dOptions{.stride = 1, .padding = 1}),
        std::make_shared<nn::ConvTranspose2d>(
            8, 6, 3, nn::ConvTranspose2dOptions{.stride = 2, .padding = 1, .output_padding = 1, .groups = 2}),
        std::make_shared<nn::AdaptiveAvgPool2d>(2), std::make_shared<nn::Flatten>());
    Case c = make_case("conv_pool", m, {2, 3, 16, 16});
    warm_batch_norms(*m, c.batches[0]);
    cases.push_back(std::move(c));
    auto g =
        std::make_shared<nn::Sequential>(std::make_shared<nn::Conv2d>(3, 4, 1), std::make_shared<nn::BatchNorm2d>(4),
                                         std::make_shared<nn::AdaptiveAvgPool2d>(1), std::make_shared<nn::Flatten>(),
                                         std::make_shared<nn::BatchNorm1d>(4));
    Case c2 = make_case("global_pool_bn1d", g, {3, 3, 8, 8});
    warm_batch_norms(*g, c2.batches[0]);
    cases.push_back(std::move(c2));
  }
  // Normalization layers and a transformer encoder layer (attention, layer norm, GELU feed-forward).
  cases.push_back(make_case("layer_norm", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{6}), {2, 4, 6}));
  cases.push_back(make_case("group_norm", std::make_shared<nn::GroupNorm>(2, 4), {2, 4, 3, 3}));
  cases.push_back(make_case(
      "encoder_layer",
      std::make_shared<nn::TransformerEncoderLayer>(
          16, 2, nn::TransformerEncoderLayerOptions{.dim_feedforward = 32, .activation = "gelu", .batch_first = true}),
      {2, 5, 16}));
  {  // with a causal float mask and a bool key padding mask (built in forward: a static batch)
    auto m = std::make_shared<Fn>([](Fn& self, Tensor x) {  // x: (N, L, E)
      int64_t N = x.size(0), L = x.size(1);
      Tensor causal = full({L, L}, -std::numeric_limits<double>::infinity()).triu(1);
      Tensor padding = (arange(L) >= L - 1).unsqueeze(0).expand({N, L});
      auto layer = std::static_pointer_cast<nn::TransformerEncoderLayer>(self.named_children()["layer"]);
      return layer->forward(x, {.src_mask = causal, .src_key_padding_mask = padding});
    });
    m->register_module("layer",
                       std::make_shared<nn::TransformerEncoderLayer>(
                           16, 4, nn::TransformerEncoderLayerOptions{.dim_feedforward = 32, .batch_first = true}));
    cases.push_back(make_case("encoder_layer_masked", m, {2, 5, 16}, /*dynamic=*/false));
  }
  // Two-input modules: (N, T, E) targets or queries and (N, S, E) memory or keys/values.
  auto two_inputs = [](std::string name, std::shared_ptr<nn::Module> m, bool dynamic, int64_t E = 16) {
    Case c{std::move(name), std::move(m), {randn({2, 4, E})}, {}, {}, {}, {randn({2, 6, E})}};
    if (dynamic) {
      c.batches.push_back(randn({3, 4, E}));
      c.batches2.push_back(randn({3, 6, E}));
      c.options.dynamic_axes = {{"input_0", {{0, "batch"}}}, {"input_1", {{0, "batch"}}}, {"output", {{0, "batch"}}}};
    }
    return c;
  };
  // A decoder layer (self-attention, cross-attention over the memory, feed-forward), and a whole
  // nn::Transformer (encoder and decoder stacks), dynamic batch.
  cases.push_back(two_inputs("decoder_layer",
                             std::make_shared<nn::TransformerDecoderLayer>(
                                 16, 2, nn::TransformerDecoderLayerOptions{.dim_feedforward = 32, .batch_first = true}),
                             true));
  cases.push_back(two_inputs("transformer",
                             std::make_shared<nn::Transformer>(nn::TransformerOptions{.d_model = 16,
                                                                                      .nhead = 4,
                                                                                      .num_encoder_layers = 2,
                                                                                      .num_decoder_layers = 1,
                                                                                      .dim_feedforward = 32,
                                                                                      .batch_first = true}),
                             true));
  // Masks: the decoder layer with a causal float target mask and a bool memory key padding mask;
  // MultiheadAttention alone as cross-attention (kdim = vdim = 8 != embed_dim) with a bool key
  // padding mask and a bool attn_mask, its output and its head-averaged weights. Built in forward
  // from the input's sizes: a static batch.
  struct TwoIn : nn::Module {
    explicit TwoIn(std::function<Tensor(TwoIn&, Tensor, Tensor)> f) : nn::Module("TwoIn"), f_(std::move(f)) {}
    Tensor forward(Tensor a, Tensor b) override { return f_(*this, a, b); }
    std::function<Tensor(TwoIn&, Tensor, Tensor)> f_;
  };
  {
    auto m = std::make_shared<TwoIn>([](TwoIn& self, Tensor tgt, Tensor memory) {
      int64_t N = tgt.size(0), T = tgt.size(1), S = memory.size(1);
      Tensor causal = full({T, T}, -std::numeric_limits<double>::infinity()).triu(1);
      Tensor padding = (arange(S) >= S - 2).unsqueeze(0).expand({N, S});
      auto layer = std::static_pointer_cast<nn::TransformerDecoderLayer>(self.named_children()["layer"]);
      return layer->forward(tgt, memory, {.tgt_mask = causal, .memory_key_padding_mask = padding});
    });
    m->register_module("layer",
                       std::make_shared<nn::TransformerDecoderLayer>(
                           16, 4, nn::TransformerDecoderLayerOptions{.dim_feedforward = 32, .batch_first = true}));
    cases.push_back(two_inputs("decoder_layer_masked", m, false));
  }
  {
    auto m = std::make_shared<TwoIn>([](TwoIn& self, Tensor q, Tensor kv) {
      int64_t N = q.size(0), L = q.size(1), S = kv.size(1);
      Tensor padding = (arange(S) == 0).unsqueeze(0).expand({N, S});
      Tensor blocked = (arange(S).unsqueeze(0) > arange(L).unsqueeze(1) + 3);  // true: not allowed
      auto mha = std::static_pointer_cast<nn::MultiheadAttention>(self.named_children()["mha"]);
      nn::AttentionOutput r =
          mha->forward_attention(q, kv, kv, {.key_padding_mask = padding, .need_weights = true, .attn_mask = blocked});
      return cat({r.output.flatten(1), r.attn_weights.flatten(1)}, 1);
    });
    m->register_module("mha", std::make_shared<nn::MultiheadAttention>(
                                  16, 4, nn::MultiheadAttentionOptions{.kdim = 8, .vdim = 8, .batch_first = true}));
    Case c = two_inputs("multihead_attention_masked", m, false);
    c.batches2 = {randn({2, 6, 8})};
    cases.push_back(std::move(c));
  }
  // Embedding (an int64 input).
  {
    auto m = std::make_shared<nn::Sequential>(std::make_shared<nn::Embedding>(50, 6), std::make_shared<nn::Flatten>());
    Case c{"embedding", m, {randint(0, 50, {2, 7}), randint(0, 50, {4, 7})}, dynamic_batch(), {}, {}};
    cases.push_back(std::move(c));
  }
  auto [abs_err, rel_err] = run_cases(cases, "ops");
  std::printf("[ onnx ] op families: %zu models, largest error vs ONNX Runtime %.3g (relative %.3g)\n", cases.size(),
              abs_err, rel_err);
}

// ---- resampling, scans, indexing and data-dependent shapes ----------------------------------------
// interpolate / nn::Upsample as ONNX's Resize (every mode, by size and by scale factor, 1-D, 2-D and
// 3-D, both align_corners settings), area as MatMuls with the averaging matrix.
TEST(Onnx, InterpolateAsResizeMatchesOnnxRuntime) {
  NABLA_NEEDS_ORT();
  manual_seed(4);
  namespace F = nn::functional;
  std::vector<Case> cases;
  cases.push_back(make_case("resize_2d", std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 2, 5, 6)
                              std::vector<F::InterpolateOptions> opts = {
                                  {.scale_factor = {2}},     // nearest (PyTorch's legacy rule)
                                  {.size = {7, 4}},          // nearest, by size
                                  {.scale_factor = {3, 2}},  // nearest, per-dim scales
                                  {.size = {9, 4}, .mode = "nearest-exact"},
                                  {.scale_factor = {2}, .mode = "nearest-exact"},
                                  {.size = {7, 4}, .mode = "bilinear"},
                                  {.size = {9, 11}, .mode = "bilinear", .align_corners = true},
                                  {.scale_factor = {2}, .mode = "bilinear"},
                                  {.scale_factor = {0.5}, .mode = "bilinear"},
                                  {.scale_factor = {2}, .mode = "bilinear", .align_corners = true},
                                  {.size = {1, 3}, .mode = "bilinear"},  // an output of size 1
                                  {.size = {8, 9}, .mode = "bicubic"},
                                  {.size = {8, 9}, .mode = "bicubic", .align_corners = true},
                                  {.scale_factor = {2}, .mode = "bicubic"},
                                  {.size = {3, 4}, .mode = "bicubic"},  // downsampling
                                  {.size = {3, 4}, .mode = "area"},     // uneven windows
                                  {.size = {5, 3}, .mode = "area"}};
                              std::vector<Tensor> parts;
                              for (const auto& o : opts) parts.push_back(F::interpolate(x, o).flatten(1));
                              return cat(parts, 1);
                            }),
                            {2, 2, 5, 6}));
  cases.back().expect_ops = {{"Resize", 15}, {"Gather", 0}, {"MatMul", 3}};
  cases.push_back(make_case("resize_1d", std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 3, 7)
                              std::vector<F::InterpolateOptions> opts = {
                                  {.scale_factor = {2}},
                                  {.size = {5}, .mode = "nearest-exact"},
                                  {.size = {10}, .mode = "linear"},
                                  {.size = {10}, .mode = "linear", .align_corners = true},
                                  {.scale_factor = {1.5}, .mode = "linear"},
                                  {.size = {3}, .mode = "area"}};
                              std::vector<Tensor> parts;
                              for (const auto& o : opts) parts.push_back(F::interpolate(x, o).flatten(1));
                              return cat(parts, 1);
                            }),
                            {2, 3, 7}));
  cases.back().expect_ops = {{"Resize", 5}, {"Gather", 0}};
  cases.push_back(make_case("resize_3d", std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 2, 3, 4, 5)
                              std::vector<F::InterpolateOptions> opts = {
                                  {.size = {5, 6, 7}},
                                  {.scale_factor = {2}, .mode = "nearest-exact"},
                                  {.scale_factor = {2}, .mode = "trilinear"},
                                  {.size = {4, 3, 6}, .mode = "trilinear", .align_corners = true},
                                  {.size = {2, 2, 3}, .mode = "area"}};
                              std::vector<Tensor> parts;
                              for (const auto& o : opts) parts.push_back(F::interpolate(x, o).flatten(1));
                              return cat(parts, 1);
                            }),
                            {2, 2, 3, 4, 5}));
  cases.back().expect_ops = {{"Resize", 4}, {"Gather", 0}};
  // nn::Upsample between convolutions (a decoder), dynamic batch.
  cases.push_back(
      make_case("upsample_decoder",
                std::make_shared<nn::Sequential>(
                    std::make_shared<nn::Conv2d>(3, 4, 3, nn::Conv2dOptions{.padding = 1}),
                    std::make_shared<nn::Upsample>(F::InterpolateOptions{.scale_factor = {2}, .mode = "bilinear"}),
                    std::make_shared<nn::Conv2d>(4, 2, 3, nn::Conv2dOptions{.padding = 1}),
                    std::make_shared<nn::Upsample>(F::InterpolateOptions{.size = {20, 18}})),
                {2, 3, 6, 5}));
  cases.back().expect_ops = {{"Resize", 2}};
  // Dynamic height and width too (a fully convolutional net): by scale factor, and by size.
  for (bool by_size : {false, true}) {
    F::InterpolateOptions up = by_size ? F::InterpolateOptions{.size = {9, 7}, .mode = "bicubic"}
                                       : F::InterpolateOptions{.scale_factor = {2}, .mode = "bilinear"};
    auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Conv2d>(3, 4, 3, nn::Conv2dOptions{.padding = 1}),
                                                std::make_shared<nn::Upsample>(up));
    Case c{by_size ? "upsample_dynamic_hw_size" : "upsample_dynamic_hw_scale",
           net,
           {randn({2, 3, 6, 5}), randn({3, 3, 4, 7})},
           {},
           {},
           {},
           {},
           {{"Resize", 1}}};
    c.options.dynamic_axes = {{"input", {{0, "batch"}, {2, "h"}, {3, "w"}}}};
    if (!by_size) c.options.dynamic_axes["output"] = {{0, "batch"}, {2, "h2"}, {3, "w2"}};
    else c.options.dynamic_axes["output"] = {{0, "batch"}};
    cases.push_back(std::move(c));
  }
  auto [abs_err, rel_err] = run_cases(cases, "resize");
  std::printf("[ onnx ] interpolate as Resize: %zu models, largest error vs ONNX Runtime %.3g (relative %.3g)\n",
              cases.size(), abs_err, rel_err);
}

// any/all, cumprod (with zeros and negative values), index_add, constant pad, nonzero, unique, sort
// along the dynamic axis; and the math composites that export through their parts (pad's
// reflect/replicate/circular modes, clamp with tensor bounds, pixel_shuffle, instance_norm).
TEST(Onnx, ScansIndexingAndDataDependentShapesMatchOnnxRuntime) {
  NABLA_NEEDS_ORT();
  manual_seed(5);
  namespace F = nn::functional;
  std::vector<Case> cases;
  cases.push_back(make_case("any_all", std::make_shared<Fn>([](Fn&, Tensor x) {       // x: (B, 4, 5)
                              Tensor r = relu(x);                                     // zeros where x <= 0
                              Tensor i = (x > 0.5).to(kInt64) - (x < -1).to(kInt64);  // int64 in {-1, 0, 1}
                              auto f = [](const Tensor& b) { return b.to(kFloat32); };
                              Tensor row = x.select(2, 0) * 0;  // (B, 4) zeros, for the full reductions
                              return cat({f(r.any(2)), f(r.all(2)), f((x > 1).any(1, true)).flatten(1),
                                          f((x > -1.5).all(1)), f(i.any(2)), f(i.all(2)), f(x.all(2)),
                                          row + f(any(x > 2)), row + f(all(x > -3)), f(count_nonzero(r, {2}))},
                                         1);
                            }),
                            {2, 4, 5}));
  cases.back().expect_ops = {{"ReduceSum", 10}};
  // prod (ReduceProd): along a dim (keepdim or not), over all dims, integers and bools as int64, an
  // empty reduction (1), a 0-d input.
  cases.push_back(make_case("prod", std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 4, 5)
                              Tensor z = where(x.abs() < 0.3, zeros({}), x);  // exact zeros and negative values
                              Tensor i = (x > 0.5).to(kInt64) * 3 - (x < -1).to(kInt64) * 2;  // int64 in {-2, 0, 3}
                              Tensor row = x.select(2, 0) * 0;  // (B, 4) zeros, for the full reductions
                              auto f = [](const Tensor& b) { return b.to(kFloat32); };
                              return cat(
                                  {prod(z, 2), prod(x, 1, true).flatten(1), z.prod(-1), f(prod(i + 1, 2)),
                                   f(prod(x > -1, 2)), prod(x.narrow(2, 0, 0), 2), row + prod(x * 0.5),
                                   row + prod(x.sum() * 0.1, 0), row + f(prod(i.select(0, 0).narrow(1, 0, 3) + 1))},
                                  1);
                            }),
                            {2, 4, 5}));
  cases.back().expect_ops = {{"ReduceProd", 9}};
  cases.push_back(make_case("cumprod", std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 5, 7)
                              Tensor z = where(x.abs() < 0.3, zeros({}), x);     // exact zeros and negative values
                              Tensor i = (x > 0).to(kInt64) * 3 - 1;             // int64 in {-1, 2}
                              return cat({cumprod(z, 2), cumprod(z, 1), cumprod(i, 2).to(kFloat32),
                                          cumprod(cumprod(x * 0.5, -1), 1), cumprod(z.narrow(2, 0, 1), 2)},
                                         2);
                            }),
                            {2, 5, 7}));
  cases.back().expect_ops = {{"Pad", 3 + 3 + 3 + 3 + 3}};
  {
    auto m = std::make_shared<Fn>([](Fn& self, Tensor x) {        // x: (B, 4, 6)
      Tensor idx = tensor(std::vector<int64_t>{0, 2, 2, 5, -1});  // repeats and a negative index
      Tensor a = index_add(x, 2, idx, x.narrow(2, 0, 5) * 2);
      Tensor b = index_add(x, 1, tensor(std::vector<int64_t>{3, 3, 1}), x.narrow(1, 1, 3) + self.p("w"));
      return cat({a, b}, 2);
    });
    m->register_parameter("w", randn({3, 6}));
    cases.push_back(make_case("index_add", m, {2, 4, 6}));
    cases.back().expect_ops = {{"ScatterElements", 2}};
  }
  cases.push_back(make_case(
      "pad", std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 2, 5, 6)
        return cat({F::pad(x, {1, 2, 2, 1}).flatten(1), F::pad(x, {2, 0}, "constant", -1.5).flatten(1),
                    F::pad(x, {-1, 2, 1, -2}).flatten(1), F::pad(x, {1, 2, 2, 1}, "reflect").flatten(1),
                    F::pad(x, {3, 1, 0, 2}, "replicate").flatten(1), F::pad(x, {2, 1, 1, 3}, "circular").flatten(1)},
                   1);
      }),
      {2, 2, 5, 6}));
  cases.back().expect_ops = {{"Pad", 5}, {"Gather", 0}};
  {
    auto m = std::make_shared<Fn>([](Fn& self, Tensor x) {  // x: (B, 8, 4, 6)
      Tensor lo = self.p("lo"), hi = self.p("hi");
      return cat({clamp(x, lo, hi).flatten(1), clamp_min(x, lo).flatten(1), clamp_max(x, hi).flatten(1),
                  F::pixel_shuffle(x, 2).flatten(1), F::pixel_unshuffle(x, 2).flatten(1)},
                 1);
    });
    m->register_parameter("lo", randn({4, 6}) - 0.5);
    m->register_parameter("hi", randn({4, 6}) + 0.5);
    cases.push_back(make_case("clamp_pixel_shuffle", m, {2, 8, 4, 6}));
  }
  {
    auto m = std::make_shared<nn::InstanceNorm2d>(3, nn::InstanceNormOptions{.affine = true});
    {
      autograd::NoGradGuard ng;
      m->named_parameters()["weight"].copy_(randn({3}));
      m->named_parameters()["bias"].copy_(randn({3}));
    }
    cases.push_back(make_case("instance_norm", m, {2, 3, 5, 4}));
    cases.back().expect_ops = {{"InstanceNormalization", 1}};
    cases.push_back(make_case("instance_norm1d", std::make_shared<nn::InstanceNorm1d>(4), {2, 4, 7}));
    cases.back().expect_ops = {{"InstanceNormalization", 1}};
    // With running statistics, in eval: batch norm's formula.
    auto tracked =
        std::make_shared<nn::InstanceNorm2d>(3, nn::InstanceNormOptions{.affine = true, .track_running_stats = true});
    Case c = make_case("instance_norm_running_stats", tracked, {2, 3, 5, 4});
    warm_batch_norms(*tracked, c.batches[0]);
    c.expect_ops = {{"InstanceNormalization", 0}, {"BatchNormalization", 1}};
    cases.push_back(std::move(c));
  }
  // A detached traced value is that value (not a constant frozen from the example).
  cases.push_back(make_case("detach", std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 3, 4)
                              Tensor h = x * 2;
                              return h.detach() * x + floor(h.detach()) +
                                     x.detach().transpose(1, 2).sum({1}).unsqueeze(2);
                            }),
                            {2, 3, 4}));
  // grid_sample as GridSample (opset 16+, 4-D), the grid computed from the input (values past +-1),
  // dynamic batch; below opset 16 and for 5-D inputs through the ops it is made of, with a static
  // batch (the composition builds constants shaped by the example's batch).
  for (const char* mode : {"bilinear", "nearest", "bicubic"})
    for (const char* padding : {"zeros", "border", "reflection"})
      for (bool corners : {false, true}) {
        F::GridSampleOptions o{.mode = mode, .padding_mode = padding, .align_corners = corners};
        auto sampler = std::make_shared<Fn>([o](Fn&, Tensor x) {  // x: (B, 2, 5, 6)
          Tensor grid = tanh(x.permute({0, 2, 3, 1})) * 1.3;      // (B, 5, 6, 2)
          return F::grid_sample(x, grid, o);
        });
        std::string name = std::string("grid_sample_") + mode + "_" + padding + (corners ? "_corners" : "");
        cases.push_back(make_case(name, sampler, {2, 2, 5, 6}));
        cases.back().expect_ops = {{"GridSample", 1}};
        if (std::string(mode) == "bicubic") continue;
        cases.push_back(make_case(name + "_opset15", sampler, {2, 2, 5, 6}, /*dynamic=*/false));
        cases.back().options.opset_version = 15;
        cases.back().expect_ops = {{"GridSample", 0}};
      }
  cases.push_back(make_case(
      "grid_sample_5d", std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 3, 3, 4, 5)
        Tensor grid = tanh(x.permute({0, 2, 3, 4, 1})) * 1.2;     // (B, 3, 4, 5, 3)
        return cat({F::grid_sample(x, grid, {.padding_mode = "border"}),
                    F::grid_sample(x, grid, {.mode = "nearest", .padding_mode = "reflection", .align_corners = true})},
                   1);
      }),
      {2, 3, 3, 4, 5}, /*dynamic=*/false));
  cases.back().expect_ops = {{"GridSample", 0}};
  // Sorting along the dynamic batch axis (K from the input's shape) and topk there with a fixed k.
  cases.push_back(make_case("sort_dynamic_axis", std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 6)
                              auto [v, i] = x.sort(0);
                              auto [dv, di] = x.sort(0, true);
                              return cat({v, i.to(kFloat32), dv, di.to(kFloat32), x.gather(0, x.argsort(0))}, 1);
                            }),
                            {2, 6}));
  cases.back().expect_ops = {{"TopK", 6}};
  {
    auto m = std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 6) -> (1, 6)
      auto [v, i] = x.topk(1, 0);
      return cat({v, i.to(kFloat32)}, 1);
    });
    Case c = make_case("topk_dynamic_axis", m, {3, 6});
    c.options.dynamic_axes = {{"input", {{0, "batch"}}}};
    cases.push_back(std::move(c));
  }
  // cumprod along dynamic axes (a Loop while the shift is below the length): both dims dynamic, the
  // lengths 4, 9 and 1 (no round), floats with zeros and negative values, and int64.
  {
    Case c{"cumprod_dynamic",
           std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, L)
             Tensor z = where(x.abs() < 0.3, zeros({}), x);
             Tensor i = (x > 0).to(kInt64) * 2 - (x < -1).to(kInt64) * 3;
             return cat({cumprod(z, 1), cumprod(x * 0.7, 0), cumprod(i, 1).to(kFloat32), cumprod(cumprod(z, 0), 1)}, 1);
           }),
           {randn({3, 4}), randn({9, 9}), randn({1, 1})},
           {},
           {},
           {}};
    c.options.dynamic_axes = {{"input", {{0, "batch"}, {1, "steps"}}}, {"output", {{0, "batch"}, {1, "cols"}}}};
    c.expect_ops = {{"Loop", 5}};
    cases.push_back(std::move(c));
  }
  // Data-dependent sizes: nonzero (and masked_select through it), unique with inverse and counts.
  onnx::ExportOptions data_dependent;
  data_dependent.dynamic_axes = {{"input", {{0, "batch"}}}, {"output", {{0, "n"}}}};
  {
    Case c = make_case(
        "nonzero", std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 3, 4)
          return cat({nonzero(x > 0.3).to(kFloat32).flatten(),
                      x.flatten().index_select(0, nonzero(x.flatten() > 0).squeeze(1)), x.masked_select(x < -0.5)});
        }),
        {2, 3, 4});
    c.options = data_dependent;
    c.expect_ops = {{"NonZero", 3}};
    cases.push_back(std::move(c));
  }
  {
    Case c = make_case(
        "unique", std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 3, 4)
          Tensor q = (x * 2).round();
          UniqueResult a = unique(q, true, true, true);
          UniqueResult b = unique((x > 0).to(kInt64) * 3 + (x > 1).to(kInt64), true, false, true);
          UniqueResult c = unique(q, true, true, false);
          return cat({a.values, a.inverse.to(kFloat32).flatten(), a.counts.to(kFloat32), b.values.to(kFloat32),
                      b.counts.to(kFloat32), c.values * 2, c.inverse.to(kFloat32).flatten()});
        }),
        {2, 3, 4});
    c.options = data_dependent;
    c.expect_ops = {{"Unique", 3}};
    cases.push_back(std::move(c));
  }
  auto [abs_err, rel_err] = run_cases(cases, "scans");
  std::printf(
      "[ onnx ] scans, indexing, data-dependent shapes: %zu models, largest error vs ONNX Runtime %.3g "
      "(relative %.3g)\n",
      cases.size(), abs_err, rel_err);
  // Refused clearly: index_add below opset 16.
  Fn index_add_fn([](Fn&, Tensor x) { return index_add(x, 1, tensor(std::vector<int64_t>{0, 0}), x.narrow(1, 0, 2)); });
  onnx::ExportOptions o15;
  o15.opset_version = 15;
  try {
    (void)onnx::export_model_to_string(index_add_fn, {randn({2, 3})}, o15);
    FAIL() << "exported index_add at opset 15";
  } catch (const NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("op 'index_add' (in the top-level module) needs opset 16"), std::string::npos)
        << e.what();
  }
}

// ---- the stats ops ------------------------------------------------------------------------------
// median, nanmedian, kthvalue and mode (values and indices, with ties, NaN and +inf in the same
// lines), quantile and nanquantile (every interpolation, q a number or a 1-D tensor, with and
// without dim and keepdim), unique_consecutive (inverse, counts) and histc, against ONNX Runtime.
// NaN and infinite results are mapped to finite values inside the model, so they are compared too.
TEST(Onnx, StatsOpsMatchOnnxRuntime) {
  NABLA_NEEDS_ORT();
  manual_seed(6);
  std::vector<Case> cases;
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  auto f = [](const Tensor& t) { return t.to(kFloat32); };
  // NaN -> -100 and +-inf -> +-1000, so they compare.
  auto no_nan = [](const Tensor& t) { return clamp(where(isnan(t), full({}, -100.0), t), -1000, 1000); };
  // x: (B, 5, 8); q: halves, so lines hold ties; qn: with NaN and +inf (rows without either too).
  auto picks = [=](Fn&, Tensor x) {
    Tensor q = (x * 2).round() / 2;
    Tensor qn = where(x > 1.2, full({}, nan), where(x < -1.2, full({}, inf), q));
    auto i64 = [](const Tensor& b) { return b.to(kInt64); };
    Tensor qi = i64(x > -1) + i64(x > -0.3) + i64(x > 0.3) + i64(x > 1);  // 0 to 4
    std::vector<Tensor> parts;
    auto both = [&](std::tuple<Tensor, Tensor> r) {
      parts.push_back(no_nan(std::get<0>(r)).flatten(1));
      parts.push_back(f(std::get<1>(r)).flatten(1));
    };
    both(median(q, 2));
    both(median(q, 1, true));
    both(median(qn, 2));
    both(nanmedian(qn, 2));
    both(nanmedian(qn, 1, true));
    both(median(qi, 2));
    both(nanmedian(qi, 1));
    both(kthvalue(q, 3, 2));
    both(kthvalue(qn, 7, 2, true));
    both(kthvalue(qn, 2, 1));
    both(kthvalue(qi, 5, -1));
    both(mode(q, 2));
    both(mode(qn, 1, true));
    both(mode(qi, 2));
    Tensor row = x.select(2, 0).select(1, 0).unsqueeze(1) * 0;  // (B, 1)
    parts.push_back(row + median(q));
    parts.push_back(row + no_nan(median(qn)));
    parts.push_back(row + nanmedian(qn));
    parts.push_back(row + f(median(qi)));
    return cat(parts, 1);
  };
  cases.push_back(make_case("median_kthvalue_mode", std::make_shared<Fn>(picks), {3, 5, 8}));
  // Long lines with many ties (TopK's heap and sort paths): lines of 4096 values from 9 levels.
  cases.push_back(
      make_case("long_lines", std::make_shared<Fn>([=](Fn&, Tensor x) {  // x: (B, 4096)
                  Tensor q = (x * 2).round().clamp(-4, 4);
                  auto [mv, mi] = median(q, 1, true);
                  auto [kv, ki] = kthvalue(q, 1000, 1, true);
                  auto [tv, ti] = q.topk(50, 1);
                  auto [bv, bi] = q.topk(3000, 1, false);
                  auto [ov, oi] = mode(q.narrow(1, 0, 512), 1, true);
                  return cat({mv, f(mi), kv, f(ki), tv, f(ti), bv, f(bi), f(q.argsort(1, true)), ov, f(oi)}, 1);
                }),
                {2, 4096}));
  // Along a dynamic axis: the line length comes from Shape (7 steps, then 4).
  {
    Case c{"median_dynamic_length",
           std::make_shared<Fn>([=](Fn&, Tensor x) {  // x: (B, L)
             Tensor q = (x * 2).round() / 2;
             auto [mv, mi] = median(q, 1, true);
             auto [nv, ni] = nanmedian(where(x > 1, full({}, nan), q), 1, true);
             auto [kv, ki] = kthvalue(q, 2, 1, true);
             auto [ov, oi] = mode(q, 1, true);
             return cat({mv, f(mi), no_nan(nv), f(ni), kv, f(ki), ov, f(oi), quantile(q, 0.4, 1, true)}, 1);
           }),
           {randn({3, 7}), randn({5, 4})},
           {},
           {},
           {}};
    c.options.dynamic_axes = {{"input", {{0, "batch"}, {1, "steps"}}}, {"output", {{0, "batch"}}}};
    cases.push_back(std::move(c));
  }
  // sort, argsort and topk with NaN, +inf and ties: NaN last ascending, first descending (before
  // +inf), ties in index order, as nabla; max/min reductions with NaN.
  cases.push_back(make_case("sort_topk_nan", std::make_shared<Fn>([=](Fn&, Tensor x) {  // x: (B, 5, 8)
                              Tensor q = (x * 2).round() / 2;
                              Tensor qn = where(x > 1.2, full({}, nan), where(x < -1.2, full({}, inf), q));
                              std::vector<Tensor> parts;
                              auto both = [&](std::tuple<Tensor, Tensor> r) {
                                parts.push_back(no_nan(std::get<0>(r)).flatten(1));
                                parts.push_back(f(std::get<1>(r)).flatten(1));
                              };
                              both(qn.sort(2));
                              both(qn.sort(1, true));
                              both(qn.topk(3, 2));
                              both(qn.topk(4, 2, false));
                              both(q.sort(2, true));
                              parts.push_back(f(qn.argsort(2)).flatten(1));
                              // max/min along a dim, argmax, amax/amin, max over all: NaN wins (its first index), as in nabla.
                              both(qn.max(2, false));
                              both(qn.min(1, true));
                              parts.push_back(f(qn.argmax(2)));
                              parts.push_back(no_nan(qn.amax({2})));
                              parts.push_back(no_nan(qn.amin({1}, true)).flatten(1));
                              parts.push_back(x.select(2, 0) * 0 + no_nan(qn.max()));
                              return cat(parts, 1);
                            }),
                            {3, 5, 8}));
  cases.back().expect_ops = {{"TopK", 12}};
  // quantile / nanquantile: x (B, 6, 5).
  cases.push_back(make_case("quantile", std::make_shared<Fn>([=](Fn&, Tensor x) {
                              Tensor xn = where(x > 1.3, full({}, nan), x);
                              Tensor qs = tensor(std::vector<double>{0, 0.25, 0.6, 1}, dtype(kFloat32));  // a constant
                              std::vector<Tensor> parts;
                              for (const char* mode : {"linear", "lower", "higher", "nearest", "midpoint"}) {
                                parts.push_back(quantile(x, 0.3, 2, false, mode).flatten(1));
                                parts.push_back(quantile(x, qs, 1, true, mode).transpose(0, 1).flatten(1));
                                parts.push_back(no_nan(quantile(xn, 0.5, 2, false, mode)).flatten(1));
                                parts.push_back(no_nan(nanquantile(xn, qs, 2, false, mode)).transpose(0, 1).flatten(1));
                                parts.push_back(no_nan(nanquantile(xn, 0.7, 1, true, mode)).flatten(1));
                              }
                              Tensor row = x.select(2, 0).select(1, 0).unsqueeze(1) * 0;  // (B, 1)
                              parts.push_back(row + quantile(x, qs).unsqueeze(0));
                              parts.push_back(row + quantile(x, 0.25, std::nullopt, true).reshape({1, 1}));
                              parts.push_back(row +
                                              no_nan(nanquantile(xn, qs, std::nullopt, false, "nearest")).unsqueeze(0));
                              return cat(parts, 1);
                            }),
                            {3, 6, 5}));
  // unique_consecutive: runs of a flattened tensor (float with NaN, int64), inverse and counts.
  {
    onnx::ExportOptions data_dependent;
    data_dependent.dynamic_axes = {{"input", {{0, "batch"}}}, {"output", {{0, "n"}}}};
    Case c = make_case(
        "unique_consecutive", std::make_shared<Fn>([=](Fn&, Tensor x) {  // x: (B, 3, 4)
          Tensor q = (x > 0).to(kFloat32) + (x > 1).to(kFloat32);
          Tensor qn = where(x < -1.3, full({}, nan), q);
          UniqueResult a = unique_consecutive(q, true, true);
          UniqueResult b = unique_consecutive(qn, false, true);
          UniqueResult c = unique_consecutive((x > 0.5).to(kInt64), true, false);
          // Along a dim: runs of equal rows of (3, 4) bits, of equal columns, and of rows with NaN.
          Tensor bits = (x.select(0, 0) > 0.3).to(kInt64);  // (3, 4)
          UniqueResult d = unique_consecutive(bits, true, true, 0);
          UniqueResult e = unique_consecutive(bits.transpose(0, 1).contiguous(), true, true, -2);
          UniqueResult g =
              unique_consecutive(where(x.select(0, 0) > 1.3, full({}, nan), q.select(0, 0)), false, true, 1);
          // unique along a dim: sorted distinct rows / columns (ties of prefixes, NaN rows apart).
          Tensor grid = (x.select(0, 0) > 0).to(kInt64) * 2 + (x.select(0, 1) > 0.5).to(kInt64);  // (3, 4) in 0..3
          UniqueResult h = unique(grid.repeat({2, 1}), true, true, true, 0);
          UniqueResult k = unique(grid, true, true, true, 1);
          UniqueResult l =
              unique(where(x.select(0, 0) > 1.3, full({}, nan), q.select(0, 0)).repeat({1, 2}), true, true, true, 1);
          return cat({a.values,
                      f(a.inverse).flatten(),
                      f(a.counts),
                      no_nan(b.values),
                      f(b.counts),
                      f(c.values),
                      f(c.inverse).flatten(),
                      f(d.values).flatten(),
                      f(d.inverse),
                      f(d.counts),
                      f(e.values).flatten(),
                      f(e.inverse),
                      f(e.counts),
                      no_nan(g.values).flatten(),
                      f(g.counts),
                      f(h.values).flatten(),
                      f(h.inverse),
                      f(h.counts),
                      f(k.values).flatten(),
                      f(k.inverse),
                      f(k.counts),
                      no_nan(l.values).flatten(),
                      f(l.inverse),
                      f(l.counts)});
        }),
        {2, 3, 4});
    c.options = data_dependent;
    c.expect_ops = {{"NonZero", 9}, {"Unique", 0}};
    cases.push_back(std::move(c));
  }
  // cummax / cummin (values and indices: ties to the latest, a NaN stays with the latest NaN's index;
  // floats with +inf, int64, bool) and logcumsumexp (with -inf and far-apart values), along static axes.
  cases.push_back(make_case("cum_scans", std::make_shared<Fn>([=](Fn&, Tensor x) {  // x: (B, 5, 7)
                              Tensor q = (x * 2).round() / 2;
                              Tensor qn = where(x > 1.2, full({}, nan), where(x < -1.2, full({}, inf), q));
                              auto i64 = [](const Tensor& b) { return b.to(kInt64); };
                              Tensor qi = i64(x > -1) + i64(x > -0.3) + i64(x > 0.3) + i64(x > 1);
                              std::vector<Tensor> parts;
                              auto both = [&](std::tuple<Tensor, Tensor> r) {
                                parts.push_back(no_nan(f(std::get<0>(r))).flatten(1));
                                parts.push_back(f(std::get<1>(r)).flatten(1));
                              };
                              both(cummax(q, 2));
                              both(cummin(q, 1));
                              both(cummax(qn, 2));
                              both(cummin(qn, 2));
                              both(cummax(qi, 2));
                              both(cummin(x > 0, 1));
                              parts.push_back(logcumsumexp(x, 2).flatten(1));
                              parts.push_back(logcumsumexp(x * 40, 1).flatten(1));
                              parts.push_back(no_nan(logcumsumexp(where(x < -0.8, full({}, -inf), x), 2)).flatten(1));
                              return cat(parts, 1);
                            }),
                            {3, 5, 7}));
  // searchsorted / bucketize: a 1-D sequence with repeats (both sides, int32 results), a sorted line
  // per row, a sorter, NaN values, a scalar value, int64 sequence and values.
  cases.push_back(make_case(
      "searchsorted", std::make_shared<Fn>([=](Fn&, Tensor x) {  // x: (B, 3, 6)
        Tensor q = (x * 2).round() / 2;
        Tensor bounds = tensor(std::vector<double>{-1, -0.5, 0, 0, 0.5, 1.5}, dtype(kFloat32));
        auto i64 = [](const Tensor& b) { return b.to(kInt64); };
        Tensor qi = i64(x > -1) + i64(x > 0) * 2;
        Tensor row = x.select(2, 0).select(1, 0).unsqueeze(1) * 0;  // (B, 1)
        return cat(
            {f(searchsorted(bounds, q)).flatten(1), f(searchsorted(bounds, q, false, true)).flatten(1),
             f(bucketize(x, bounds, true, false)).flatten(1), f(bucketize(q, bounds, false, true)).flatten(1),
             f(searchsorted(std::get<0>(q.sort(2)), q * 0.5, false, false, "right")).flatten(1),
             f(searchsorted(q, x.narrow(2, 0, 2), false, false, std::nullopt, q.argsort(2))).flatten(1),
             f(searchsorted(bounds, where(x > 1.2, full({}, nan), x))).flatten(1),
             row + f(searchsorted(bounds, Scalar(0.25))),
             f(searchsorted(tensor(std::vector<int64_t>{0, 1, 1, 3}, dtype(kInt64)), qi, false, true)).flatten(1)},
            1);
      }),
      {3, 3, 6}));
  // The same scans along dynamic axes (Loops): lengths 7, 4 and 1 along dim 1, batch 3, 5, 2.
  {
    Case c{"cum_scans_dynamic",
           std::make_shared<Fn>([=](Fn&, Tensor x) {  // x: (B, L)
             Tensor q = (x * 2).round() / 2;
             Tensor qn = where(x > 1.2, full({}, nan), where(x < -1.2, full({}, inf), q));
             Tensor qi = (x > -0.3).to(kInt64) + (x > 0.3).to(kInt64);
             std::vector<Tensor> parts;
             auto both = [&](std::tuple<Tensor, Tensor> r) {
               parts.push_back(no_nan(f(std::get<0>(r))));
               parts.push_back(f(std::get<1>(r)));
             };
             both(cummax(q, 1));
             both(cummin(qn, 1));
             both(cummax(qi, 1));
             both(cummax(qn, 0));
             parts.push_back(logcumsumexp(x, 1));
             parts.push_back(logcumsumexp(x * 40, 0));
             return cat(parts, 1);
           }),
           {randn({3, 7}), randn({5, 4}), randn({2, 1})},
           {},
           {},
           {}};
    c.options.dynamic_axes = {{"input", {{0, "batch"}, {1, "steps"}}}, {"output", {{0, "batch"}, {1, "cols"}}}};
    c.expect_ops = {{"Loop", 6}};
    cases.push_back(std::move(c));
  }
  // bincount: counts, float32 and float64 weight sums, minlength past the data's max (length
  // data-dependent).
  {
    Case c = make_case("bincount", std::make_shared<Fn>([=](Fn&, Tensor x) {  // x: (B, 3, 4)
                         auto i64 = [](const Tensor& b) { return b.to(kInt64); };
                         Tensor ix = (i64(x > -1) + i64(x > 0) * 2 + i64(x > 1) * 3).flatten();  // 0, 1, 3, 6
                         Tensor w = x.flatten();
                         return cat({f(bincount(ix)), bincount(ix, w), f(bincount(ix, w.to(kFloat64))),
                                     f(bincount(ix, {}, 9)), f(bincount(i64(x > 5).flatten()))});
                       }),
                       {2, 3, 4});
    c.options.dynamic_axes = {{"input", {{0, "batch"}}}, {"output", {{0, "n"}}}};
    cases.push_back(std::move(c));
  }
  // histc: fixed bounds, the data's range, a constant input (bounds widened), values on the edges.
  {
    Case c = make_case(
        "histc", std::make_shared<Fn>([](Fn&, Tensor x) {  // x: (B, 3, 4)
          return cat({histc(x, 10, -1, 1), histc(x, 7), histc(x * 0, 4), histc((x * 2).round() / 4, 4, -0.5, 0.5),
                      histc(x.to(kFloat64), 5, -2, 2).to(kFloat32)});
        }),
        {2, 3, 4});
    c.options.dynamic_axes = {{"input", {{0, "batch"}}}};
    cases.push_back(std::move(c));
  }
  auto [abs_err, rel_err] = run_cases(cases, "stats");
  std::printf("[ onnx ] stats ops: %zu models, largest error vs ONNX Runtime %.3g (relative %.3g)\n", cases.size(),
              abs_err, rel_err);
}

// ---- recurrent layers ---------------------------------------------------------------------------
namespace {
// Every result of a recurrent module in one tensor (N, D * L + D * num_layers * (1 or 2), H): the
// output sequence's directions, h_n and (LSTM) c_n, batch first. With a second input, the initial
// state: h0 (D * num_layers, N, H), or for an LSTM h0 and c0 stacked (2, D * num_layers, N, H).
struct Recurrent : nn::Module {
  explicit Recurrent(std::shared_ptr<nn::RNNBase> m) : nn::Module("Recurrent") { rnn = register_module("rnn", m); }
  Tensor forward(Tensor x) override { return run(x, Tensor()); }
  Tensor forward(Tensor x, Tensor state) override { return run(x, state); }
  Tensor run(Tensor x, Tensor state) {
    Tensor out, h, c;
    if (auto* lstm = dynamic_cast<nn::LSTM*>(rnn.get())) {
      nn::LSTMState s;
      if (state.defined()) s = {state.select(0, 0), state.select(0, 1)};
      nn::LSTMOutput r = lstm->forward_with_state(x, s);
      out = r.output, h = r.h_n, c = r.c_n;
    } else if (auto* gru = dynamic_cast<nn::GRU*>(rnn.get())) {
      nn::RNNOutput r = gru->forward_with_state(x, state);
      out = r.output, h = r.h_n;
    } else {
      nn::RNNOutput r = static_cast<nn::RNN&>(*rnn).forward_with_state(x, state);
      out = r.output, h = r.h_n;
    }
    if (!rnn->batch_first) out = out.transpose(0, 1);  // (N, L, D * H)
    std::vector<Tensor> parts = out.chunk(rnn->num_directions(), 2);
    parts.push_back(h.transpose(0, 1));
    if (c.defined()) parts.push_back(c.transpose(0, 1));
    return cat(parts, 1);
  }
  std::shared_ptr<nn::RNNBase> rnn;
};

// Batch 2 with 4 steps, then batch 5 with 3 steps: batch and sequence length are dynamic.
Case recurrent_case(std::string name, std::shared_ptr<nn::RNNBase> m, bool with_state, std::string op, int nodes) {
  auto wrapper = std::make_shared<Recurrent>(m);
  Case c{std::move(name),
         wrapper,
         {},
         {},
         {},
         {},
         {},
         {{op, nodes}, {"Sigmoid", 0}, {"Tanh", 0}, {"MatMul", 0}, {"Gemm", 0}}};
  const int64_t batch_dim = m->batch_first ? 0 : 1, seq_dim = 1 - batch_dim;
  const int64_t states = m->num_directions() * m->num_layers;
  for (auto [N, L] : {std::pair<int64_t, int64_t>{2, 4}, {5, 3}}) {
    c.batches.push_back(m->batch_first ? randn({N, L, m->input_size}) : randn({L, N, m->input_size}));
    if (!with_state) continue;
    if (m->mode == nn::RNNBase::Mode::lstm) c.batches2.push_back(randn({2, states, N, m->hidden_size}));
    else c.batches2.push_back(randn({states, N, m->hidden_size}));
  }
  c.options.input_names = {"x"};
  c.options.dynamic_axes = {{"x", {{batch_dim, "batch"}, {seq_dim, "steps"}}}, {"output", {{0, "batch"}, {1, "rows"}}}};
  if (with_state) {
    c.options.input_names.push_back("state");
    c.options.dynamic_axes["state"] = {{m->mode == nn::RNNBase::Mode::lstm ? 2 : 1, "batch"}};
  }
  return c;
}
}  // namespace

// nn::RNN, LSTM and GRU export as ONNX's own RNN, LSTM and GRU nodes (one per layer, both
// directions in it; no unrolled gates left), with dynamic batch and sequence length, and match ONNX
// Runtime: output, h_n and c_n, with and without an initial state.
TEST(Onnx, RecurrentLayersMatchOnnxRuntime) {
  NABLA_NEEDS_ORT();
  manual_seed(3);
  std::vector<Case> cases;
  cases.push_back(recurrent_case(
      "lstm_bf_bi_2layers",
      std::make_shared<nn::LSTM>(8, 6, nn::LSTMOptions{.num_layers = 2, .batch_first = true, .bidirectional = true}),
      false, "LSTM", 2));
  cases.push_back(recurrent_case(
      "lstm_bi_2layers_state",
      std::make_shared<nn::LSTM>(8, 6, nn::LSTMOptions{.num_layers = 2, .bidirectional = true}), true, "LSTM", 2));
  cases.push_back(recurrent_case(
      "lstm_bf_3layers_state_nobias",
      std::make_shared<nn::LSTM>(5, 7, nn::LSTMOptions{.num_layers = 3, .bias = false, .batch_first = true}), true,
      "LSTM", 3));
  cases.push_back(recurrent_case(
      "gru_bf_bi_2layers_state",
      std::make_shared<nn::GRU>(8, 6, nn::GRUOptions{.num_layers = 2, .batch_first = true, .bidirectional = true}),
      true, "GRU", 2));
  cases.push_back(recurrent_case("gru", std::make_shared<nn::GRU>(8, 6), false, "GRU", 1));
  cases.push_back(recurrent_case("gru_bi_nobias",
                                 std::make_shared<nn::GRU>(4, 5, nn::GRUOptions{.bias = false, .bidirectional = true}),
                                 false, "GRU", 1));
  cases.push_back(recurrent_case(
      "rnn_tanh_bi_2layers_state",
      std::make_shared<nn::RNN>(8, 6, nn::RNNOptions{.num_layers = 2, .bidirectional = true}), true, "RNN", 2));
  cases.push_back(recurrent_case(
      "rnn_relu_bf", std::make_shared<nn::RNN>(8, 6, nn::RNNOptions{.nonlinearity = "relu", .batch_first = true}),
      false, "RNN", 1));
  {  // an unbatched sequence (L, H_in), the module itself (its output sequence)
    auto gru = std::make_shared<nn::GRU>(8, 6, nn::GRUOptions{.num_layers = 2, .bidirectional = true});
    Case c{"gru_unbatched", gru, {randn({4, 8}), randn({7, 8})}, {}, {}, {}, {}, {{"GRU", 2}, {"Sigmoid", 0}}};
    c.options.dynamic_axes = {{"input", {{0, "steps"}}}, {"output", {{0, "steps"}}}};
    cases.push_back(std::move(c));
  }
  auto [abs_err, rel_err] = run_cases(cases, "rnn");
  std::printf("[ onnx ] recurrent layers: %zu models, largest error vs ONNX Runtime %.3g (relative %.3g)\n",
              cases.size(), abs_err, rel_err);
}

// LSTM with proj_size: a Scan per layer and direction (no LSTM node), stacked, bidirectional,
// batch first, the batch dynamic and the sequence length static or dynamic (run at two lengths);
// output, h_n and c_n (of different sizes: H_out = proj_size), each flattened per batch row.
TEST(Onnx, LstmWithProjectionAsScanMatchesOnnxRuntime) {
  NABLA_NEEDS_ORT();
  manual_seed(7);
  struct Projected : nn::Module {
    explicit Projected(std::shared_ptr<nn::LSTM> m) : nn::Module("Projected") { lstm = register_module("lstm", m); }
    Tensor forward(Tensor x) override {
      nn::LSTMOutput r = lstm->forward_with_state(x, {});
      Tensor out = lstm->batch_first ? r.output : r.output.transpose(0, 1);  // (N, L, D * P)
      return cat({out.flatten(1), r.h_n.transpose(0, 1).flatten(1), r.c_n.transpose(0, 1).flatten(1)}, 1);
    }
    std::shared_ptr<nn::LSTM> lstm;
  };
  std::vector<Case> cases;
  // L2 > 0: the sequence axis is dynamic too, the second batch L2 steps long.
  auto add = [&](std::string name, nn::LSTMOptions o, int64_t in, int64_t hidden, int64_t L, int64_t L2 = 0) {
    auto m = std::make_shared<Projected>(std::make_shared<nn::LSTM>(in, hidden, o));
    const int64_t b = o.batch_first ? 0 : 1, t = 1 - b;
    auto shape = [&](int64_t N, int64_t steps) {
      return o.batch_first ? std::vector<int64_t>{N, steps, in} : std::vector<int64_t>{steps, N, in};
    };
    const int64_t scans = o.num_layers * (o.bidirectional ? 2 : 1);
    Case c{std::move(name),
           m,
           {randn(shape(2, L)), randn(shape(5, L2 > 0 ? L2 : L))},
           {},
           {},
           {},
           {},
           {{"LSTM", 0}, {"Scan", static_cast<int>(scans)}}};
    c.options.dynamic_axes = {{"input", {{b, "batch"}}}, {"output", {{0, "batch"}}}};
    if (L2 > 0) {
      c.options.dynamic_axes["input"][t] = "steps";
      c.options.dynamic_axes["output"][1] = "features";  // (N, L * D * P + 2 * layers * D * (P + H))
    }
    cases.push_back(std::move(c));
  };
  add("lstm_proj_bi_2layers", {.num_layers = 2, .bidirectional = true, .proj_size = 3}, 5, 6, 4);
  add("lstm_proj_bf_nobias", {.bias = false, .batch_first = true, .proj_size = 2}, 3, 5, 6);
  add("lstm_proj_bf_bi_one_step", {.batch_first = true, .bidirectional = true, .proj_size = 4}, 4, 7, 1);
  add("lstm_proj_bi_2layers_dynamic_steps", {.num_layers = 2, .bidirectional = true, .proj_size = 3}, 5, 6, 4, 9);
  add("lstm_proj_bf_bi_dynamic_steps", {.batch_first = true, .bidirectional = true, .proj_size = 2}, 3, 4, 1, 7);
  auto [abs_err, rel_err] = run_cases(cases, "proj");
  std::printf("[ onnx ] LSTM with proj_size: %zu models, largest error vs ONNX Runtime %.3g (relative %.3g)\n",
              cases.size(), abs_err, rel_err);
}

// ---- models -------------------------------------------------------------------------------------
namespace {
// examples/mnist's models, layer for layer.
struct LeNet : nn::Module {
  LeNet() : nn::Module("LeNet") {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(1, 10, 5));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(10, 20, 5));
    conv2_drop = register_module("conv2_drop", std::make_shared<nn::Dropout2d>(0.5));
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(320, 50));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(50, 10));
  }
  Tensor forward(Tensor x) override {
    x = max_pool2d(conv1->forward(x), {2}).relu();
    x = max_pool2d(conv2_drop->forward(conv2->forward(x)), {2}).relu();
    x = x.view({-1, 320});
    x = fc1->forward(x).relu();
    x = nn::functional::dropout(x, 0.5, is_training());
    return log_softmax(fc2->forward(x), 1);
  }
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::Dropout2d> conv2_drop;
  std::shared_ptr<nn::Linear> fc1, fc2;
};
std::shared_ptr<nn::Module> conv_block(int64_t in, int64_t out) {
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(in, out, 3, nn::Conv2dOptions{.padding = 1, .bias = false}),
      std::make_shared<nn::BatchNorm2d>(out), std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2));
}
std::shared_ptr<nn::Module> mnist_cnn() {
  return std::make_shared<nn::Sequential>(conv_block(1, 32), conv_block(32, 64), std::make_shared<nn::Flatten>(),
                                          std::make_shared<nn::Linear>(64 * 7 * 7, 128), std::make_shared<nn::ReLU>(),
                                          std::make_shared<nn::Dropout>(0.5), std::make_shared<nn::Linear>(128, 10));
}
}  // namespace

TEST(Onnx, ModelsMatchOnnxRuntime) {
  NABLA_NEEDS_ORT();
  manual_seed(1);
  std::vector<Case> cases;
  cases.push_back(make_case(
      "mnist_mlp",
      std::make_shared<nn::Sequential>(std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(784, 256),
                                       std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(256, 10)),
      {2, 1, 28, 28}));
  cases.back().options.external_data = true;  // the weights in mnist_mlp.onnx.data
  cases.push_back(make_case("mnist_lenet", std::make_shared<LeNet>(), {2, 1, 28, 28}));
  {
    auto cnn = mnist_cnn();
    Case c = make_case("mnist_cnn", cnn, {2, 1, 28, 28});
    warm_batch_norms(*cnn, c.batches[0]);
    cases.push_back(std::move(c));
    // The same network at a fixed batch size and the lowest opset, without folding.
    auto cnn13 = mnist_cnn();
    Case c13 = make_case("mnist_cnn_opset13", cnn13, {3, 1, 28, 28}, false);
    c13.options.opset_version = 13;
    c13.options.do_constant_folding = false;
    warm_batch_norms(*cnn13, c13.batches[0]);
    cases.push_back(std::move(c13));
  }
  {
    auto r = vision::resnet18({.num_classes = 10});
    Case c = make_case("resnet18", r, {1, 3, 32, 32});
    warm_batch_norms(*r, randn({2, 3, 32, 32}));
    cases.push_back(std::move(c));
  }
  cases.push_back(make_case("mobilenet_v2", vision::mobilenet_v2({.num_classes = 10}), {1, 3, 32, 32}));
  cases.push_back(make_case("efficientnet_b0", vision::efficientnet_b0({.num_classes = 10}), {1, 3, 32, 32}));
  cases.push_back(
      make_case("vit_tiny",
                std::make_shared<vision::VisionTransformer>(vision::VisionTransformerOptions{.image_size = 32,
                                                                                             .patch_size = 8,
                                                                                             .num_layers = 2,
                                                                                             .num_heads = 2,
                                                                                             .hidden_dim = 32,
                                                                                             .mlp_dim = 64,
                                                                                             .num_classes = 10}),
                {2, 3, 32, 32}, /*dynamic=*/false));  // its class token expands to x.size(0)
  auto [abs_err, rel_err] = run_cases(cases, "models");
  std::printf("[ onnx ] models: %zu, largest error vs ONNX Runtime %.3g (relative %.3g)\n", cases.size(), abs_err,
              rel_err);
}

// ---- a model over 2 GiB -------------------------------------------------------------------------
namespace {
using nabla::testing::kAddressSanitizer;

// MemAvailable of /proc/meminfo in bytes (0 where it cannot be read).
uint64_t available_memory() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}
}  // namespace

// Weights past protobuf's 2 GiB (a 2.08 GiB embedding table) go to <file>.data without being asked
// (external_data stays false), onnx.checker accepts the file by its path, and ONNX Runtime reads the
// rows at both ends of the table (the last one past byte 2^31 of the data file). Measured here (2
// cores): 22 to 37 s, most of it writing the file; 4.4 GB of memory at peak (nabla's table and the
// data buffer while it is written; ONNX Runtime maps the data file and reads the rows it gathers);
// 2.2 GB on disk. Skipped under AddressSanitizer (its shadow memory and slow copies make it minutes,
// and the sanitizer build runs the same code paths with the small models) and where the machine
// lacks the memory or the free disk.
TEST(Onnx, ModelOver2GiBWritesExternalDataAndMatchesOnnxRuntime) {
  NABLA_NEEDS_ORT();
  if (kAddressSanitizer)
    GTEST_SKIP() << "skipped under AddressSanitizer: 2 GiB of weights written and read there take minutes";
  const int64_t rows = 34000, cols = 16384;  // 34000 x 16384 float32: 2.08 GiB
  const uint64_t bytes = static_cast<uint64_t>(rows * cols) * 4;
  const uint64_t free_disk = fs::space(fs::temp_directory_path()).available, memory = available_memory();
  if (free_disk < bytes + (uint64_t(1) << 30))
    GTEST_SKIP() << "too little free disk in " << fs::temp_directory_path() << ": " << (free_disk >> 20)
                 << " MiB, the model needs " << ((bytes >> 20) + 1024) << " MiB";
  const uint64_t need = 2 * bytes + (uint64_t(3) << 29);  // the table, the data buffer, 1.5 GiB to spare
  if (memory < need)
    GTEST_SKIP() << "too little available memory: " << (memory >> 20) << " MiB, the test needs about " << (need >> 20)
                 << " MiB";
  ASSERT_GT(bytes, uint64_t(2) << 30);
  auto m = std::make_shared<Fn>([](Fn& self, Tensor ids) { return embedding(self.p("table"), ids) * 2 + 1; });
  {
    // Filled cheaply and recognisably: table[r][c] = r / 1024 + c / 2^20 (one broadcast add).
    autograd::NoGradGuard ng;
    m->register_parameter("table", arange(rows, dtype(kFloat32)).unsqueeze(1) / 1024.0 +
                                       arange(cols, dtype(kFloat32)).unsqueeze(0) / 1048576.0);
  }
  const std::vector<int64_t> first{0, rows - 1, 12345}, second{rows - 1, 1, 2, 0, 33999 - 7, 20000};
  Case c{"over_2gib",
         m,
         {tensor(first, dtype(kInt64)).reshape({1, 3}), tensor(second, dtype(kInt64)).reshape({2, 3})},
         dynamic_batch(),
         {},
         {}};
  c.over_2gib = true;
  c.expect_ops = {{"Gather", 1}};
  std::vector<Case> cases;
  cases.push_back(std::move(c));
  auto [abs_err, rel_err] = run_cases(cases, "big");
  std::printf("[ onnx ] a model of %.2f GiB of weights: largest error vs ONNX Runtime %.3g (relative %.3g)\n",
              static_cast<double>(bytes) / (1 << 30), abs_err, rel_err);
}

// ---- what the file holds --------------------------------------------------------------------------
TEST(Onnx, FoldsBatchNormAndNamesInitializers) {
  if (!have_onnx_checker()) {
    if (nabla::testing::ort_required()) FAIL() << "NABLA_REQUIRE_ORT=1 but /usr/bin/python3 cannot import onnx";
    GTEST_SKIP() << "/usr/bin/python3 cannot import onnx (apt-get install python3-onnx)";
  }
  manual_seed(2);
  auto cnn = mnist_cnn();
  fs::path p = fs::temp_directory_path() / ("nabla_onnx_fold_" + std::to_string(::getpid()) + ".onnx");
  onnx::ExportOptions o = dynamic_batch();
  o.input_names = {"image"};
  o.output_names = {"logits"};
  o.dynamic_axes = {{"image", {{0, "N"}}}};
  onnx::export_model(cnn, {randn({2, 1, 28, 28})}, p.string(), o);
  // Conv+BN folded (no BatchNormalization left), Dropout gone, names and the dynamic axis kept.
  std::string py =
      std::string(kPython) +
      " -c 'import onnx, sys\nm = onnx.load(sys.argv[1])\ng = m.graph\n"
      "ops = [n.op_type for n in g.node]\n"
      "assert ops == [\"Conv\", \"Relu\", \"MaxPool\", \"Conv\", \"Relu\", \"MaxPool\", \"Flatten\", \"Gemm\", "
      "\"Relu\", \"Gemm\"], ops\n"
      "assert m.opset_import[0].version == 17\n"
      "assert [i.name for i in g.input] == [\"image\"] and [o.name for o in g.output] == [\"logits\"]\n"
      "assert g.input[0].type.tensor_type.shape.dim[0].dim_param == \"N\"\n"
      "assert g.output[0].type.tensor_type.shape.dim[0].dim_param == \"N\"\n"
      "names = {i.name for i in g.initializer}\n"
      "assert \"3.weight\" in names and \"6.bias\" in names, names\n"
      "assert not any(\"running_mean\" in n for n in names), names' " +
      p.string();
  EXPECT_EQ(std::system(py.c_str()), 0);
  fs::remove(p);
}

// A float16 or bfloat16 model exports its weights bit for bit: a Linear whose weight holds every one
// of the 65,536 patterns of the dtype (NaN payloads, -0, subnormals, infinities) becomes an
// initializer of that ONNX element type with the same bytes, and onnx.checker accepts the graph.
TEST(Onnx, SixteenBitWeightsExportBitForBit) {
  if (!have_onnx_checker()) {
    if (nabla::testing::ort_required()) FAIL() << "NABLA_REQUIRE_ORT=1 but /usr/bin/python3 cannot import onnx";
    GTEST_SKIP() << "/usr/bin/python3 cannot import onnx (apt-get install python3-onnx)";
  }
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(i);
  for (DType dt : {kFloat16, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    nn::Linear lin(256, 256);
    lin.to(dt);
    {
      NoGradGuard no_grad;
      lin.weight.copy_(from_blob(bits.data(), {256, 256}, TensorOptions().dtype(dt)));
    }
    fs::path p = fs::temp_directory_path() /
                 ("nabla_onnx_bits_" + std::string(dtype_name(dt)) + "_" + std::to_string(::getpid()) + ".onnx");
    onnx::export_model(lin, {zeros({1, 256}, TensorOptions().dtype(dt))}, p.string());
    // ONNX element types: FLOAT16 10, BFLOAT16 16.
    std::string py = std::string(kPython) +
                     " -c 'import onnx, sys, struct\nm = onnx.load(sys.argv[1])\n"
                     "onnx.checker.check_model(m, full_check=True)\n"
                     "w = [i for i in m.graph.initializer if i.name == \"weight\"][0]\n"
                     "assert w.data_type == int(sys.argv[2]), w.data_type\n"
                     "assert list(w.dims) == [256, 256], w.dims\n"
                     "want = struct.pack(\"<65536H\", *range(65536))\n"
                     "assert w.raw_data == want, \"the weight bytes changed\"' " +
                     p.string() + (dt == kFloat16 ? " 10" : " 16");
    EXPECT_EQ(std::system(py.c_str()), 0) << py;
    fs::remove(p);
  }
}

// ---- errors -------------------------------------------------------------------------------------
namespace {
// linalg::inv: no trace hook, an autograd node (LinalgInvBackward). x: (N, 4)
struct Unmapped : nn::Module {
  Unmapped() : nn::Module("Unmapped") {}
  Tensor forward(Tensor x) override { return matmul(x, linalg::inv(matmul(x.transpose(0, 1), x) + eye(4))); }
};
struct InPlace : nn::Module {
  InPlace() : nn::Module("InPlace") {}
  Tensor forward(Tensor x) override {
    Tensor y = x * 2;
    y.mul_(3);
    return y + 1;
  }
};
}  // namespace

TEST(Onnx, OpWithoutMappingNamesOpAndModule) {
  auto body = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 4), std::make_shared<nn::ReLU>(),
                                               std::make_shared<Unmapped>(), std::make_shared<nn::Linear>(4, 2));
  auto net = std::make_shared<nn::Sequential>();
  net->push_back("features", body);
  try {
    (void)onnx::export_model_to_string(*net, {randn({2, 4})});
    FAIL() << "exported a model with linalg::inv";
  } catch (const NotImplemented& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("op 'linalg_inv'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("in module 'features.2'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("has no ONNX mapping"), std::string::npos) << msg;
  }
  EXPECT_TRUE(net->is_training());
  // An op the exporter traces but cannot map: batch norm with the batch's statistics.
  auto norm = std::make_shared<nn::Sequential>(std::make_shared<Fn>(
      [](Fn&, Tensor x) { return batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), /*training=*/true); }));
  try {
    (void)onnx::export_model_to_string(*norm, {randn({4, 3})});
    FAIL() << "exported a batch norm in training mode";
  } catch (const NotImplemented& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("op 'batch_norm' (in module '0') runs in training mode"), std::string::npos) << msg;
  }
  // Ops without a hook whose last step is a hooked one on their untraced result (a clone, a
  // squeeze) name themselves too, instead of exporting the example's result as a constant.
  for (auto [name, f] : std::vector<std::pair<const char*, std::function<Tensor(Fn&, Tensor)>>>{
           {"linalg_solve", [](Fn&, Tensor x) { return linalg::solve(x + eye(3) * 3, ones({3})); }},
           {"linalg_svdvals", [](Fn&, Tensor x) { return linalg::svdvals(x) * 2; }}}) {
    Fn m(f);
    try {
      (void)onnx::export_model_to_string(m, {randn({3, 3})});
      ADD_FAILURE() << "exported " << name;
    } catch (const NotImplemented& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("op '") + name + "'"), std::string::npos) << e.what();
    }
  }
  // An output computed where the exporter cannot see it (under NoGradGuard) is an error, not a constant.
  Fn hidden([](Fn&, Tensor x) {
    autograd::NoGradGuard ng;
    return linalg::inv(matmul(x.transpose(0, 1), x) + eye(4));
  });
  try {
    (void)onnx::export_model_to_string(hidden, {randn({2, 4})});
    FAIL() << "exported a constant output";
  } catch (const NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("does not depend on the inputs"), std::string::npos) << e.what();
  }
  // Also when the caller is in inference mode (recording is switched back on for the trace).
  {
    autograd::InferenceMode im;
    EXPECT_THROW((void)onnx::export_model_to_string(*net, {randn({2, 4})}), NotImplemented);
  }
  // Integer results (indices) carry no grad_fn: the ops that make them from traced tensors have
  // hooks, so one without a mapping fails instead of freezing the example's indices into a constant.
  Fn picked([](Fn&, Tensor x) { return std::get<1>(max(x.sum(), 0, false)).to(kFloat32); });
  try {
    (void)onnx::export_model_to_string(picked, {randn({2, 4})});
    FAIL() << "exported max along the dim of a 0-d tensor";
  } catch (const NotImplemented& e) {
    EXPECT_NE(
        std::string(e.what()).find("op 'max_dim' (in the top-level module) has no ONNX mapping: on a 0-dim tensor"),
        std::string::npos)
        << e.what();
  }
  // A tensor returned by an untraced op is an error too, not a constant.
  auto last = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 4), std::make_shared<Unmapped>());
  EXPECT_THROW((void)onnx::export_model_to_string(*last, {randn({2, 4})}), NotImplemented);
}

TEST(Onnx, RejectsInPlaceOpsAndBadOptions) {
  InPlace m;
  try {
    (void)onnx::export_model_to_string(m, {randn({2, 3})});
    FAIL() << "exported an in-place op";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("modified in place"), std::string::npos) << e.what();
  }
  auto lin = std::make_shared<nn::Linear>(3, 2);
  onnx::ExportOptions o;
  o.opset_version = 12;
  EXPECT_THROW((void)onnx::export_model_to_string(*lin, {randn({2, 3})}, o), ValueError);
  o.opset_version = 17;
  o.dynamic_axes = {{"nope", {{0, "batch"}}}};
  EXPECT_THROW((void)onnx::export_model_to_string(*lin, {randn({2, 3})}, o), ValueError);
  o.dynamic_axes = {{"input", {{0, "batch"}}}};
  // A reshape that bakes in the batch size cannot follow a dynamic batch axis.
  Fn bad([](Fn&, Tensor x) { return x.reshape({3, 2}); });
  EXPECT_THROW((void)onnx::export_model_to_string(bad, {randn({2, 3})}, o), NotImplemented);
  // scatter_add is ScatterElements' reduction='add', which opset 16 brought.
  Fn scatter_add_fn([](Fn&, Tensor x) { return x.scatter_add(1, (x > 100).to(kInt64), x); });
  onnx::ExportOptions o15;
  o15.opset_version = 15;
  try {
    (void)onnx::export_model_to_string(scatter_add_fn, {randn({2, 3})}, o15);
    FAIL() << "exported scatter_add at opset 15";
  } catch (const NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("op 'scatter_add' (in the top-level module) needs opset 16"),
              std::string::npos)
        << e.what();
  }
  o15.opset_version = 16;
  EXPECT_FALSE(onnx::export_model_to_string(scatter_add_fn, {randn({2, 3})}, o15).empty());
  // The file is written atomically (and only when the export succeeds).
  fs::path p = fs::temp_directory_path() / ("nabla_onnx_bad_" + std::to_string(::getpid()) + ".onnx");
  EXPECT_THROW(onnx::export_model(bad, {randn({2, 3})}, p.string(), o), NotImplemented);
  EXPECT_FALSE(fs::exists(p));
  onnx::export_model(lin, {randn({2, 3})}, p.string());
  EXPECT_GT(fs::file_size(p), 24u);
  fs::remove(p);
}
