// Recurrent layers: values against a float64 reference written with plain loops and against
// libtorch 1.13, PyTorch's parameter names and shapes, gradients, learning, errors and dropout.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <tuple>

#include "nabla.h"
#include "tests/common/value_helpers.h"

using namespace nabla;
using namespace nabla::testing;

namespace {

using Vec = std::vector<double>;
using Mode = nn::RNNBase::Mode;

double sigm(double v) { return 1 / (1 + std::exp(-v)); }

// y = W v + b with W (rows, cols) row-major; b may be empty.
Vec affine(const Vec& W, const Vec& b, const Vec& v) {
  const size_t cols = v.size(), rows = W.size() / cols;
  Vec y(rows);
  for (size_t r = 0; r < rows; ++r) {
    double s = b.empty() ? 0 : b[r];
    for (size_t k = 0; k < cols; ++k) s += W[r * cols + k] * v[k];
    y[r] = s;
  }
  return y;
}

// The parameters of one layer and direction (or a cell) as plain vectors.
struct RefWeights {
  Vec w_ih, w_hh, b_ih, b_hh, w_hr;
};
Vec vals(const Tensor& t) { return t.defined() ? values(t) : Vec{}; }
RefWeights ref_weights(const nn::RNNLayerWeights& w) {
  return {vals(w.weight_ih), vals(w.weight_hh), vals(w.bias_ih), vals(w.bias_hh), vals(w.weight_hr)};
}
RefWeights ref_weights(const nn::RNNCellBase& m) {
  return {vals(m.weight_ih), vals(m.weight_hh), vals(m.bias_ih), vals(m.bias_hh), {}};
}

// One step of one sample, the gate equations written out. h: (H_out), c: (H) (LSTM).
void ref_step(Mode mode, const RefWeights& w, const Vec& x, Vec& h, Vec& c) {
  Vec gi = affine(w.w_ih, w.b_ih, x), gh = affine(w.w_hh, w.b_hh, h);
  const size_t H = mode == Mode::lstm ? gi.size() / 4 : mode == Mode::gru ? gi.size() / 3 : gi.size();
  if (mode == Mode::rnn_tanh || mode == Mode::rnn_relu) {
    for (size_t j = 0; j < H; ++j) {
      double a = gi[j] + gh[j];
      h[j] = mode == Mode::rnn_tanh ? std::tanh(a) : std::max(a, 0.0);
    }
  } else if (mode == Mode::lstm) {
    Vec hh(H);
    for (size_t j = 0; j < H; ++j) {
      double i = sigm(gi[j] + gh[j]), f = sigm(gi[H + j] + gh[H + j]);
      double g = std::tanh(gi[2 * H + j] + gh[2 * H + j]), o = sigm(gi[3 * H + j] + gh[3 * H + j]);
      c[j] = f * c[j] + i * g;
      hh[j] = o * std::tanh(c[j]);
    }
    h = w.w_hr.empty() ? hh : affine(w.w_hr, {}, hh);
  } else {
    for (size_t j = 0; j < H; ++j) {
      double r = sigm(gi[j] + gh[j]), z = sigm(gi[H + j] + gh[H + j]);
      double n = std::tanh(gi[2 * H + j] + r * gh[2 * H + j]);
      h[j] = (1 - z) * n + z * h[j];
    }
  }
}

struct RefResult {
  Vec out, h_n, c_n;  // out (L, N, D * H_out), h_n (D * layers, N, H_out), c_n (D * layers, N, H)
};

// The whole module on x (L, N, H_in) with h0 (D * layers, N, H_out) and c0 (D * layers, N, H),
// zeros when empty. Loops over layers, directions, samples and steps.
RefResult ref_forward(const nn::RNNBase& m, const Vec& x, int64_t L, int64_t N, Vec h0, Vec c0) {
  const int64_t D = m.num_directions(), H = m.hidden_size, Ho = m.output_hidden_size();
  if (h0.empty()) h0.assign(static_cast<size_t>(D * m.num_layers * N * Ho), 0.0);
  if (c0.empty()) c0.assign(static_cast<size_t>(D * m.num_layers * N * H), 0.0);
  RefResult r;
  Vec in = x;
  int64_t in_size = m.input_size;
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    Vec out(static_cast<size_t>(L * N * D * Ho));
    for (int64_t d = 0; d < D; ++d) {
      const int64_t k = layer * D + d;
      RefWeights w = ref_weights(m.weights[static_cast<size_t>(k)]);
      for (int64_t n = 0; n < N; ++n) {
        Vec h(h0.begin() + (k * N + n) * Ho, h0.begin() + (k * N + n + 1) * Ho);
        Vec c(c0.begin() + (k * N + n) * H, c0.begin() + (k * N + n + 1) * H);
        for (int64_t s = 0; s < L; ++s) {
          const int64_t t = d == 0 ? s : L - 1 - s;
          Vec xt(in.begin() + (t * N + n) * in_size, in.begin() + (t * N + n + 1) * in_size);
          ref_step(m.mode, w, xt, h, c);
          for (int64_t j = 0; j < Ho; ++j) out[static_cast<size_t>((t * N + n) * D * Ho + d * Ho + j)] = h[j];
        }
        r.h_n.insert(r.h_n.end(), h.begin(), h.end());
        r.c_n.insert(r.c_n.end(), c.begin(), c.end());
      }
    }
    in = out;
    in_size = D * Ho;
  }
  r.out = in;
  return r;
}

Tensor transpose01(const Vec& v, int64_t a, int64_t b, int64_t c) { return f64(v, {a, b, c}).transpose(0, 1); }

