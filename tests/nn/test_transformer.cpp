// Transformer layers: values from libtorch 1.13, pre-norm / gelu / batch-first / unbatched forms
// against compositions of the layers' own children, PyTorch's state_dict keys and printing, deep
// copies in the stacks, gradients, dropout, errors, and a small model that learns.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "nabla.h"
#include "tests/common/value_helpers.h"

using namespace nabla;
using namespace nabla::testing;
namespace F = nn::functional;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A (rows, cols) float64 mask with -inf at the given positions.
Tensor neg_inf_at(int64_t r, int64_t c, std::vector<std::pair<int64_t, int64_t>> at) {
  Tensor m = zeros({r, c}, dtype(kFloat64));
  autograd::NoGradGuard ng;
  for (auto [i, j] : at) m.index({i, j}).fill_(-kInf);
  return m;
}
Tensor bool_at(int64_t r, int64_t c, std::vector<std::pair<int64_t, int64_t>> at) {
  Tensor m = zeros({r, c}, dtype(kBool));
  for (auto [i, j] : at) m.index({i, j}).fill_(true);
  return m;
}

std::vector<std::string> keys_of(const nn::Module& m) { return m.state_dict().keys(); }

const nn::TransformerLayerOptions kSmall{.dim_feedforward = 6, .dropout = 0.1};

}  // namespace

// ---- libtorch 1.13 ---------------------------------------------------------------------------------
// From a throwaway libtorch 1.13 program (C++ API, float64, eval mode): parameters and inputs
// filled by filled() above, by PyTorch's key names. d_model 4, nhead 2, dim_feedforward 6.

TEST(Transformer, EncoderLayerMatchesLibtorch) {
  nn::TransformerEncoderLayer l(4, 2, kSmall);
  fill_params(l);
  l.eval();
  Tensor src = filled({3, 2, 4}, "src");
  std::vector<double> want = {0.829618551648, 0.159695721284, 0.233731385474, 0.197098243608, 0.809701017906,
                              0.165547983495, 0.23378639389,  0.204721887412, 0.77997347503,  0.166639646744,
                              0.23385500144,  0.205468592926, 0.81249946993,  0.159221290443, 0.233773611287,
                              0.19704856535,  0.829201176177, 0.159001725342, 0.2337316894,   0.196256119429,
                              0.818159020404, 0.163637095253, 0.233764186708, 0.202314618466};
  EXPECT_TRUE(tensor_is(l(src), {3, 2, 4}, want, 1e-10, 1e-10));
  // A causal float src_mask and key 2 of sample 0 padded.
  Tensor mask = neg_inf_at(3, 3, {{0, 1}, {0, 2}, {1, 2}});
  Tensor kpm = bool_at(2, 3, {{0, 2}});
  std::vector<double> want_mask = {0.837078605093, 0.160190519496, 0.233712496218, 0.197295167146, 0.819079058247,
                                   0.164893490987, 0.233763055806, 0.203795546918, 0.756905159614, 0.169105694146,
                                   0.233905144204, 0.206953626206, 0.797886278368, 0.160112804269, 0.233809093586,
                                   0.198164859707, 0.827086253642, 0.158619481594, 0.233736674765, 0.195876698327,
                                   0.818159020404, 0.163637095253, 0.233764186708, 0.202314618466};
  EXPECT_TRUE(
      tensor_is(l.forward(src, {.src_mask = mask, .src_key_padding_mask = kpm}), {3, 2, 4}, want_mask, 1e-10, 1e-10));
  // is_causal builds the same mask.
  EXPECT_TRUE(
      tensor_is(l.forward(src, {.src_key_padding_mask = kpm, .is_causal = true}), {3, 2, 4}, want_mask, 1e-10, 1e-10));
}

