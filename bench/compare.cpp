// The same work in nabla, libtorch (1.13, Debian's libtorch-dev) and OpenBLAS, in one process, with
// ratios: nabla's time / the reference's time (below 1 means nabla is faster).
// libtorch runs at 1 and at 2 threads and the better of the two is the reference. Contenders are
// timed interleaved, batch by batch, so a noisy moment on a shared machine hits them alike.
//
//   compare [--quick] [--only overhead|gemm|conv|optim|sequence|mlp|lenet|linalg] [--markdown FILE]
//
// scripts/bench.sh builds and runs this and writes bench/RESULTS.md.
#include <cblas.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "bench/torch_lenet.h"
#include "examples/mnist/models.h"
#include "nabla.h"

extern "C" void openblas_set_num_threads(int);

namespace nb = nabla;
namespace F = nabla::nn::functional;
using bench::fmt_time;

namespace {

struct Row {
  std::string section, name, nabla, ref, ref_name;
  double ratio;
};
std::vector<Row> rows;
bool quick = false;

void report(const std::string& section, const std::string& name, double t_nabla, double t_ref,
            const std::string& ref_name, const std::string& extra = "") {
  Row r{section, name, fmt_time(t_nabla), fmt_time(t_ref) + extra, ref_name, t_nabla / t_ref};
  std::printf("  %-44s nabla %10s   %-14s %10s   ratio %.2f\n", name.c_str(), r.nabla.c_str(), ref_name.c_str(),
              r.ref.c_str(), r.ratio);
  std::fflush(stdout);
  rows.push_back(r);
}

// nabla's time and the best of libtorch's at 1 and 2 threads, measured interleaved (see
// bench::interleaved): nabla, libtorch@1t, libtorch@2t, one batch each per round.
struct SideBySide {
  double nabla, torch;
  std::string which;
};
SideBySide side_by_side(const std::function<void()>& nb_fn, const std::function<void()>& t_fn, double batch = 0.05,
                        int rounds = 0) {
  if (rounds == 0) rounds = quick ? 3 : 7;
  std::vector<double> t = bench::interleaved(
      3,
      [](int c) {
        if (c > 0) torch::set_num_threads(c);
      },
      [&](int c) { c == 0 ? nb_fn() : t_fn(); }, batch, rounds);
  torch::set_num_threads(2);
  int best = t[1] <= t[2] ? 1 : 2;
  return {t[0], t[best], "libtorch@" + std::to_string(best) + "t"};
}

// ---- per-op overhead ----------------------------------------------------------------------------
void overhead() {
  std::printf("\nper-op overhead\n");
  std::string which;
  {
    nb::Tensor a = nb::ones({1}), b = nb::ones({1});
    torch::Tensor ta = torch::ones({1}), tb = torch::ones({1});
    SideBySide t = side_by_side([&] { nb::Tensor c = a + b; }, [&] { torch::Tensor c = ta + tb; });
    report("overhead", "add, 1 element", t.nabla, t.torch, t.which);
  }
  {
    nb::Tensor a = nb::ones({1}, nb::requires_grad()), b = nb::ones({1}, nb::requires_grad());
    torch::Tensor ta = torch::ones({1}, torch::requires_grad()), tb = torch::ones({1}, torch::requires_grad());
    SideBySide t = side_by_side([&] { nb::Tensor c = a + b; }, [&] { torch::Tensor c = ta + tb; });
    report("overhead", "add, 1 element, requires_grad", t.nabla, t.torch, t.which);
  }
  {
    // 10-op chain of 1-element tensors, forward and backward, per op.
    nb::Tensor x = nb::ones({1}, nb::requires_grad());
    torch::Tensor tx = torch::ones({1}, torch::requires_grad());
    SideBySide t = side_by_side(
        [&] {
          nb::Tensor y = x;
          for (int i = 0; i < 10; ++i) y = y * 1.001;
          y.backward();
        },
        [&] {
          torch::Tensor y = tx;
          for (int i = 0; i < 10; ++i) y = y * 1.001;
          y.backward();
        });
    report("overhead", "forward+backward, 10-op chain, per op", t.nabla / 10, t.torch / 10, t.which);
  }
  {
    nb::Tensor a = nb::randn({64, 64}), b = nb::randn({64, 64});
    torch::Tensor ta = torch::randn({64, 64}), tb = torch::randn({64, 64});
    SideBySide t = side_by_side([&] { nb::Tensor c = nb::mm(a, b); }, [&] { torch::Tensor c = torch::mm(ta, tb); });
    report("overhead", "matmul 64x64", t.nabla, t.torch, t.which);
  }
}

// ---- SGEMM vs OpenBLAS --------------------------------------------------------------------------
void gemm() {
  std::printf("\nSGEMM, both cores (GFLOP/s in parentheses)\n");
  nb::set_num_threads(2);
  openblas_set_num_threads(2);
  for (int64_t n : {64, 128, 256, 512, 1024, 2048}) {
    if (quick && n > 1024) continue;
    nb::Tensor a = nb::randn({n, n}), b = nb::randn({n, n});
    nb::Tensor c = nb::empty({n, n});
    double flops = 2.0 * n * n * n;
    double batch = n >= 1024 ? 0.3 : 0.05;
    std::vector<float> A(n * n, 1.0f), B(n * n, 0.5f), C(n * n);
    std::vector<double> t = bench::interleaved(
        2, [](int) {},
        [&](int which) {
          if (which == 0) c = nb::mm(a, b);
          else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f,
                        C.data(), n);
        },
        batch, quick ? 3 : 5);
    double tn = t[0], tb = t[1];
    char extra[64];
    std::snprintf(extra, sizeof(extra), " (%.0f vs %.0f)", flops / tn / 1e9, flops / tb / 1e9);
    report("gemm", "sgemm " + std::to_string(n) + "^3" + extra, tn, tb, "OpenBLAS");
  }
}