// Deterministic values for every parameter: the k-th parameter's element i is
// 0.5 * sin(0.1 * i + 0.3 * k + 1) (the formula of the libtorch program below).
void set_sine_parameters(nn::Module& m) {
  autograd::NoGradGuard ng;
  int k = 0;
  for (auto& kv : m.named_parameters()) {
    Tensor t = kv.second;
    std::vector<double> v(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5 * std::sin(0.1 * static_cast<double>(i) + 0.3 * k + 1);
    t.copy_(f64(v, shape_of(t)).view(t.sizes()));
    ++k;
  }
}
Tensor sine_fill(std::vector<int64_t> shape, const std::function<double(double)>& f) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  Vec v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = f(static_cast<double>(i));
  return f64(v, shape);
}
// x[i] = cos(0.37 i), h0[i] = 0.5 sin(0.23 i + 0.5), c0[i] = 0.5 cos(0.19 i), row-major.
Tensor X(std::vector<int64_t> s) {
  return sine_fill(s, [](double i) { return std::cos(0.37 * i); });
}
Tensor H0(std::vector<int64_t> s) {
  return sine_fill(s, [](double i) { return 0.5 * std::sin(0.23 * i + 0.5); });
}
Tensor C0(std::vector<int64_t> s) {
  return sine_fill(s, [](double i) { return 0.5 * std::cos(0.19 * i); });
}

std::vector<std::pair<std::string, std::vector<int64_t>>> keys_and_shapes(const nn::Module& m) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (auto& kv : m.state_dict()) out.push_back({kv.first, shape_of(kv.second)});
  return out;
}

}  // namespace

// ---- (1) against the loop reference ---------------------------------------------------------------

TEST(NnRNN, SequenceModulesMatchLoopReference) {
  manual_seed(3);
  struct Case {
    std::string what;
    std::function<std::shared_ptr<nn::RNNBase>()> make;
    bool with_state;
  };
  std::vector<Case> cases = {
      {"RNN tanh", [] { return std::make_shared<nn::RNN>(3, 4); }, true},
      {"RNN relu 2 layers bidirectional",
       [] {
         return std::make_shared<nn::RNN>(
             3, 4, nn::RNNOptions{.num_layers = 2, .nonlinearity = "relu", .bidirectional = true});
       },
       true},
      {"RNN no bias batch_first",
       [] { return std::make_shared<nn::RNN>(2, 3, nn::RNNOptions{.bias = false, .batch_first = true}); }, false},
      {"LSTM", [] { return std::make_shared<nn::LSTM>(3, 5); }, false},
      {"LSTM 2 layers bidirectional proj_size",
       [] {
         return std::make_shared<nn::LSTM>(3, 5,
                                           nn::LSTMOptions{.num_layers = 2, .bidirectional = true, .proj_size = 2});
       },
       true},
      {"LSTM batch_first no bias",
       [] { return std::make_shared<nn::LSTM>(4, 3, nn::LSTMOptions{.bias = false, .batch_first = true}); }, true},
      {"GRU", [] { return std::make_shared<nn::GRU>(3, 4); }, true},
      {"GRU 2 layers bidirectional batch_first",
       [] {
         return std::make_shared<nn::GRU>(3, 4,
                                          nn::GRUOptions{.num_layers = 2, .batch_first = true, .bidirectional = true});
       },
       false},
  };
  const int64_t L = 4, N = 3;
  for (const Case& cs : cases) {
    auto m = cs.make();
    m->to(kFloat64);
    const int64_t D = m->num_directions(), Ho = m->output_hidden_size(), S = D * m->num_layers;
    Vec x = lcg_values(static_cast<size_t>(L * N * m->input_size), 11);
    Vec h0 = cs.with_state ? lcg_values(static_cast<size_t>(S * N * Ho), 12) : Vec{};
    Vec c0 = cs.with_state ? lcg_values(static_cast<size_t>(S * N * m->hidden_size), 13) : Vec{};
    RefResult want = ref_forward(*m, x, L, N, h0, c0);
    // The module's input: (L, N, H_in), or (N, L, H_in) with batch_first.
    Tensor xt = f64(x, {L, N, m->input_size});
    if (m->batch_first) xt = xt.transpose(0, 1).contiguous();
    Tensor h0t = cs.with_state ? f64(h0, {S, N, Ho}) : Tensor();
    Tensor c0t = cs.with_state ? f64(c0, {S, N, m->hidden_size}) : Tensor();
    Tensor out, h_n, c_n;
    if (auto* lstm = dynamic_cast<nn::LSTM*>(m.get()))
      std::tie(out, h_n, c_n) = [&] {
        auto r = lstm->forward_with_state(xt, {h0t, c0t});
        return std::tuple{r.output, r.h_n, r.c_n};
      }();
    else if (auto* gru = dynamic_cast<nn::GRU*>(m.get()))
      std::tie(out, h_n) = [&] {
        auto r = gru->forward_with_state(xt, h0t);
        return std::tuple{r.output, r.h_n};
      }();
    else
      std::tie(out, h_n) = [&] {
        auto r = dynamic_cast<nn::RNN&>(*m).forward_with_state(xt, h0t);
        return std::tuple{r.output, r.h_n};
      }();
    Tensor want_out = m->batch_first ? transpose01(want.out, L, N, D * Ho) : f64(want.out, {L, N, D * Ho});
    EXPECT_TRUE(tensor_near(out, want_out, 1e-12, 1e-12)) << cs.what << " output";
    EXPECT_TRUE(tensor_is(h_n, {S, N, Ho}, want.h_n, 1e-12, 1e-12)) << cs.what << " h_n";
    if (m->mode == Mode::lstm)
      EXPECT_TRUE(tensor_is(c_n, {S, N, m->hidden_size}, want.c_n, 1e-12, 1e-12)) << cs.what << " c_n";
    // forward(x) (and so (*m)(x)) is the output sequence.
    EXPECT_TRUE(tensor_near((*m)(xt), (cs.with_state ? m->forward(xt) : out), 0, 0)) << cs.what;
  }
}