TEST(Transformer, EncoderWithTwoLayersAndNormMatchesLibtorch) {
  nn::TransformerEncoder enc(nn::TransformerEncoderLayer(4, 2, kSmall), 2,
                             std::make_shared<nn::LayerNorm>(std::vector<int64_t>{4}));
  fill_params(enc);  // layers.0.* and layers.1.* get different values (their names differ)
  enc.eval();
  std::vector<double> want = {0.479307876211,  -0.817423824786, -0.578242843116, -0.291176564547, 0.439448591239,
                              -0.849456957311, -0.564092527144, -0.220808186868, 0.464008867532,  -0.809724346445,
                              -0.616936033908, -0.243018525314, 0.492488269501,  -0.799829375892, -0.592832059321,
                              -0.312234255615, 0.483454986055,  -0.813644836407, -0.579261998312, -0.299373687047,
                              0.453852624764,  -0.829566093068, -0.589653147094, -0.235476252136};
  EXPECT_TRUE(tensor_is(enc(filled({3, 2, 4}, "src")), {3, 2, 4}, want, 1e-10, 1e-10));
}

TEST(Transformer, DecoderLayerWithGeluMatchesLibtorch) {
  nn::TransformerLayerOptions o = kSmall;
  o.activation = "gelu";
  nn::TransformerDecoderLayer l(4, 2, o);
  fill_params(l);
  l.eval();
  Tensor tgt = filled({2, 2, 4}, "tgt"), mem = filled({3, 2, 4}, "memory");
  std::vector<double> want = {0.668497467259, 0.213427776479, 0.126767297545, 0.233960187072,
                              0.614580159594, 0.240329429323, 0.121248619443, 0.263918874608,
                              0.619468226463, 0.233898471312, 0.121475582955, 0.25574064835,
                              0.668944700013, 0.220447431255, 0.126928726848, 0.245369171872};
  EXPECT_TRUE(tensor_is(l(tgt, mem), {2, 2, 4}, want, 1e-10, 1e-10));
  // tgt_mask -inf at (0, 1); memory key 0 of sample 1 padded.
  std::vector<double> want_mask = {0.675862614946, 0.210243786991, 0.127698660696, 0.22987810136,
                                   0.620779391135, 0.237322488878, 0.121783003256, 0.261079394731,
                                   0.619468226463, 0.233898471312, 0.121475582955, 0.25574064835,
                                   0.670754946332, 0.219290124531, 0.127135174791, 0.243838464671};
  Tensor out =
      l.forward(tgt, mem, {.tgt_mask = neg_inf_at(2, 2, {{0, 1}}), .memory_key_padding_mask = bool_at(2, 3, {{1, 0}})});
  EXPECT_TRUE(tensor_is(out, {2, 2, 4}, want_mask, 1e-10, 1e-10));
}

TEST(Transformer, TransformerMatchesLibtorch) {
  nn::Transformer t({.d_model = 4, .nhead = 2, .num_encoder_layers = 1, .num_decoder_layers = 1, .dim_feedforward = 6});
  fill_params(t);
  t.eval();
  Tensor src = filled({3, 2, 4}, "src"), tgt = filled({2, 2, 4}, "tgt");
  std::vector<double> want = {0.0479650992212, 0.446069784492, 0.066827141668,   -0.986502702836,
                              0.102519344435,  0.435699772918, 0.0266428333911,  -1.06264406979,
                              0.0358554759066, 0.499641332531, -0.0302318725986, -0.926289687071,
                              0.0337103554143, 0.548152200389, -0.153410478793,  -0.85502384763};
  Tensor out = t.forward(src, tgt, {.tgt_mask = nn::generate_square_subsequent_mask(2, dtype(kFloat64))});
  EXPECT_TRUE(tensor_is(out, {2, 2, 4}, want, 1e-10, 1e-10));
}

// ---- other forms against compositions of the children -----------------------------------------------