// ---- conv2d forward + backward ------------------------------------------------------------------
void conv() {
  std::printf("\nconv2d forward+backward (input, weight and bias gradients), batch 64\n");
  struct Shape {
    const char* name;
    int64_t c, h, o, k, pad;
  };
  std::string which;
  for (Shape s :
       {Shape{"lenet conv1 1->10 5x5 28x28", 1, 28, 10, 5, 0}, Shape{"lenet conv2 10->20 5x5 12x12", 10, 12, 20, 5, 0},
        Shape{"cnn conv1 1->32 3x3 28x28 pad1", 1, 28, 32, 3, 1},
        Shape{"cnn conv2 32->64 3x3 14x14 pad1", 32, 14, 64, 3, 1}}) {
    nb::Tensor x = nb::randn({64, s.c, s.h, s.h}, nb::requires_grad());
    nb::Tensor w = nb::randn({s.o, s.c, s.k, s.k}, nb::requires_grad()), b = nb::randn({s.o}, nb::requires_grad());
    torch::Tensor tx = torch::randn({64, s.c, s.h, s.h}, torch::requires_grad());
    torch::Tensor tw = torch::randn({s.o, s.c, s.k, s.k}, torch::requires_grad()),
                  tb = torch::randn({s.o}, torch::requires_grad());
    SideBySide t = side_by_side(
        [&] {
          nb::Tensor y = nb::conv2d(x, w, b, 1, s.pad);
          y.sum().backward();
        },
        [&] {
          torch::Tensor y = torch::conv2d(tx, tw, tb, 1, s.pad);
          y.sum().backward();
        });
    report("conv", s.name, t.nabla, t.torch, t.which);
  }
}

// ---- training epochs with preloaded data --------------------------------------------------------
constexpr int64_t kTrain = 60000;

// Both sides use their framework's own modules, optimizer and loss, as a user would: the same
// models (LeNet is the mnist example's on the nabla side, its libtorch twin in torch_lenet.h).
nb::optim::SGD nb_sgd(std::vector<nb::Tensor> params, double lr, double momentum) {
  nb::optim::SGDOptions o;
  o.lr = lr;
  o.momentum = momentum;
  return nb::optim::SGD(std::move(params), o);
}

