// torch::nn handles, builder options and their conversion to nabla's layers, by value.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "tests/common/value_helpers.h"

using nabla::testing::shape_of;
using nabla::testing::tensor_is;
using nabla::testing::throws_with;

namespace {
struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc = register_module("fc", torch::nn::Linear(torch::nn::LinearOptions(3, 2).bias(false)));
    scale = register_parameter("scale", torch::ones({1}));
  }
  // A forward of two arguments: the handle's call reaches it (libtorch's call, no hooks).
  torch::Tensor forward(torch::Tensor x, double factor) { return fc(x) * scale * factor; }
  torch::nn::Linear fc{nullptr};
  torch::Tensor scale;
};
TORCH_MODULE(Net);
}  // namespace

TEST(TorchNn, ModuleHandlesRegisterAndCallForward) {
  Net net;
  EXPECT_FALSE(net.is_empty());
  EXPECT_EQ(net->named_parameters().keys(), (std::vector<std::string>{"scale", "fc.weight"}));
  EXPECT_FALSE(net->fc->bias.defined());
  {
    torch::NoGradGuard no_grad;
    net->fc->weight.copy_(torch::tensor({{1.0, 0.0, 0.0}, {0.0, 1.0, 1.0}}));
  }
  EXPECT_TRUE(tensor_is(net(torch::tensor({{1.0, 2.0, 3.0}}), 2.0), {1, 2}, {2, 10}));
  Net empty = nullptr;
  EXPECT_TRUE(empty.is_empty());
  EXPECT_TRUE(throws_with<nabla::ValueError>([&] { empty->parameters(); }, {"empty"}));
  // A torch:: module is an nabla module: nabla's API takes it.
  nabla::nn::Module& base = *net;
  EXPECT_EQ(base.parameters().size(), 2u);
}

TEST(TorchNn, ConvOptionsReachNablasLayer) {
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(1, 4, 3).stride(2).padding(1).bias(false));
  EXPECT_EQ(conv->options.stride()[0], 2);
  EXPECT_EQ(shape_of(conv->weight), (std::vector<int64_t>{4, 1, 3, 3}));
  EXPECT_FALSE(conv->bias.defined());
  EXPECT_EQ(shape_of(conv(torch::zeros({2, 1, 8, 8}))), (std::vector<int64_t>{2, 4, 4, 4}));
  torch::nn::Conv2d reflect(torch::nn::Conv2dOptions(1, 1, 3).padding(1).padding_mode(torch::kReflect));
  EXPECT_EQ(static_cast<nabla::nn::Conv2d&>(*reflect).options.padding_mode, "reflect");
  torch::nn::ConvTranspose2d up(torch::nn::ConvTranspose2dOptions(4, 2, 4).stride(2).padding(1));
  EXPECT_EQ(shape_of(up(torch::zeros({1, 4, 5, 5}))), (std::vector<int64_t>{1, 2, 10, 10}));
  torch::nn::Conv1d c1(torch::nn::Conv1dOptions(2, 3, 5).dilation(2));
  EXPECT_EQ(shape_of(c1(torch::zeros({1, 2, 20}))), (std::vector<int64_t>{1, 3, 12}));
}

TEST(TorchNn, NormalizationDropoutEmbeddingPoolingOptions) {
  torch::nn::BatchNorm2d bn(torch::nn::BatchNorm2dOptions(3).momentum(0.5).affine(false));
  EXPECT_FALSE(bn->weight.defined());
  bn(torch::ones({2, 3, 2, 2}) * 4);
  EXPECT_TRUE(tensor_is(bn->running_mean, {3}, {2, 2, 2}));  // 0.5 * 0 + 0.5 * 4
  torch::nn::BatchNorm1d bn1(5);
  EXPECT_EQ(bn1->num_features, 5);
  torch::nn::LayerNorm ln(torch::nn::LayerNormOptions({4}).eps(1e-3).elementwise_affine(false));
  EXPECT_DOUBLE_EQ(static_cast<nabla::nn::LayerNorm&>(*ln).options.eps, 1e-3);
  EXPECT_FALSE(ln->weight.defined());
  torch::nn::Dropout drop(0.25);
  EXPECT_DOUBLE_EQ(drop->p, 0.25);
  drop->eval();
  torch::Tensor x = torch::ones({3});
  EXPECT_TRUE(torch::equal(drop(x), x));
  torch::nn::Embedding emb(torch::nn::EmbeddingOptions(10, 3).padding_idx(0));
  EXPECT_TRUE(tensor_is(emb(torch::tensor({0})), {1, 3}, {0, 0, 0}));
  torch::nn::MaxPool2d pool(torch::nn::MaxPool2dOptions(2).stride(1));
  EXPECT_EQ(shape_of(pool(torch::zeros({1, 1, 4, 4}))), (std::vector<int64_t>{1, 1, 3, 3}));
  torch::nn::AvgPool2d avg(2);
  EXPECT_TRUE(
      tensor_is(avg(torch::arange(16, torch::kFloat32).view({1, 1, 4, 4})), {1, 1, 2, 2}, {2.5, 4.5, 10.5, 12.5}));
  torch::nn::LeakyReLU leaky(torch::nn::LeakyReLUOptions().negative_slope(0.2));
  EXPECT_TRUE(tensor_is(leaky(torch::tensor({-1.0, 2.0})), {2}, {-0.2, 2.0}));
  torch::nn::Flatten flat(torch::nn::FlattenOptions().start_dim(0));
  EXPECT_EQ(shape_of(flat(torch::zeros({2, 3}))), (std::vector<int64_t>{6}));
}