TEST(Transformer, NormFirstAndGeluAreTheDocumentedCompositions) {
  manual_seed(21);
  nn::TransformerEncoderLayer l(8, 2, {.dim_feedforward = 12, .activation = "gelu", .norm_first = true});
  l.to(kFloat64);
  l.eval();
  Tensor x = randn({5, 3, 8}, dtype(kFloat64));
  Tensor kpm = bool_at(3, 5, {{0, 4}, {2, 0}});
  auto sa = [&](const Tensor& h) { return l.self_attn->forward_attention(h, h, h, {.key_padding_mask = kpm}).output; };
  auto ff = [&](const Tensor& h) { return l.linear2->forward(gelu(l.linear1->forward(h))); };
  auto ln = [](const std::shared_ptr<nn::LayerNorm>& n, const Tensor& h) {
    return F::layer_norm(h, {8}, n->weight, n->bias, 1e-5);
  };
  Tensor h = x + sa(ln(l.norm1, x));
  h = h + ff(ln(l.norm2, h));
  EXPECT_TRUE(tensor_near(l.forward(x, {.src_key_padding_mask = kpm}), h, 1e-12, 1e-12));

  // Decoder, pre-norm, relu, with a custom activation function giving the same result.
  nn::TransformerDecoderLayer d(
      8, 2, {.dim_feedforward = 12, .activation = [](const Tensor& t) { return relu(t); }, .norm_first = true});
  EXPECT_EQ(d.options.activation.name(), "custom");
  d.to(kFloat64);
  d.eval();
  Tensor mem = randn({4, 3, 8}, dtype(kFloat64));
  Tensor tmask = nn::generate_square_subsequent_mask(5, dtype(kFloat64));
  Tensor y =
      x + d.self_attn->forward_attention(ln(d.norm1, x), ln(d.norm1, x), ln(d.norm1, x), {.attn_mask = tmask}).output;
  y = y + d.multihead_attn->forward_attention(ln(d.norm2, y), mem, mem).output;
  y = y + d.linear2->forward(relu(d.linear1->forward(ln(d.norm3, y))));
  EXPECT_TRUE(tensor_near(d.forward(x, mem, {.tgt_mask = tmask}), y, 1e-12, 1e-12));
  EXPECT_TRUE(tensor_near(d.forward(x, mem, {.tgt_is_causal = true}), y, 1e-12, 1e-12));
}

TEST(Transformer, BatchFirstAndUnbatchedAgreeWithSeqFirst) {
  manual_seed(22);
  nn::TransformerEncoderLayer seq(8, 4, {.dim_feedforward = 16}),
      bf(8, 4, {.dim_feedforward = 16, .batch_first = true});
  seq.to(kFloat64), bf.to(kFloat64);
  bf.load_state_dict(seq.state_dict());
  seq.eval(), bf.eval();
  Tensor x = randn({5, 3, 8}, dtype(kFloat64));
  Tensor kpm = bool_at(3, 5, {{1, 3}, {1, 4}});
  Tensor a = seq.forward(x, {.src_key_padding_mask = kpm});
  EXPECT_TRUE(
      tensor_near(bf.forward(x.transpose(0, 1), {.src_key_padding_mask = kpm}), a.transpose(0, 1), 1e-13, 1e-13));
  EXPECT_TRUE(tensor_near(seq.forward(x.select(1, 1), {.src_key_padding_mask = kpm[1]}), a.select(1, 1), 1e-13, 1e-13));

  nn::TransformerDecoderLayer dseq(8, 4, {.dim_feedforward = 16}),
      dbf(8, 4, {.dim_feedforward = 16, .batch_first = true});
  dseq.to(kFloat64), dbf.to(kFloat64);
  dbf.load_state_dict(dseq.state_dict());
  dseq.eval(), dbf.eval();
  Tensor mem = randn({4, 3, 8}, dtype(kFloat64));
  Tensor b = dseq.forward(x, mem, {.tgt_is_causal = true});
  EXPECT_TRUE(tensor_near(dbf.forward(x.transpose(0, 1), mem.transpose(0, 1), {.tgt_is_causal = true}),
                          b.transpose(0, 1), 1e-13, 1e-13));
  EXPECT_TRUE(tensor_near(dseq.forward(x.select(1, 2), mem.select(1, 2), {.tgt_is_causal = true}), b.select(1, 2),
                          1e-13, 1e-13));
}

// ---- structure: keys, copies, printing --------------------------------------------------------------