TEST(NnRNN, UnbatchedInputIsOneSequence) {
  manual_seed(4);
  nn::LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true, .proj_size = 2});
  lstm.to(kFloat64);
  const int64_t L = 5;
  Vec x = lcg_values(L * 3, 21), h0 = lcg_values(4 * 2, 22), c0 = lcg_values(4 * 4, 23);
  RefResult want = ref_forward(lstm, x, L, 1, h0, c0);
  auto [out, h_n, c_n] = lstm.forward_with_state(f64(x, {L, 3}), {f64(h0, {4, 2}), f64(c0, {4, 4})});
  EXPECT_TRUE(tensor_is(out, {L, 4}, want.out, 1e-12, 1e-12));
  EXPECT_TRUE(tensor_is(h_n, {4, 2}, want.h_n, 1e-12, 1e-12));
  EXPECT_TRUE(tensor_is(c_n, {4, 4}, want.c_n, 1e-12, 1e-12));
  // batch_first does not apply to unbatched input
  nn::GRU gru(3, 2, {.batch_first = true});
  gru.to(kFloat64);
  RefResult wg = ref_forward(gru, x, L, 1, {}, {});
  auto [gout, gh] = gru.forward_with_state(f64(x, {L, 3}));
  EXPECT_TRUE(tensor_is(gout, {L, 2}, wg.out, 1e-12, 1e-12));
  EXPECT_TRUE(tensor_is(gh, {1, 2}, wg.h_n, 1e-12, 1e-12));
}

TEST(NnRNN, EmptyBatchGivesEmptyOutputs) {
  nn::LSTM lstm(2, 3, {.num_layers = 2, .bidirectional = true});
  auto [out, h_n, c_n] = lstm.forward_with_state(randn({4, 0, 2}));
  EXPECT_EQ(shape_of(out), (std::vector<int64_t>{4, 0, 6}));
  EXPECT_EQ(shape_of(h_n), (std::vector<int64_t>{4, 0, 3}));
  EXPECT_EQ(shape_of(c_n), (std::vector<int64_t>{4, 0, 3}));
  nn::GRUCell cell(2, 3);
  EXPECT_EQ(shape_of(cell(randn({0, 2}))), (std::vector<int64_t>{0, 3}));
}

TEST(NnRNN, CellsMatchLoopReference) {
  manual_seed(5);
  const int64_t N = 3, In = 4, Hd = 5;
  Vec x = lcg_values(N * In, 31), h = lcg_values(N * Hd, 32), c = lcg_values(N * Hd, 33);
  auto per_sample = [&](Mode mode, const RefWeights& w, bool with_state, Vec* c_out) {
    Vec hs, cs;
    for (int64_t n = 0; n < N; ++n) {
      Vec xn(x.begin() + n * In, x.begin() + (n + 1) * In);
      Vec hn = with_state ? Vec(h.begin() + n * Hd, h.begin() + (n + 1) * Hd) : Vec(Hd, 0.0);
      Vec cn = with_state ? Vec(c.begin() + n * Hd, c.begin() + (n + 1) * Hd) : Vec(Hd, 0.0);
      ref_step(mode, w, xn, hn, cn);
      hs.insert(hs.end(), hn.begin(), hn.end());
      cs.insert(cs.end(), cn.begin(), cn.end());
    }
    if (c_out) *c_out = cs;
    return hs;
  };
  Tensor xt = f64(x, {N, In}), ht = f64(h, {N, Hd}), ct = f64(c, {N, Hd});
  for (bool bias : {true, false}) {
    nn::RNNCell tanh_cell(In, Hd, {.bias = bias});
    nn::RNNCell relu_cell(In, Hd, {.bias = bias, .nonlinearity = "relu"});
    nn::GRUCell gru(In, Hd, {.bias = bias});
    nn::LSTMCell lstm(In, Hd, {.bias = bias});
    for (nn::Module* m : std::initializer_list<nn::Module*>{&tanh_cell, &relu_cell, &gru, &lstm}) m->to(kFloat64);
    EXPECT_TRUE(tensor_is(tanh_cell(xt, ht), {N, Hd}, per_sample(Mode::rnn_tanh, ref_weights(tanh_cell), true, nullptr),
                          1e-12, 1e-12));
    EXPECT_TRUE(tensor_is(relu_cell(xt, ht), {N, Hd}, per_sample(Mode::rnn_relu, ref_weights(relu_cell), true, nullptr),
                          1e-12, 1e-12));
    EXPECT_TRUE(tensor_is(tanh_cell(xt), {N, Hd}, per_sample(Mode::rnn_tanh, ref_weights(tanh_cell), false, nullptr),
                          1e-12, 1e-12));
    EXPECT_TRUE(tensor_is(gru(xt, ht), {N, Hd}, per_sample(Mode::gru, ref_weights(gru), true, nullptr), 1e-12, 1e-12));
    EXPECT_TRUE(tensor_is(gru(xt), {N, Hd}, per_sample(Mode::gru, ref_weights(gru), false, nullptr), 1e-12, 1e-12));
    Vec want_c;
    Vec want_h = per_sample(Mode::lstm, ref_weights(lstm), true, &want_c);
    nn::LSTMState s = lstm.forward_with_state(xt, {ht, ct});
    EXPECT_TRUE(tensor_is(s.h, {N, Hd}, want_h, 1e-12, 1e-12));
    EXPECT_TRUE(tensor_is(s.c, {N, Hd}, want_c, 1e-12, 1e-12));
    EXPECT_TRUE(tensor_is(lstm(xt), {N, Hd}, per_sample(Mode::lstm, ref_weights(lstm), false, nullptr), 1e-12, 1e-12));
    // unbatched: one sample, the state without a batch dim
    nn::LSTMState s1 = lstm.forward_with_state(xt[1], {ht[1], ct[1]});
    EXPECT_TRUE(tensor_near(s1.h, s.h[1], 1e-14, 0));
    EXPECT_TRUE(tensor_near(s1.c, s.c[1], 1e-14, 0));
    EXPECT_TRUE(tensor_near(gru(xt[2], ht[2]), gru(xt, ht)[2], 1e-14, 0));
    EXPECT_TRUE(tensor_near(tanh_cell(xt[0]), tanh_cell(xt)[0], 1e-14, 0));
  }
}

// ---- (2) against libtorch 1.13 ----------------------------------------------------------------------
// A throwaway program built against libtorch 1.13 (torch::nn::LSTM/GRU/RNN/...Cell in float64) set
// the k-th parameter (named_parameters order) to 0.5 * sin(0.1 * i + 0.3 * k + 1) at flat index i,
// and the inputs to x[i] = cos(0.37 i), h0[i] = 0.5 sin(0.23 i + 0.5), c0[i] = 0.5 cos(0.19 i)
// (row-major), and printed these values.