TEST(TorchNn, RecurrentLayersReturnLibtorchsShapes) {
  torch::nn::LSTM lstm(torch::nn::LSTMOptions(4, 6).num_layers(2).batch_first(true));
  auto [out, state] = lstm(torch::zeros({3, 5, 4}));
  EXPECT_EQ(shape_of(out), (std::vector<int64_t>{3, 5, 6}));
  EXPECT_EQ(shape_of(std::get<0>(state)), (std::vector<int64_t>{2, 3, 6}));
  EXPECT_EQ(shape_of(std::get<1>(state)), (std::vector<int64_t>{2, 3, 6}));
  // The state given back continues the sequence: two halves equal the whole.
  torch::manual_seed(0);
  torch::Tensor seq = torch::randn({1, 4, 4});
  auto whole = lstm(seq);
  auto first = lstm(seq.narrow(1, 0, 2));
  auto second = lstm(seq.narrow(1, 2, 2), std::get<1>(first));
  EXPECT_TRUE(torch::allclose(std::get<0>(second), std::get<0>(whole).narrow(1, 2, 2), 1e-5, 1e-6));
  torch::nn::GRU gru(torch::nn::GRUOptions(4, 3).bidirectional(true));
  auto [gout, gh] = gru(torch::zeros({5, 2, 4}));
  EXPECT_EQ(shape_of(gout), (std::vector<int64_t>{5, 2, 6}));
  EXPECT_EQ(shape_of(gh), (std::vector<int64_t>{2, 2, 3}));
  torch::nn::RNN rnn(torch::nn::RNNOptions(2, 2).nonlinearity(torch::kReLU));
  EXPECT_EQ(rnn->nonlinearity, "relu");
}