TEST(Transformer, StateDictKeysMatchPyTorch) {
  using Keys = std::vector<std::string>;
  Keys enc_layer = {"self_attn.in_proj_weight",
                    "self_attn.in_proj_bias",
                    "self_attn.out_proj.weight",
                    "self_attn.out_proj.bias",
                    "linear1.weight",
                    "linear1.bias",
                    "linear2.weight",
                    "linear2.bias",
                    "norm1.weight",
                    "norm1.bias",
                    "norm2.weight",
                    "norm2.bias"};
  nn::TransformerEncoderLayer l(8, 2, {.dim_feedforward = 16});
  EXPECT_EQ(keys_of(l), enc_layer);
  auto sd = l.state_dict();
  EXPECT_EQ(shape_of(*sd.find("self_attn.in_proj_weight")), (std::vector<int64_t>{24, 8}));
  EXPECT_EQ(shape_of(*sd.find("linear1.weight")), (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(shape_of(*sd.find("linear2.weight")), (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(shape_of(*sd.find("norm2.bias")), (std::vector<int64_t>{8}));

  nn::TransformerEncoder enc(l, 2, std::make_shared<nn::LayerNorm>(std::vector<int64_t>{8}));
  Keys enc2;
  for (const char* p : {"layers.0.", "layers.1."})
    for (const auto& k : enc_layer) enc2.push_back(p + k);
  enc2.push_back("norm.weight");
  enc2.push_back("norm.bias");
  EXPECT_EQ(keys_of(enc), enc2);

  nn::TransformerDecoderLayer d(8, 2, {.dim_feedforward = 16});
  EXPECT_EQ(keys_of(d), (Keys{"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                              "self_attn.out_proj.bias", "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias",
                              "multihead_attn.out_proj.weight", "multihead_attn.out_proj.bias", "linear1.weight",
                              "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight", "norm1.bias",
                              "norm2.weight", "norm2.bias", "norm3.weight", "norm3.bias"}));

  // bias = false: no biases anywhere (LayerNorm(bias=False) keeps its weight).
  nn::TransformerEncoderLayer nb(8, 2, {.dim_feedforward = 16, .bias = false});
  EXPECT_EQ(keys_of(nb), (Keys{"self_attn.in_proj_weight", "self_attn.out_proj.weight", "linear1.weight",
                               "linear2.weight", "norm1.weight", "norm2.weight"}));

  // nn::Transformer: encoder.layers.*, encoder.norm.*, decoder.layers.*, decoder.norm.*
  nn::Transformer t(
      {.d_model = 8, .nhead = 2, .num_encoder_layers = 2, .num_decoder_layers = 1, .dim_feedforward = 16});
  auto keys = keys_of(t);
  EXPECT_EQ(keys.size(), 2 * 12 + 2 + 18 + 2u);
  EXPECT_EQ(keys.front(), "encoder.layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(keys[24], "encoder.norm.weight");
  EXPECT_EQ(keys[26], "decoder.layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(keys.back(), "decoder.norm.bias");
}

TEST(Transformer, StacksHoldDeepCopiesOfTheLayer) {
  manual_seed(23);
  nn::TransformerEncoderLayer l(8, 2, {.dim_feedforward = 16});
  nn::TransformerEncoder enc(l, 3);
  ASSERT_EQ(enc.layers->size(), 3u);
  EXPECT_FALSE(enc.norm);
  auto sd = l.state_dict();
  for (size_t i = 0; i < 3; ++i) {
    auto li = enc.layers->at<nn::TransformerEncoderLayer>(i);
    for (const auto& [k, t] : li->state_dict()) {
      EXPECT_TRUE(equal(t, *sd.find(k))) << i << " " << k;  // the same initial values
      EXPECT_FALSE(t.is_same(*sd.find(k)));                 // in their own tensors
    }
  }
  EXPECT_EQ(enc.parameters().size(), 3 * l.parameters().size());
  // Changing one layer changes neither the original nor the others.
  {
    autograd::NoGradGuard ng;
    enc.layers->at<nn::TransformerEncoderLayer>(0)->linear1->weight.fill_(1.0);
  }
  EXPECT_FALSE(equal(l.linear1->weight, ones_like(l.linear1->weight)));
  EXPECT_FALSE(equal(enc.layers->at<nn::TransformerEncoderLayer>(1)->linear1->weight, ones_like(l.linear1->weight)));
  // Copies keep the layer's dtype and mode.
  nn::TransformerDecoderLayer d(8, 2, {.dim_feedforward = 16});
  d.to(kFloat64);
  d.eval();
  nn::TransformerDecoder dec(d, 2);
  auto d1 = dec.layers->at<nn::TransformerDecoderLayer>(1);
  EXPECT_EQ(d1->linear1->weight.dtype(), kFloat64);
  EXPECT_FALSE(d1->is_training());
  EXPECT_TRUE(equal(d1->multihead_attn->in_proj_weight, d.multihead_attn->in_proj_weight));
  // Copying draws no random numbers (as deepcopy).
  manual_seed(5);
  Tensor r1 = randn({4});
  manual_seed(5);
  nn::TransformerEncoder copies(l, 2);
  EXPECT_TRUE(equal(randn({4}), r1));
}

TEST(Transformer, PrintsLikePyTorch) {
  nn::TransformerEncoderLayer l(4, 2, kSmall);
  EXPECT_EQ(l.repr(),
            "TransformerEncoderLayer(\n"
            "  (self_attn): MultiheadAttention(\n"
            "    (out_proj): Linear(in_features=4, out_features=4, bias=True)\n"
            "  )\n"
            "  (linear1): Linear(in_features=4, out_features=6, bias=True)\n"
            "  (dropout): Dropout(p=0.1, inplace=False)\n"
            "  (linear2): Linear(in_features=6, out_features=4, bias=True)\n"
            "  (norm1): LayerNorm((4,), eps=1e-05, elementwise_affine=True)\n"
            "  (norm2): LayerNorm((4,), eps=1e-05, elementwise_affine=True)\n"
            "  (dropout1): Dropout(p=0.1, inplace=False)\n"
            "  (dropout2): Dropout(p=0.1, inplace=False)\n"
            ")");
}

TEST(Transformer, TransformerReinitializesMatricesWithXavier) {
  manual_seed(24);
  nn::Transformer t(
      {.d_model = 32, .nhead = 4, .num_encoder_layers = 1, .num_decoder_layers = 1, .dim_feedforward = 64});
  // linear1.weight (64, 32): xavier bound sqrt(6 / 96) instead of Linear's 1/sqrt(32).
  auto w = t.encoder->layers->at<nn::TransformerEncoderLayer>(0)->linear1->weight;
  double bound = std::sqrt(6.0 / 96), mx = w.abs().max().item<double>();
  EXPECT_LE(mx, bound);
  EXPECT_GT(mx, 1 / std::sqrt(32.0));  // beyond Linear's bound
  // Vectors keep their initialization: LayerNorm ones, in_proj_bias zeros.
  EXPECT_TRUE(equal(t.decoder->norm->named_parameters()["weight"], ones({32})));
  EXPECT_EQ(t.encoder->layers->at<nn::TransformerEncoderLayer>(0)->self_attn->in_proj_bias.abs().max().item<double>(),
            0);
}

TEST(Transformer, SquareSubsequentMask) {
  Tensor m = nn::generate_square_subsequent_mask(3);
  EXPECT_EQ(m.dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(m, {3, 3}, {0, -kInf, -kInf, 0, 0, -kInf, 0, 0, 0}));
  EXPECT_EQ(nn::generate_square_subsequent_mask(2, dtype(kFloat64)).dtype(), kFloat64);
}

// ---- training behaviour ------------------------------------------------------------------------------

TEST(Transformer, GradientsReachEveryParameter) {
  manual_seed(25);
  nn::Transformer t({.d_model = 8,
                     .nhead = 2,
                     .num_encoder_layers = 2,
                     .num_decoder_layers = 2,
                     .dim_feedforward = 16,
                     .dropout = 0.0});
  Tensor src = randn({5, 2, 8}), tgt = randn({4, 2, 8});
  Tensor out = t.forward(src, tgt, {.src_key_padding_mask = bool_at(2, 5, {{0, 4}}), .tgt_is_causal = true});
  EXPECT_EQ(shape_of(out), (std::vector<int64_t>{4, 2, 8}));
  (out * randn({4, 2, 8})).sum().backward();
  for (const auto& [name, p] : t.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_GT(p.grad().abs().sum().item<double>(), 0.0) << name;
  }
}

TEST(Transformer, DropoutOnlyInTraining) {
  manual_seed(26);
  nn::TransformerEncoderLayer l(8, 2, {.dim_feedforward = 16, .dropout = 0.3});
  nn::TransformerEncoderLayer no_dropout(8, 2, {.dim_feedforward = 16, .dropout = 0.0});
  no_dropout.load_state_dict(l.state_dict());
  Tensor x = randn({6, 2, 8});
  Tensor t1 = l(x), t2 = l(x);
  EXPECT_FALSE(allclose(t1, t2));  // training: fresh masks each call
  EXPECT_FALSE(allclose(t1, no_dropout(x)));
  l.eval();
  Tensor e1 = l(x), e2 = l(x);
  EXPECT_TRUE(equal(e1, e2));
  EXPECT_TRUE(allclose(e1, no_dropout(x), 1e-6, 1e-6));
}

// A 1-layer encoder learns, for every position of a sequence of tokens, the largest token of the
// sequence: each position must attend to all others.
TEST(Transformer, EncoderLearnsSequenceMaximum) {
  struct Model : nn::Module {
    Model() {
      emb = register_module("emb", std::make_shared<nn::Embedding>(6, 16));
      enc = register_module(
          "enc", std::make_shared<nn::TransformerEncoderLayer>(
                     16, 2, nn::TransformerLayerOptions{.dim_feedforward = 32, .dropout = 0.0, .batch_first = true}));
      head = register_module("head", std::make_shared<nn::Linear>(16, 6));
    }
    Tensor forward(Tensor tokens) override { return head->forward(enc->forward(emb->forward(tokens))); }
    std::shared_ptr<nn::Embedding> emb;
    std::shared_ptr<nn::TransformerEncoderLayer> enc;
    std::shared_ptr<nn::Linear> head;
  };
  manual_seed(27);
  Tensor tokens = randint(0, 6, {64, 5});                                          // (N, L)
  Tensor target = std::get<0>(tokens.max(1, true)).expand({64, 5}).reshape({-1});  // (N * L)
  Model model;
  optim::Adam opt(model.parameters(), {.lr = 0.01});
  auto loss_fn = [&] { return F::cross_entropy(model(tokens).reshape({-1, 6}), target); };
  double initial = loss_fn().item<double>();
  double final_loss = initial;
  for (int step = 0; step < 150; ++step) {
    Tensor loss = loss_fn();
    opt.zero_grad();
    loss.backward();
    opt.step();
    final_loss = loss.item<double>();
  }
  EXPECT_GT(initial, 1.0);
  EXPECT_LT(final_loss, 0.05) << "initial loss " << initial;
  autograd::NoGradGuard ng;
  Tensor predicted = argmax(model(tokens).reshape({-1, 6}), 1);
  EXPECT_TRUE(equal(predicted, target));
}

// ---- errors -----------------------------------------------------------------------------------------

TEST(Transformer, ErrorsNameTheLayerAndShapes) {
  EXPECT_TRUE(throws_with<ValueError>([] { nn::TransformerEncoderLayer(10, 4); },
                                      {"TransformerEncoderLayer", "d_model (10) must be divisible by nhead (4)"}));
  EXPECT_TRUE(throws_with<ValueError>([] { nn::TransformerDecoderLayer(8, 2, {.activation = "tanh"}); },
                                      {"activation", "\"tanh\""}));
  nn::Transformer t({.d_model = 8, .nhead = 2, .num_encoder_layers = 1, .num_decoder_layers = 1, .dim_feedforward = 8});
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        t(zeros({5, 2, 8}), zeros({4, 3, 8}));
      },
      {"batch number of src and tgt must be equal", "[5, 2, 8]", "[4, 3, 8]"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { t(zeros({5, 2, 8}), zeros({4, 2, 6})); }, {"d_model (8)", "[4, 2, 6]"}));
  nn::TransformerEncoderLayer l(8, 2, {.dim_feedforward = 8});
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        l.forward(zeros({5, 2, 8}), {.src_mask = zeros({4, 4})});
      },
      {"attn_mask of shape (L, S) = [5, 5]", "got [4, 4]"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { l(zeros({5, 2, 7})); }, {"embed_dim 8", "[5, 2, 7]"}));
}