TEST(NnRNN, LSTMMatchesLibtorch) {
  // LSTM(3, 4, proj_size=2, num_layers=2, bidirectional=True); x (3, 2, 3), h0 (4, 2, 2), c0 (4, 2, 4)
  nn::LSTM m(3, 4, {.num_layers = 2, .bidirectional = true, .proj_size = 2});
  m.to(kFloat64);
  set_sine_parameters(m);
  Tensor x = X({3, 2, 3}).requires_grad_(true);
  auto [out, h_n, c_n] = m.forward_with_state(x, {H0({4, 2, 2}), C0({4, 2, 4})});
  ASSERT_EQ(shape_of(out), (std::vector<int64_t>{3, 2, 4}));
  // clang-format off
  EXPECT_TRUE(values_near(values(out[0]), {
      0.145673869819, 0.0922525591244, 0.592569071121, 0.899056168083, 0.0929413845025, 0.0603801153575,
      0.612351490554, 0.930803353349
  }, 1e-10, 0));
  EXPECT_TRUE(values_near(values(out[2]), {
      0.0550973482545, 0.0357898724077, 0.235314734027, 0.353220796125, 0.0620589358992, 0.0401619112007,
      0.294303667062, 0.446358558062
  }, 1e-10, 0));
  EXPECT_TRUE(tensor_is(h_n[3], {2, 2}, {
      0.592569071121, 0.899056168083, 0.612351490554, 0.930803353349
  }, 1e-10, 0));
  EXPECT_TRUE(tensor_is(c_n[0], {2, 4}, {
      0.877145278099, 0.588052813793, 0.310583070127, 0.0852138014568, 0.852497023315, 0.28652245836,
      -0.152665131696, -0.437732227699
  }, 1e-10, 0));
  // loss = out.sum() + h_n.pow(2).sum() + c_n.sum() and some of its gradients
  Tensor loss = out.sum() + h_n.pow(2).sum() + c_n.sum();
  EXPECT_NEAR(loss.item<double>(), 15.8381738582, 1e-9);
  loss.backward();
  EXPECT_TRUE(values_near(values(x.grad()[1]), {
      0.154757975506, 0.151732549504, 0.147191062023, 0.170071279951, 0.161485093337, 0.15128540105
  }, 1e-10, 0));
  EXPECT_TRUE(values_near(values(m.layer_weights(0, 0).weight_ih.grad()[0]), {
      -0.23448081256, -0.227761327175, -0.190215414634
  }, 1e-10, 0));
  EXPECT_TRUE(values_near(values(m.layer_weights(1, 1).bias_hh.grad()), {
      1.91020476806, 1.9266652801, 1.79679936671, 1.60061906567, 0.717577160982, 0.828852770963,
      0.911198112271, 0.992027477975, 1.83802651602, 2.29518715291, 2.85229789243, 3.48779743905,
      0.725409438495, 0.975386486856, 1.20245182432, 1.37927396832
  }, 1e-10, 0));
  EXPECT_TRUE(values_near(values(m.layer_weights(0, 0).weight_hr.grad()), {
      0.0972779416897, 0.0248765011374, -0.0412160361835, -0.0900197842378, -0.171177160738, -0.170618691159,
      -0.156877574381, -0.138025229861
  }, 1e-10, 0));
  // clang-format on
}

TEST(NnRNN, GRUAndRNNMatchLibtorch) {
  {  // GRU(3, 5, num_layers=2, batch_first=True); x (2, 4, 3), no h0
    nn::GRU m(3, 5, {.num_layers = 2, .batch_first = true});
    m.to(kFloat64);
    set_sine_parameters(m);
    Tensor x = X({2, 4, 3}).requires_grad_(true);
    auto [out, h_n] = m.forward_with_state(x);
    // clang-format off
    EXPECT_TRUE(values_near(values(out[1][3]), {
        -0.548179696928, -0.724802381273, -0.901892136761, -0.8925506989, -0.403370665149
    }, 1e-10, 0));
    EXPECT_TRUE(tensor_is(h_n, {2, 2, 5}, {
        0.493948276321, 0.35534254537, 0.206354038378, 0.0723495390737, -0.0174752198802, -0.0125625886142,
        -0.180685510979, -0.344252857644, -0.490026192956, -0.556960013183, -0.582682472877, -0.722115693938,
        -0.765958095957, -0.640850384069, -0.38356211919, -0.548179696928, -0.724802381273, -0.901892136761,
        -0.8925506989, -0.403370665149
    }, 1e-10, 0));
    (out.pow(2).sum() + h_n.sum()).backward();
    EXPECT_TRUE(values_near(values(x.grad()[0][0]), {
        -0.23633321273, -0.261832586434, -0.284715815485
    }, 1e-10, 0));
    EXPECT_TRUE(values_near(values(m.layer_weights(1, 0).bias_hh.grad()), {
        0.229789620616, 0.299585179076, 0.327177414327, 0.315786234791, 0.149630358488, -1.17335103454,
        -1.61867502973, -1.4462328855, -0.719001048078, -0.229851023987, -0.694409892791, -0.840228688334,
        -1.05982977073, -1.90222893528, -2.38569189682
    }, 1e-10, 0));
    // clang-format on
  }
  {  // RNN(3, 4, nonlinearity='relu', bidirectional=True); unbatched x (3, 3), h0 (2, 4)
    nn::RNN m(3, 4, {.nonlinearity = "relu", .bidirectional = true});
    m.to(kFloat64);
    set_sine_parameters(m);
    auto [out, h_n] = m.forward_with_state(X({3, 3}), H0({2, 4}));
    // clang-format off
    EXPECT_TRUE(tensor_is(out, {3, 8}, {
        2.86931998915, 2.94600627339, 2.78791153742, 2.41610461595, 1.34270477771, 0.839181865387,
        0.264348927216, 0, 6.5039449096, 6.34669772769, 5.33633555174, 3.6284385962, 0.308769644051,
        0.187976168613, 0.0575662401671, 0, 10.6162768418, 10.2388016664, 8.30304696772, 5.10976997193, 0, 0,
        0, 0
    }, 1e-10, 0));
    EXPECT_TRUE(tensor_is(h_n, {2, 4}, {
        10.6162768418, 10.2388016664, 8.30304696772, 5.10976997193, 1.34270477771, 0.839181865387,
        0.264348927216, 0
    }, 1e-10, 0));
    // clang-format on
  }
  {  // RNN(3, 4, num_layers=2); x (2, 3, 3), h0 (2, 3, 4)
    nn::RNN m(3, 4, {.num_layers = 2});
    m.to(kFloat64);
    set_sine_parameters(m);
    auto [out, h_n] = m.forward_with_state(X({2, 3, 3}), H0({2, 3, 4}));
    // clang-format off
    EXPECT_TRUE(values_near(values(out[1]), {
        0.943238490043, 0.726414143814, -0.0564259384861, -0.772450994367, 0.963860635359, 0.757262942695,
        -0.159619696564, -0.858489150811, 0.936597375179, 0.689289139298, -0.135831265584, -0.800356513841
    }, 1e-10, 0));
    EXPECT_TRUE(values_near(values(h_n[0]), {
        0.95250285382, 0.929469023619, 0.847900696791, 0.60374815343, 0.994776076658, 0.993917632843,
        0.986957495738, 0.954325913918, 0.984273793088, 0.987135983747, 0.985339311142, 0.977019577334
    }, 1e-10, 0));
    // clang-format on
  }
}