TEST(TorchNn, ContainersAndFunctional) {
  torch::nn::Sequential seq(torch::nn::Linear(2, 3), torch::nn::Functional(torch::relu), torch::nn::Linear(3, 1));
  EXPECT_EQ(seq->size(), 3u);
  EXPECT_EQ(shape_of(seq(torch::zeros({4, 2}))), (std::vector<int64_t>{4, 1}));
  torch::nn::Functional leaky(torch::leaky_relu, 0.5);
  EXPECT_TRUE(tensor_is(leaky(torch::tensor({-2.0})), {1}, {-1.0}));
  torch::nn::ModuleList list(torch::nn::Linear(1, 1), torch::nn::ReLU());
  list->push_back(torch::nn::Tanh());
  EXPECT_EQ(list->size(), 3u);
  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> named = {{"a", torch::nn::Linear(2, 2).ptr()},
                                                                                   {"b", torch::nn::Sigmoid().ptr()}};
  torch::nn::ModuleDict dict(named);
  EXPECT_EQ(dict->keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(dict->parameters().size(), 2u);
}

TEST(TorchNn, LossModulesAndFunctionalOptions) {
  namespace F = torch::nn::functional;
  torch::Tensor logits = torch::tensor({{2.0, 0.0}, {0.0, 2.0}}), target = torch::tensor({0, 0});
  torch::nn::CrossEntropyLoss sum_loss(torch::nn::CrossEntropyLossOptions().reduction(torch::kSum));
  torch::nn::CrossEntropyLoss mean_loss;
  EXPECT_NEAR(sum_loss(logits, target).item<double>(), 2 * mean_loss(logits, target).item<double>(), 1e-6);
  EXPECT_NEAR(
      F::nll_loss(F::log_softmax(logits, 1), target, F::NLLLossFuncOptions().reduction(torch::kSum)).item<double>(),
      sum_loss(logits, target).item<double>(), 1e-6);
  torch::nn::MSELoss mse{torch::nn::MSELossOptions(torch::kSum)};
  EXPECT_NEAR(mse(torch::tensor({1.0, 3.0}), torch::tensor({0.0, 0.0})).item<double>(), 10.0, 1e-6);
  torch::Tensor x = torch::ones({100});
  EXPECT_TRUE(torch::equal(F::dropout(x, F::DropoutFuncOptions().p(0.9).training(false)), x));
  EXPECT_TRUE(tensor_is(
      F::max_pool2d(torch::arange(16, torch::kFloat32).view({1, 1, 4, 4}), F::MaxPool2dFuncOptions(2).stride(2)),
      {1, 1, 2, 2}, {5, 7, 13, 15}));
}

TEST(TorchNn, CellsNormsActivationsAndInitTags) {
  torch::nn::LSTMCell cell(torch::nn::LSTMCellOptions(3, 4));
  torch::Tensor x = torch::ones({2, 3});
  auto [h1, c1] = cell(x);
  EXPECT_EQ(shape_of(h1), (std::vector<int64_t>{2, 4}));
  // The state given back is the state nabla's cell computes from it.
  auto [h2, c2] = cell(x, std::make_tuple(h1, c1));
  nabla::nn::LSTMState s = cell->forward_with_state(x, {h1, c1});
  EXPECT_TRUE(torch::allclose(h2, s.h));
  EXPECT_TRUE(torch::allclose(c2, s.c));
  torch::nn::GRUCell gru(3, 4);
  EXPECT_TRUE(torch::allclose(gru(x, h1), static_cast<nabla::nn::GRUCell&>(*gru).forward(x, h1)));
  torch::nn::RNNCell rnn(torch::nn::RNNCellOptions(3, 4).nonlinearity(torch::kReLU).bias(false));
  EXPECT_EQ(rnn->nonlinearity, "relu");
  EXPECT_FALSE(rnn->bias_ih.defined());
  EXPECT_GE(rnn(x).min().item<double>(), 0.0);

  torch::nn::GroupNorm gn(torch::nn::GroupNormOptions(2, 4).eps(1e-3).affine(false));
  EXPECT_FALSE(gn->weight.defined());
  EXPECT_DOUBLE_EQ(static_cast<nabla::nn::GroupNorm&>(*gn).options.eps, 1e-3);
  torch::nn::InstanceNorm2d in(torch::nn::InstanceNorm2dOptions(3).affine(true));
  EXPECT_TRUE(in->weight.defined());
  torch::nn::ELU elu(torch::nn::ELUOptions().alpha(2.0));
  EXPECT_TRUE(tensor_is(elu(torch::tensor({-1.0})), {1}, {2.0 * (std::exp(-1.0) - 1)}, 1e-6));
  torch::nn::GELU gelu(torch::nn::GELUOptions().approximate("tanh"));
  EXPECT_EQ(gelu->approximate, "tanh");
  torch::nn::Softplus sp(torch::nn::SoftplusOptions().beta(2.0));
  EXPECT_TRUE(tensor_is(sp(torch::tensor({0.0})), {1}, {std::log(2.0) / 2}, 1e-6));
  torch::nn::PReLU prelu(torch::nn::PReLUOptions().num_parameters(3).init(0.1));
  EXPECT_TRUE(tensor_is(prelu->weight, {3}, {0.1, 0.1, 0.1}));

  // kaiming_normal_ with libtorch's tags: std = gain / sqrt(fan); kFanOut of a (64, 16) weight is 64.
  torch::manual_seed(1);
  torch::Tensor w = torch::empty({64, 16});
  torch::nn::init::kaiming_normal_(w, 0.0, torch::kFanOut, torch::kReLU);
  torch::manual_seed(1);
  torch::Tensor ref = torch::empty({64, 16});
  nabla::nn::init::kaiming_normal_(ref, 0.0, nabla::nn::init::FanMode::fan_out, nabla::nn::init::Nonlinearity::relu);
  EXPECT_TRUE(torch::equal(w, ref));
  EXPECT_DOUBLE_EQ(torch::nn::init::calculate_gain(torch::kTanh), 5.0 / 3);
  torch::nn::init::kaiming_uniform_(w);  // nabla's defaults, by the same qualified name
  torch::nn::init::xavier_uniform_(w);
  EXPECT_LE(w.abs().max().item<double>(), std::sqrt(6.0 / 80) + 1e-6);
}

TEST(TorchNn, AttentionAndTransformerEncoder) {
  torch::manual_seed(2);
  torch::nn::MultiheadAttention mha(torch::nn::MultiheadAttentionOptions(8, 2).bias(false));
  EXPECT_FALSE(mha->in_proj_bias.defined());
  torch::Tensor q = torch::randn({5, 3, 8}), k = torch::randn({4, 3, 8});
  auto [out, weights] = mha(q, k, k);
  nabla::nn::AttentionOutput ref = mha->forward_attention(q, k, k);
  EXPECT_TRUE(torch::allclose(out, ref.output));
  EXPECT_EQ(shape_of(weights), (std::vector<int64_t>{3, 5, 4}));
  auto no_weights = mha->forward(q, k, k, /*key_padding_mask=*/{}, /*need_weights=*/false);
  EXPECT_FALSE(std::get<1>(no_weights).defined());

  torch::nn::TransformerEncoderLayer layer(
      torch::nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16).dropout(0.0).activation(torch::kGELU));
  EXPECT_EQ(static_cast<nabla::nn::TransformerEncoderLayer&>(*layer).options.activation.name(), "gelu");
  EXPECT_EQ(layer->linear1->out_features, 16);
  torch::Tensor src = torch::randn({6, 2, 8});
  torch::Tensor mask = torch::triu(torch::ones({6, 6}), 1).to(torch::kBool);
  torch::Tensor y = layer(src, mask);
  EXPECT_TRUE(
      torch::allclose(y, static_cast<nabla::nn::TransformerEncoderLayer&>(*layer).forward(src, {.src_mask = mask})));
  torch::nn::TransformerEncoder encoder(torch::nn::TransformerEncoderOptions(layer, 3));
  EXPECT_EQ(encoder->layers->size(), 3u);
  EXPECT_EQ(encoder->parameters().size(), 3 * layer->parameters().size());
  EXPECT_EQ(shape_of(encoder(src, mask)), (std::vector<int64_t>{6, 2, 8}));
  // Each layer starts as a copy of the given one: one layer of the stack equals it.
  torch::nn::TransformerEncoder one(layer, 1);
  EXPECT_TRUE(torch::allclose(one(src, mask), y, 1e-5, 1e-6));
}