void mlp() {
  std::printf("\nMLP 784-256-10 epoch, batch 64, SGD lr 0.01 momentum 0.9, data preloaded\n");
  int64_t n = quick ? 12800 : kTrain, bs = 64;
  nb::manual_seed(1);
  nb::Tensor X = nb::rand({n, 784}), Y = nb::randint(0, 10, {n});
  auto nb_net =
      std::make_shared<nb::nn::Sequential>(std::make_shared<nb::nn::Linear>(784, 256), std::make_shared<nb::nn::ReLU>(),
                                           std::make_shared<nb::nn::Linear>(256, 10));
  nb::optim::SGD opt = nb_sgd(nb_net->parameters(), 0.01, 0.9);
  auto nb_epoch = [&] {
    for (int64_t i = 0; i + bs <= n; i += bs) {
      nb::Tensor x = X.narrow(0, i, bs), y = Y.narrow(0, i, bs);
      nb::Tensor loss = F::nll_loss(nb::log_softmax(nb_net->forward(x), 1), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
  };
  torch::manual_seed(1);
  torch::Tensor tX = torch::rand({n, 784}), tY = torch::randint(0, 10, {n});
  torch::nn::Sequential net(torch::nn::Linear(784, 256), torch::nn::ReLU(), torch::nn::Linear(256, 10));
  torch::optim::SGD topt(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  auto t_epoch = [&] {
    for (int64_t i = 0; i + bs <= n; i += bs) {
      torch::Tensor x = tX.narrow(0, i, bs), y = tY.narrow(0, i, bs);
      torch::Tensor loss = torch::nll_loss(torch::log_softmax(net->forward(x), 1), y);
      topt.zero_grad();
      loss.backward();
      topt.step();
    }
  };
  SideBySide t = side_by_side(nb_epoch, t_epoch, 0, quick ? 1 : 3);
  report("epoch", quick ? "MLP epoch (12,800 images)" : "MLP epoch (60,000 images)", t.nabla, t.torch, t.which);
}

void lenet() {
  std::printf("\nlenet epoch (libtorch's MNIST example recipe: batch 64, SGD lr 0.01 momentum 0.5), data preloaded\n");
  int64_t n = quick ? 6400 : kTrain, bs = 64;
  nb::manual_seed(1);
  nb::Tensor X = nb::rand({n, 1, 28, 28}), Y = nb::randint(0, 10, {n});
  auto nb_model = mnist::make_model("lenet").module;  // the mnist example's LeNet module
  nb_model->train();
  nb::optim::SGD opt = nb_sgd(nb_model->parameters(), 0.01, 0.5);
  auto nb_epoch = [&] {
    for (int64_t i = 0; i + bs <= n; i += bs) {
      nb::Tensor x = X.narrow(0, i, bs), y = Y.narrow(0, i, bs);
      opt.zero_grad();
      nb::Tensor loss = F::nll_loss(nb_model->forward(x), y);
      loss.backward();
      opt.step();
    }
  };
  torch::manual_seed(1);
  torch::Tensor tX = torch::rand({n, 1, 28, 28}), tY = torch::randint(0, 10, {n});
  auto model = std::make_shared<TorchLeNet>();
  torch::optim::SGD topt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));
  auto t_epoch = [&] {
    model->train();
    for (int64_t i = 0; i + bs <= n; i += bs) {
      torch::Tensor x = tX.narrow(0, i, bs), y = tY.narrow(0, i, bs);
      topt.zero_grad();
      torch::Tensor loss = torch::nll_loss(model->forward(x), y);
      loss.backward();
      topt.step();
    }
  };
  SideBySide t = side_by_side(nb_epoch, t_epoch, 0, quick ? 1 : 3);
  report("epoch", quick ? "lenet epoch (6,400 images)" : "lenet epoch (60,000 images)", t.nabla, t.torch, t.which);
}

// ---- optimizer steps --------------------------------------------------------------------------
// One step of each optimizer over the parameters of the mnist example's CNN (conv 1->32, conv
// 32->64, fc 3136->128, fc 128->10 and batch norms), with fixed gradients: nabla's fused updates
// against libtorch's. libtorch's C++ API has no Adadelta.
void optim() {
  auto model = mnist::make_model("cnn").module;
  std::vector<nb::Tensor> nps = model->parameters();
  std::vector<torch::Tensor> tps;
  int64_t numel = 0;
  nb::manual_seed(2);
  torch::manual_seed(2);
  for (nb::Tensor& p : nps) {
    std::vector<int64_t> shape(p.sizes().begin(), p.sizes().end());
    p.mutable_grad() = nb::randn(p.sizes()) * 0.01;
    tps.push_back(torch::randn(shape).requires_grad_());
    tps.back().mutable_grad() = torch::randn(shape) * 0.01;
    numel += p.numel();
  }
  std::printf("\noptimizer step over the MNIST CNN's %zu parameters (%lld values)\n", nps.size(),
              static_cast<long long>(numel));
  auto row = [&](const char* name, nb::optim::Optimizer& o, torch::optim::Optimizer& t) {
    SideBySide r = side_by_side([&] { o.step(); }, [&] { t.step(); });
    report("optim", name, r.nabla, r.torch, r.which);
  };
  {
    nb::optim::SGD o = nb_sgd(nps, 0.01, 0.9);
    torch::optim::SGD t(tps, torch::optim::SGDOptions(0.01).momentum(0.9));
    row("SGD, momentum 0.9", o, t);
  }
  {
    nb::optim::Adam o(nps, nb::optim::AdamOptions{.lr = 1e-3});
    torch::optim::Adam t(tps, torch::optim::AdamOptions(1e-3));
    row("Adam", o, t);
  }
  {
    nb::optim::AdamW o(nps, nb::optim::AdamWOptions{.lr = 1e-3, .amsgrad = true});
    torch::optim::AdamW t(tps, torch::optim::AdamWOptions(1e-3).amsgrad(true));
    row("AdamW, amsgrad", o, t);
  }
  {
    nb::optim::RMSprop o(nps, nb::optim::RMSpropOptions{.lr = 1e-3, .momentum = 0.9, .centered = true});
    torch::optim::RMSprop t(tps, torch::optim::RMSpropOptions(1e-3).momentum(0.9).centered(true));
    row("RMSprop, centered, momentum 0.9", o, t);
  }
  {
    nb::optim::Adagrad o(nps, nb::optim::AdagradOptions{.lr = 1e-2});
    torch::optim::Adagrad t(tps, torch::optim::AdagradOptions(1e-2));
    row("Adagrad", o, t);
  }
}

// ---- sequence models ---------------------------------------------------------------------------
// One training step (forward, mean-square loss, backward, SGD) of recurrent and attention layers,
// nabla's modules against libtorch's with the same sizes: a small language-model body (sequence 35,
// batch 20, 64 features in, 128 hidden) and a Transformer encoder layer (sequence 32, batch 16,
// d_model 128, 4 heads, feed-forward 512, dropout 0), inputs (L, N, E) on both sides.
void sequence() {
  std::printf("\nrecurrent and attention layers, one training step (forward, backward, SGD)\n");
  const int64_t L = 35, N = 20, E = 64, H = 128;
  nb::manual_seed(3);
  torch::manual_seed(3);
  nb::Tensor x = nb::randn({L, N, E});
  torch::Tensor tx = torch::randn({L, N, E});
  auto step = [](auto& opt, auto&& loss) {
    opt.zero_grad();
    loss.backward();
    opt.step();
  };
  auto row = [&](const char* name, const std::function<void()>& nb_fn, const std::function<void()>& t_fn) {
    SideBySide t = side_by_side(nb_fn, t_fn);
    report("sequence", name, t.nabla, t.torch, t.which);
  };
  {
    nb::nn::LSTM m(E, H, {.num_layers = 2});
    nb::optim::SGD opt = nb_sgd(m.parameters(), 0.01, 0);
    torch::nn::LSTM tm(torch::nn::LSTMOptions(E, H).num_layers(2));
    torch::optim::SGD topt(tm->parameters(), torch::optim::SGDOptions(0.01));
    row(
        "LSTM 2 layers 64->128, seq 35, batch 20", [&] { step(opt, m.forward(x).square().mean()); },
        [&] { step(topt, std::get<0>(tm->forward(tx)).square().mean()); });
  }
  {
    nb::nn::GRU m(E, H);
    nb::optim::SGD opt = nb_sgd(m.parameters(), 0.01, 0);
    torch::nn::GRU tm(torch::nn::GRUOptions(E, H));
    torch::optim::SGD topt(tm->parameters(), torch::optim::SGDOptions(0.01));
    row(
        "GRU 64->128, seq 35, batch 20", [&] { step(opt, m.forward(x).square().mean()); },
        [&] { step(topt, std::get<0>(tm->forward(tx)).square().mean()); });
  }
  {
    const int64_t S = 32, B = 16, D = 128;
    nb::Tensor src = nb::randn({S, B, D});
    torch::Tensor tsrc = torch::randn({S, B, D});
    nb::nn::TransformerEncoderLayer m(D, 4, {.dim_feedforward = 512, .dropout = 0});
    nb::optim::SGD opt = nb_sgd(m.parameters(), 0.01, 0);
    torch::nn::TransformerEncoderLayer tm(
        torch::nn::TransformerEncoderLayerOptions(D, 4).dim_feedforward(512).dropout(0));
    torch::optim::SGD topt(tm->parameters(), torch::optim::SGDOptions(0.01));
    row(
        "Transformer encoder layer d128 4 heads, seq 32, batch 16", [&] { step(opt, m.forward(src).square().mean()); },
        [&] { step(topt, tm->forward(tsrc).square().mean()); });
  }
}

// ---- linear algebra: LAPACK behind both (float32, both cores) -----------------------------------
// inv, solve (one right-hand side), cholesky and svd (full_matrices=false) of well-conditioned n x n
// matrices; nabla calls LAPACK (core/linalg/), libtorch its own LAPACK bindings.
void linalg() {
  std::printf("\nlinear algebra, float32 (torch.linalg)\n");
  openblas_set_num_threads(2);
  for (int64_t n : {64, 256, 1024}) {
    nb::Tensor x = nb::randn({n, n});
    nb::Tensor a = x + nb::eye(n) * static_cast<double>(n);
    nb::Tensor spd = nb::matmul(x, x.mT()) + nb::eye(n) * static_cast<double>(n);
    nb::Tensor b = nb::randn({n, 1});
    auto to_torch = [](const nb::Tensor& t) {
      nb::Tensor c = t.contiguous();
      return torch::from_blob(c.data_ptr<float>(), {c.sizes()[0], c.sizes()[1]}, torch::kFloat32).clone();
    };
    torch::Tensor ta = to_torch(a), tspd = to_torch(spd), tb = to_torch(b);
    const double batch = n >= 1024 ? 0.3 : 0.05;
    const int rounds = n >= 1024 ? 3 : 0;
    const std::string sz = " " + std::to_string(n) + "x" + std::to_string(n);
    SideBySide t = side_by_side([&] { nb::Tensor r = nb::linalg::inv(a); },
                                [&] { torch::Tensor r = torch::linalg::inv(ta); }, batch, rounds);
    report("linalg", "inv" + sz, t.nabla, t.torch, t.which);
    t = side_by_side([&] { nb::Tensor r = nb::linalg::solve(a, b); },
                     [&] { torch::Tensor r = torch::linalg::solve(ta, tb, true); }, batch, rounds);
    report("linalg", "solve" + sz + ", 1 rhs", t.nabla, t.torch, t.which);
    t = side_by_side([&] { nb::Tensor r = nb::linalg::cholesky(spd); },
                     [&] { torch::Tensor r = torch::linalg::cholesky(tspd); }, batch, rounds);
    report("linalg", "cholesky" + sz, t.nabla, t.torch, t.which);
    t = side_by_side([&] { auto r = nb::linalg::svd(a, false); },
                     [&] { auto r = torch::linalg::svd(ta, false, c10::nullopt); }, batch, rounds);
    report("linalg", "svd" + sz + " (reduced)", t.nabla, t.torch, t.which);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string only, markdown;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!std::strcmp(argv[i], "--markdown") && i + 1 < argc) markdown = argv[++i];
    else {
      std::printf(
          "usage: compare [--quick] [--only overhead|gemm|conv|optim|sequence|mlp|lenet|linalg] [--markdown FILE]\n\n"
          "Runs the same work in nabla, libtorch and OpenBLAS in one process and prints\n"
          "nabla's time / the reference's time (below 1: nabla is faster).\n");
      return std::strcmp(argv[i], "--help") && std::strcmp(argv[i], "-h") ? 2 : 0;
    }
  }
  nb::set_num_threads(2);
  std::map<std::string, void (*)()> parts{{"overhead", overhead}, {"gemm", gemm}, {"conv", conv},   {"optim", optim},
                                          {"sequence", sequence}, {"mlp", mlp},   {"lenet", lenet}, {"linalg", linalg}};
  for (const char* p : {"overhead", "gemm", "conv", "optim", "sequence", "mlp", "lenet", "linalg"})
    if (only.empty() || only == p) parts[p]();
  if (!markdown.empty()) {
    std::ofstream md(markdown);
    md << "| section | benchmark | nabla | reference | reference time | ratio (nabla / reference) |\n";
    md << "|---|---|---:|---|---:|---:|\n";
    for (const Row& r : rows) {
      char ratio[32];
      std::snprintf(ratio, sizeof(ratio), "%.2f", r.ratio);
      md << "| " << r.section << " | " << r.name << " | " << r.nabla << " | " << r.ref_name << " | " << r.ref << " | "
         << ratio << " |\n";
    }
  }
  return 0;
}