TEST(NnRNN, CellsMatchLibtorch) {
  // input 3, hidden 4; x (2, 3), h (2, 4), c (2, 4)
  Tensor x = X({2, 3}), h = H0({2, 4}), c = C0({2, 4});
  nn::LSTMCell lstm(3, 4);
  nn::GRUCell gru(3, 4);
  nn::RNNCell rnn(3, 4);
  nn::RNNCell relu_nobias(3, 4, {.bias = false, .nonlinearity = "relu"});
  for (nn::Module* m : std::initializer_list<nn::Module*>{&lstm, &gru, &rnn, &relu_nobias}) {
    m->to(kFloat64);
    set_sine_parameters(*m);
  }
  nn::LSTMState s = lstm.forward_with_state(x, {h, c});
  // clang-format off
  EXPECT_TRUE(tensor_is(s.h, {2, 4}, {
      -0.0214640381, -0.0955778082282, -0.161844934311, -0.224068233112, -0.034469052481, -0.114158316445,
      -0.13541973956, -0.0837910958313
  }, 1e-10, 0));
  EXPECT_TRUE(tensor_is(s.c, {2, 4}, {
      -0.0893327093479, -0.347385342046, -0.497316148628, -0.580700674969, -0.0682748444369, -0.202353262036,
      -0.219841194548, -0.128293792474
  }, 1e-10, 0));
  EXPECT_TRUE(tensor_is(gru(x, h), {2, 4}, {
      0.136993696824, 0.0873759400822, -0.0445923929197, -0.21959599284, 0.285468767978, 0.188002793295,
      0.112114957133, 0.104955384918
  }, 1e-10, 0));
  EXPECT_TRUE(tensor_is(rnn(x, h), {2, 4}, {
      0.993582372455, 0.994492381559, 0.992451882562, 0.984188209199, 0.964569405948, 0.962599036976,
      0.945640837805, 0.897672371166
  }, 1e-10, 0));
  EXPECT_TRUE(tensor_is(relu_nobias(x, h), {2, 4}, {
      1.89638314379, 1.99552515475, 1.86938303866, 1.5387063702, 1.03478949603, 1.0296831112, 0.870338253425,
      0.58270357088
  }, 1e-10, 0));
  // clang-format on
}

// ---- (3) parameters, state_dict, init, repr ---------------------------------------------------------

TEST(NnRNN, StateDictKeysAndShapesArePyTorchs) {
  // As listed by libtorch 1.13's named_parameters() for the same modules.
  nn::LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true, .proj_size = 2});
  using KS = std::vector<std::pair<std::string, std::vector<int64_t>>>;
  EXPECT_EQ(keys_and_shapes(lstm), (KS{{"weight_ih_l0", {16, 3}},
                                       {"weight_hh_l0", {16, 2}},
                                       {"bias_ih_l0", {16}},
                                       {"bias_hh_l0", {16}},
                                       {"weight_hr_l0", {2, 4}},
                                       {"weight_ih_l0_reverse", {16, 3}},
                                       {"weight_hh_l0_reverse", {16, 2}},
                                       {"bias_ih_l0_reverse", {16}},
                                       {"bias_hh_l0_reverse", {16}},
                                       {"weight_hr_l0_reverse", {2, 4}},
                                       {"weight_ih_l1", {16, 4}},
                                       {"weight_hh_l1", {16, 2}},
                                       {"bias_ih_l1", {16}},
                                       {"bias_hh_l1", {16}},
                                       {"weight_hr_l1", {2, 4}},
                                       {"weight_ih_l1_reverse", {16, 4}},
                                       {"weight_hh_l1_reverse", {16, 2}},
                                       {"bias_ih_l1_reverse", {16}},
                                       {"bias_hh_l1_reverse", {16}},
                                       {"weight_hr_l1_reverse", {2, 4}}}));
  nn::GRU gru(3, 5, {.num_layers = 2, .batch_first = true});
  EXPECT_EQ(keys_and_shapes(gru), (KS{{"weight_ih_l0", {15, 3}},
                                      {"weight_hh_l0", {15, 5}},
                                      {"bias_ih_l0", {15}},
                                      {"bias_hh_l0", {15}},
                                      {"weight_ih_l1", {15, 5}},
                                      {"weight_hh_l1", {15, 5}},
                                      {"bias_ih_l1", {15}},
                                      {"bias_hh_l1", {15}}}));
  nn::GRU nobias(3, 5, {.bias = false, .bidirectional = true});
  EXPECT_EQ(keys_and_shapes(nobias), (KS{{"weight_ih_l0", {15, 3}},
                                         {"weight_hh_l0", {15, 5}},
                                         {"weight_ih_l0_reverse", {15, 3}},
                                         {"weight_hh_l0_reverse", {15, 5}}}));
  nn::LSTMCell cell(3, 4);
  EXPECT_EQ(keys_and_shapes(cell),
            (KS{{"weight_ih", {16, 3}}, {"weight_hh", {16, 4}}, {"bias_ih", {16}}, {"bias_hh", {16}}}));
  // the members are the registered tensors
  EXPECT_TRUE(lstm.named_parameters()["weight_hr_l1_reverse"].is_same(lstm.layer_weights(1, 1).weight_hr));
  EXPECT_TRUE(cell.named_parameters()["bias_hh"].is_same(cell.bias_hh));
}