TEST(TorchNn, MoreLayersAndTheirOptions) {
  torch::nn::Conv3d c3(torch::nn::Conv3dOptions(1, 2, 3).padding(1));
  EXPECT_EQ(shape_of(c3(torch::zeros({1, 1, 4, 4, 4}))), (std::vector<int64_t>{1, 2, 4, 4, 4}));
  torch::nn::MaxPool1d mp(torch::nn::MaxPool1dOptions(2));
  EXPECT_TRUE(tensor_is(mp(torch::tensor({{{1.0, 3.0, 2.0, 5.0}}})), {1, 1, 2}, {3, 5}));
  torch::nn::AvgPool1d ap(torch::nn::AvgPool1dOptions(2).stride(1));
  EXPECT_TRUE(tensor_is(ap(torch::tensor({{{1.0, 3.0, 2.0}}})), {1, 1, 2}, {2, 2.5}));
  torch::nn::AdaptiveMaxPool2d amp(1);
  EXPECT_TRUE(tensor_is(amp(torch::arange(4, torch::kFloat32).view({1, 1, 2, 2})), {1, 1, 1, 1}, {3}));
  torch::nn::Unflatten un(torch::nn::UnflattenOptions(1, {2, 3}));
  EXPECT_EQ(shape_of(un(torch::zeros({4, 6}))), (std::vector<int64_t>{4, 2, 3}));
  torch::nn::Upsample up(torch::nn::UpsampleOptions().scale_factor(std::vector<double>{2, 2}).mode(torch::kNearest));
  EXPECT_TRUE(tensor_is(up(torch::tensor({{{{1.0, 2.0}}}})), {1, 1, 2, 4}, {1, 1, 2, 2, 1, 1, 2, 2}));
  torch::nn::KLDivLoss kl{torch::nn::KLDivLossOptions(torch::kBatchMean)};
  torch::Tensor logq = torch::log(torch::tensor({{0.5, 0.5}, {0.25, 0.75}})),
                p = torch::tensor({{0.5, 0.5}, {0.5, 0.5}});
  double want = (0.5 * std::log(0.5 / 0.25) + 0.5 * std::log(0.5 / 0.75)) / 2;
  EXPECT_NEAR(kl(logq, p).item<double>(), want, 1e-6);
  torch::nn::HuberLoss huber(torch::nn::HuberLossOptions(torch::kSum).delta(0.5));
  EXPECT_NEAR(huber(torch::tensor({2.0}), torch::tensor({0.0})).item<double>(), 0.5 * (2 - 0.25), 1e-6);
  torch::Tensor vectors = torch::tensor({{1.0, 2.0}, {3.0, 4.0}});
  auto emb = torch::nn::Embedding::from_pretrained(vectors);
  EXPECT_FALSE(emb->weight.requires_grad());
  EXPECT_TRUE(tensor_is(emb(torch::tensor({1})), {1, 2}, {3, 4}));
  auto trainable =
      torch::nn::Embedding::from_pretrained(vectors, torch::nn::EmbeddingFromPretrainedOptions().freeze(false));
  EXPECT_TRUE(trainable->weight.requires_grad());
  torch::nn::ModuleList list(torch::nn::Linear(1, 2));
  EXPECT_EQ(list->ptr<torch::nn::LinearImpl>(0)->out_features, 2);
}