TEST(NnRNN, LoadStateDictRoundTrip) {
  manual_seed(8);
  nn::LSTM a(3, 4, {.num_layers = 2, .bidirectional = true, .proj_size = 2});
  manual_seed(9);
  nn::LSTM b(3, 4, {.num_layers = 2, .bidirectional = true, .proj_size = 2});
  Tensor x = randn({5, 2, 3});
  EXPECT_FALSE(allclose(a(x), b(x)));
  b.load_state_dict(a.state_dict());
  EXPECT_TRUE(equal(a(x), b(x)));
  auto [oa, ha, ca] = a.forward_with_state(x);
  auto [ob, hb, cb] = b.forward_with_state(x);
  EXPECT_TRUE(equal(ha, hb) && equal(ca, cb));
  // a GRU's state does not load into an LSTM's
  nn::GRU g(3, 4, {.num_layers = 2, .bidirectional = true});
  EXPECT_THROW(b.load_state_dict(g.state_dict()), ValueError);
}

TEST(NnRNN, InitializationAndReprArePyTorchs) {
  manual_seed(10);
  nn::LSTM lstm(16, 100, {.num_layers = 2, .proj_size = 30});
  const double bound = 0.1;  // 1 / sqrt(hidden_size)
  for (auto& kv : lstm.named_parameters()) {
    double mx = kv.second.abs().max().item<double>();
    EXPECT_LE(mx, bound) << kv.first;
    EXPECT_GT(mx, 0.9 * bound) << kv.first;
  }
  EXPECT_NEAR(lstm.layer_weights(0, 0).weight_hh.std().item<double>(), bound / std::sqrt(3.0), 0.05 * bound);
  nn::GRUCell cell(4, 25);
  EXPECT_LE(cell.weight_ih.abs().max().item<double>(), 0.2);
  EXPECT_GT(cell.weight_ih.abs().max().item<double>(), 0.15);
  // reset_parameters draws new values
  Tensor before = cell.weight_hh.clone();
  cell.reset_parameters();
  EXPECT_FALSE(equal(before, cell.weight_hh));

  // extra_repr as PyTorch's (RNNBase leaves out RNN's nonlinearity, as PyTorch does)
  EXPECT_EQ(nn::LSTM(10, 20, {.num_layers = 2, .batch_first = true}).repr(),
            "LSTM(10, 20, num_layers=2, batch_first=True)");
  EXPECT_EQ(nn::GRUCell(4, 8).repr(), "GRUCell(4, 8)");
  EXPECT_EQ(
      nn::LSTM(3, 8, {.num_layers = 3, .bias = false, .dropout = 0.25, .bidirectional = true, .proj_size = 4}).repr(),
      "LSTM(3, 8, proj_size=4, num_layers=3, bias=False, dropout=0.25, bidirectional=True)");
  EXPECT_EQ(nn::RNN(2, 3, {.nonlinearity = "relu"}).repr(), "RNN(2, 3)");
  EXPECT_EQ(nn::GRU(2, 3, {.dropout = 0.5}).repr(), "GRU(2, 3, dropout=0.5)");
  EXPECT_EQ(nn::RNNCell(2, 3, {.bias = false, .nonlinearity = "relu"}).repr(),
            "RNNCell(2, 3, bias=False, nonlinearity=relu)");
  EXPECT_EQ(nn::LSTMCell(2, 3, {.bias = false}).repr(), "LSTMCell(2, 3, bias=False)");
}

// ---- (4) gradients ----------------------------------------------------------------------------------

TEST(NnRNN, GradientsReachEveryParameterAndMatchFiniteDifferences) {
  manual_seed(11);
  nn::GRU gru(3, 4, {.num_layers = 2, .batch_first = true, .bidirectional = true});
  gru.to(kFloat64);
  Tensor x = randn({2, 5, 3}, dtype(kFloat64));
  auto loss_of = [&] {
    auto [out, h_n] = gru.forward_with_state(x);
    return (out * out).sum() + h_n.sum();
  };
  loss_of().backward();
  for (auto& kv : gru.named_parameters()) {
    ASSERT_TRUE(kv.second.grad().defined()) << kv.first;
    EXPECT_GT(kv.second.grad().abs().sum().item<double>(), 0) << kv.first;
  }
  // central differences on a few entries of every parameter
  autograd::NoGradGuard ng;
  const double eps = 1e-6;
  for (auto& kv : gru.named_parameters()) {
    Tensor p = kv.second, flat = p.view({-1});
    for (int64_t i : {int64_t(0), p.numel() / 2, p.numel() - 1}) {
      double v = flat[i].item<double>();
      flat[i].fill_(v + eps);
      double up = loss_of().item<double>();
      flat[i].fill_(v - eps);
      double down = loss_of().item<double>();
      flat[i].fill_(v);
      EXPECT_NEAR(p.grad().view({-1})[i].item<double>(), (up - down) / (2 * eps), 1e-6) << kv.first << "[" << i << "]";
    }
  }
}

TEST(NnRNN, GradientFlowsThroughCellsOverASequence) {
  manual_seed(12);
  nn::LSTMCell cell(2, 3);
  Tensor h0 = randn({4, 3}).requires_grad_(true);
  nn::LSTMState s{h0, Tensor()};
  for (int t = 0; t < 6; ++t) s = cell.forward_with_state(randn({4, 2}), s);
  s.h.sum().backward();
  for (auto& kv : cell.named_parameters()) EXPECT_TRUE(kv.second.grad().defined()) << kv.first;
  ASSERT_TRUE(h0.grad().defined());
  EXPECT_GT(h0.grad().abs().sum().item<double>(), 0);
}

// ---- (5) learning -----------------------------------------------------------------------------------

namespace {
// An LSTM reads a sequence of numbers and a linear head predicts their sum from the last output.
struct SumModel : nn::Module {
  SumModel() {
    lstm = register_module("lstm", std::make_shared<nn::LSTM>(1, 16, nn::LSTMOptions{.batch_first = true}));
    head = register_module("head", std::make_shared<nn::Linear>(16, 1));
  }
  Tensor forward(Tensor x) override {  // x: (N, L, 1) -> (N)
    Tensor out = (*lstm)(x);           // (N, L, 16)
    return (*head)(out.select(1, -1)).squeeze(-1);
  }
  std::shared_ptr<nn::LSTM> lstm;
  std::shared_ptr<nn::Linear> head;
};
}  // namespace

TEST(NnRNN, LSTMLearnsToSumASequence) {
  manual_seed(2024);
  auto model = std::make_shared<SumModel>();
  optim::Adam opt(model->parameters(), {.lr = 0.02});
  auto batch = [] {
    Tensor x = rand({64, 5, 1}) * 2 - 1;
    return std::pair{x, x.sum({1, 2})};
  };
  Tensor x_test, y_test;  // (not a structured binding: test_loss captures them, which clang < 16 cannot)
  std::tie(x_test, y_test) = batch();
  auto test_loss = [&] {
    autograd::NoGradGuard ng;
    return nn::functional::mse_loss((*model)(x_test), y_test).item<double>();
  };
  const double initial = test_loss();
  EXPECT_GT(initial, 0.5);  // the sum of 5 U(-1, 1) has variance 5/3
  for (int step = 0; step < 300; ++step) {
    auto [x, y] = batch();
    Tensor loss = nn::functional::mse_loss((*model)(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  EXPECT_LT(test_loss(), 0.02) << "initial " << initial;
}

// ---- (6) errors -------------------------------------------------------------------------------------

TEST(NnRNN, ErrorsNameTheModuleAndShapes) {
  nn::LSTM lstm(10, 20, {.num_layers = 2});
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        lstm(randn({5, 3, 7}));
      },
      {"LSTM: expected input with last dim 10 (input_size), got [5, 3, 7]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        lstm(randn({2, 5, 3, 10}));
      },
      {"LSTM: expected input of 3 dims (L, N, input_size)", "[2, 5, 3, 10]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        lstm.forward_with_state(randn({5, 3, 10}), {randn({1, 3, 20}), Tensor()});
      },
      {"LSTM: expected h0 of shape [2, 3, 20], got [1, 3, 20]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        lstm.forward_with_state(randn({5, 3, 10}), {Tensor(), randn({2, 4, 20})});
      },
      {"LSTM: expected c0 of shape [2, 3, 20], got [2, 4, 20]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        lstm.forward_with_state(randn({5, 3, 10}), {randn({2, 20}), Tensor()});
      },
      {"LSTM: a batched input [5, 3, 10] needs a 3-D h0, got shape [2, 20]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        lstm.forward_with_state(randn({5, 10}), {randn({2, 1, 20}), Tensor()});
      },
      {"LSTM: an unbatched input [5, 10] needs a 2-D h0, got shape [2, 1, 20]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        lstm.forward_with_state(randn({5, 10}), {randn({2, 20}), randn({2, 19})});
      },
      {"LSTM: expected c0 of shape [2, 20], got [2, 19]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        lstm(randn({0, 3, 10}));
      },
      {"LSTM: expected a sequence of at least one step", "[0, 3, 10]"}));
  EXPECT_TRUE(throws_with<DTypeError>(
      [&] {
        lstm.forward_with_state(randn({5, 3, 10}), {randn({2, 3, 20}, dtype(kFloat64)), Tensor()});
      },
      {"LSTM: h0 has dtype"}));
  nn::GRU gru(4, 6, {.batch_first = true, .bidirectional = true});
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        gru.forward_with_state(randn({3, 5, 4}), randn({1, 3, 6}));
      },
      {"GRU: expected h0 of shape [2, 3, 6], got [1, 3, 6]"}));
  EXPECT_TRUE(
      throws_with<ShapeError>([&] { gru(randn({4})); }, {"GRU: expected input of 3 dims (N, L, input_size)", "[4]"}));
  nn::LSTM proj(4, 6, {.proj_size = 3});
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        proj.forward_with_state(randn({2, 1, 4}), {randn({1, 1, 6}), Tensor()});
      },
      {"LSTM: expected h0 of shape [1, 1, 3], got [1, 1, 6]"}));

  // cells
  nn::GRUCell cell(4, 6);
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        cell(randn({3, 5}));
      },
      {"GRUCell: expected input with last dim 4 (input_size), got [3, 5]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        cell(randn({2, 3, 4}));
      },
      {"GRUCell: expected input of 2 dims", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        cell(randn({3, 4}), randn({2, 6}));
      },
      {"GRUCell: expected h of shape [3, 6], got [2, 6]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        cell(randn({3, 4}), randn({6}));
      },
      {"GRUCell: a batched input [3, 4] needs a 2-D h, got shape [6]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        cell(randn({4}), randn({1, 6}));
      },
      {"GRUCell: an unbatched input [4] needs a 1-D h, got shape [1, 6]"}));
  nn::LSTMCell lcell(4, 6);
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        lcell.forward_with_state(randn({3, 4}), {randn({3, 6}), randn({3, 5})});
      },
      {"LSTMCell: expected c of shape [3, 6], got [3, 5]"}));
  EXPECT_TRUE(throws_with<NotImplemented>([&] { lcell(randn({3, 4}), randn({3, 6})); }, {"LSTMCell"}));

  // options
  EXPECT_TRUE(throws_with<ValueError>([] { nn::LSTM(3, 4, {.num_layers = 0}); },
                                      {"LSTM: num_layers must be at least 1, got 0"}));
  EXPECT_TRUE(
      throws_with<ValueError>([] { nn::GRU(3, 4, {.dropout = 1.5}); }, {"GRU: dropout must be in [0, 1], got 1.5"}));
  EXPECT_TRUE(
      throws_with<ValueError>([] { nn::RNN(3, 4, {.dropout = -0.1}); }, {"RNN: dropout must be in [0, 1], got -0.1"}));
  EXPECT_TRUE(
      throws_with<ValueError>([] { nn::LSTM(3, 4, {.proj_size = 4}); },
                              {"LSTM: proj_size must be smaller than hidden_size, got proj_size=4 and hidden_size=4"}));
  EXPECT_TRUE(throws_with<ValueError>([] { nn::LSTM(3, 4, {.proj_size = -1}); },
                                      {"LSTM: proj_size must be non-negative, got -1"}));
  EXPECT_TRUE(throws_with<ValueError>([] { nn::RNN(3, 4, {.nonlinearity = "sigmoid"}); },
                                      {"RNN: unknown nonlinearity 'sigmoid' (expected 'tanh' or 'relu')"}));
  EXPECT_TRUE(throws_with<ValueError>([] { nn::RNNCell(3, 4, {.nonlinearity = "gelu"}); },
                                      {"RNNCell: unknown nonlinearity 'gelu'"}));
  EXPECT_TRUE(throws_with<ValueError>([] { nn::GRU(3, 0); }, {"GRU: hidden_size must be positive, got 0"}));
  EXPECT_TRUE(
      throws_with<ValueError>([] { nn::LSTMCell(-1, 3); }, {"LSTMCell: input_size must be non-negative, got -1"}));
}