TEST(TorchNn, FunctionalConvPadNormalizeEmbeddingInterpolate) {
  namespace F = torch::nn::functional;
  torch::Tensor x = torch::arange(9, torch::kFloat32).view({1, 1, 3, 3}), w = torch::ones({1, 1, 2, 2});
  EXPECT_TRUE(tensor_is(F::conv2d(x, w, F::Conv2dFuncOptions().stride(1).bias(torch::tensor({1.0f}))), {1, 1, 2, 2},
                        {9, 13, 21, 25}));
  EXPECT_TRUE(tensor_is(F::pad(torch::tensor({1.0, 2.0}), F::PadFuncOptions({1, 2}).value(9)), {5}, {9, 1, 2, 9, 9}));
  EXPECT_TRUE(tensor_is(F::pad(torch::tensor({{{1.0, 2.0, 3.0}}}), F::PadFuncOptions({1, 1}).mode(torch::kReflect)),
                        {1, 1, 5}, {2, 1, 2, 3, 2}));
  EXPECT_TRUE(
      tensor_is(F::normalize(torch::tensor({{3.0, 4.0}}), F::NormalizeFuncOptions().dim(1)), {1, 2}, {0.6, 0.8}));
  EXPECT_TRUE(
      tensor_is(F::embedding(torch::tensor({1, 0}), torch::tensor({{1.0, 2.0}, {3.0, 4.0}})), {2, 2}, {3, 4, 1, 2}));
  torch::Tensor ln = F::layer_norm(torch::tensor({{1.0, 3.0}}), F::LayerNormFuncOptions({2}).eps(0.0));
  EXPECT_TRUE(tensor_is(ln, {1, 2}, {-1, 1}, 1e-5));
  EXPECT_EQ(
      shape_of(F::interpolate(
          torch::zeros({1, 1, 2, 2}),
          F::InterpolateFuncOptions().size(std::vector<int64_t>{4, 6}).mode(torch::kBilinear).align_corners(false))),
      (std::vector<int64_t>{1, 1, 4, 6}));
  EXPECT_TRUE(tensor_is(F::one_hot(torch::tensor({1}), 3), {1, 3}, {0, 1, 0}));
}

TEST(TorchNn, EmbeddingBagModes) {
  torch::nn::EmbeddingBag bag(torch::nn::EmbeddingBagOptions(3, 2).mode(torch::kSum));
  {
    torch::NoGradGuard no_grad;
    bag->weight.copy_(torch::tensor({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}));
  }
  EXPECT_TRUE(tensor_is(bag(torch::tensor({0, 1, 2}), torch::tensor({0, 2})), {2, 2}, {4, 6, 5, 6}));
  torch::nn::EmbeddingBag maxbag(torch::nn::EmbeddingBagOptions(3, 2).mode(torch::kMax));
  {
    torch::NoGradGuard no_grad;
    maxbag->weight.copy_(torch::tensor({{1.0, 8.0}, {3.0, 4.0}, {5.0, 6.0}}));
  }
  EXPECT_TRUE(tensor_is(maxbag(torch::tensor({{0, 1}, {1, 2}})), {2, 2}, {3, 8, 5, 6}));
}