// ---- (7) dropout between layers -----------------------------------------------------------------------

TEST(NnRNN, DropoutBetweenLayersOnlyInTraining) {
  manual_seed(13);
  nn::GRU gru(3, 8, {.num_layers = 2, .dropout = 0.5});
  Tensor x = randn({4, 2, 3});
  Tensor a = gru(x), b = gru(x);  // training: two different masks
  EXPECT_FALSE(allclose(a, b));
  gru.eval();
  Tensor e1 = gru(x), e2 = gru(x);
  EXPECT_TRUE(equal(e1, e2));
  EXPECT_FALSE(allclose(a, e1));
  // With the same seed, training reproduces itself; the first layer's h_n is unaffected by dropout.
  gru.train();
  manual_seed(77);
  auto [o1, h1] = gru.forward_with_state(x);
  manual_seed(77);
  auto [o2, h2] = gru.forward_with_state(x);
  EXPECT_TRUE(equal(o1, o2));
  auto [oe, he] = [&] {
    gru.eval();
    return gru.forward_with_state(x);
  }();
  EXPECT_TRUE(allclose(h1[0], he[0], 1e-6, 1e-6));
  EXPECT_FALSE(allclose(h1[1], he[1]));

  // a single layer and dropout = 0 ignore the mode
  for (auto opts : {nn::LSTMOptions{.num_layers = 2}, nn::LSTMOptions{.dropout = 0.5}}) {
    nn::LSTM lstm(3, 4, opts);
    Tensor train_out = lstm(x);
    lstm.eval();
    EXPECT_TRUE(equal(train_out, lstm(x)));
  }
}

// ---- calling conventions ------------------------------------------------------------------------------

TEST(NnRNN, WorksThroughCallHooksSequentialAndDtypes) {
  manual_seed(14);
  auto lstm = std::make_shared<nn::LSTM>(3, 4, nn::LSTMOptions{.batch_first = true});
  int calls = 0;
  auto handle = lstm->register_forward_hook([&](nn::Module&, const std::vector<Tensor>&, Tensor& out) {
    ++calls;
    EXPECT_EQ(shape_of(out), (std::vector<int64_t>{2, 5, 4}));
  });
  Tensor x = randn({2, 5, 3});
  Tensor y = (*lstm)(x);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(equal(y, lstm->forward_with_state(x).output));
  handle.remove();

  nn::Sequential seq(lstm, nn::Tanh());
  EXPECT_TRUE(allclose(seq(x), tanh(y)));
  EXPECT_EQ(seq.parameters().size(), 4u);

  // to(kFloat64) converts in place; the members follow
  lstm->to(kFloat64);
  EXPECT_EQ(lstm->layer_weights(0, 0).weight_ih.dtype(), kFloat64);
  EXPECT_TRUE(allclose((*lstm)(x.to(kFloat64)).to(kFloat32), y, 1e-5, 1e-6));

  // RNNCell and GRUCell also take (x, h) through operator()
  nn::GRUCell cell(3, 4);
  Tensor h = randn({2, 4});
  EXPECT_TRUE(equal(cell(x.select(1, 0), h), cell.forward(x.select(1, 0), h)));
  EXPECT_EQ(cell.parameters().size(), 4u);
}

// forward reads the public parameter members (the op registry relies on it): with weight_hh and
// bias_hh replaced by zeros, every step of an RNN is an RNNCell step from h = 0 with the same weight_ih.
TEST(NnRNN, ForwardReadsTheParameterMembers) {
  manual_seed(15);
  nn::RNN rnn(2, 3);
  Tensor x = randn({4, 5, 2});
  Tensor before = rnn(x);
  nn::RNNLayerWeights& w = rnn.layer_weights(0, 0);
  w.weight_hh = zeros({3, 3});
  w.bias_hh = zeros({3});
  Tensor after = rnn(x);
  EXPECT_FALSE(allclose(before, after));
  nn::RNNCell cell(2, 3);
  cell.weight_ih = w.weight_ih;
  cell.bias_ih = w.bias_ih;
  cell.bias_hh = w.bias_hh;
  for (int64_t t = 0; t < 4; ++t) EXPECT_TRUE(allclose(after[t], cell(x[t]), 1e-6, 1e-6)) << t;
}
