// nn::Module: registration, traversal, modes, devices and dtypes, state dicts, hooks, printing,
// and the containers.
#include <gtest/gtest.h>

#include <utility>

#include "nabla.h"

using namespace nabla;

namespace {

struct Net : nn::Module {
  Net() {
    features = register_module("features", std::make_shared<nn::Sequential>(nn::Conv2d(1, 2, 3), nn::BatchNorm2d(2)));
    classifier = register_module("classifier", std::make_shared<nn::Linear>(2, 3));
    scale = register_parameter("scale", ones({1}));
    register_buffer("counter", zeros({}, dtype(kInt64)));
    register_buffer("scratch", zeros({2}), /*persistent=*/false);
  }
  Tensor forward(Tensor x) override {
    Tensor h = (*features)(x).mean({2, 3});
    return (*classifier)(h)*scale;
  }
  std::shared_ptr<nn::Sequential> features;
  std::shared_ptr<nn::Linear> classifier;
  Tensor scale;
};

struct Mlp : nn::Module {
  Mlp() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 3));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(3, 2));
  }
  Tensor forward(Tensor x) override { return fc2->forward(relu(fc1->forward(x))); }
  std::shared_ptr<nn::Linear> fc1, fc2;
};

std::vector<std::string> keys_of(const nn::OrderedDict<Tensor>& d) { return d.keys(); }

}  // namespace

TEST(NnModule, ParametersBuffersAndChildrenInRegistrationOrder) {
  auto net = std::make_shared<Net>();
  EXPECT_EQ(keys_of(net->named_parameters()),
            (std::vector<std::string>{"scale", "features.0.weight", "features.0.bias", "features.1.weight",
                                      "features.1.bias", "classifier.weight", "classifier.bias"}));
  EXPECT_EQ(net->parameters().size(), 7u);
  EXPECT_EQ(net->parameters(/*recurse=*/false).size(), 1u);
  EXPECT_EQ(keys_of(net->named_buffers()),
            (std::vector<std::string>{"counter", "scratch", "features.1.running_mean", "features.1.running_var",
                                      "features.1.num_batches_tracked"}));
  EXPECT_EQ(net->named_children().keys(), (std::vector<std::string>{"features", "classifier"}));
  EXPECT_EQ(net->named_modules().keys(),
            (std::vector<std::string>{"", "features", "features.0", "features.1", "classifier"}));
  auto mods = net->modules();
  ASSERT_EQ(mods.size(), 5u);
  EXPECT_EQ(mods[0].get(), net.get());
  EXPECT_EQ(mods[4]->name(), "Linear");
  EXPECT_EQ(net->modules(/*include_self=*/false).size(), 4u);
  for (const Tensor& p : net->parameters()) EXPECT_TRUE(p.requires_grad());
  for (const Tensor& b : net->buffers()) EXPECT_FALSE(b.requires_grad());
}

TEST(NnModule, StateDictKeysAreDottedAndSkipNonPersistentBuffers) {
  Net net;  // works without a shared_ptr too
  EXPECT_EQ(keys_of(net.state_dict()),
            (std::vector<std::string>{"scale", "counter", "features.0.weight", "features.0.bias", "features.1.weight",
                                      "features.1.bias", "features.1.running_mean", "features.1.running_var",
                                      "features.1.num_batches_tracked", "classifier.weight", "classifier.bias"}));
  // The entries share storage with the parameters but carry no autograd state.
  nn::StateDict sd = net.state_dict();
  EXPECT_FALSE(sd["scale"].requires_grad());
  EXPECT_EQ(sd["scale"].data_ptr(), net.scale.data_ptr());
  EXPECT_EQ(net.modules().size(), 5u);  // non-owning `this`
}

TEST(NnModule, LoadStateDictCopiesValuesAndConvertsDtype) {
  manual_seed(1);
  Mlp a, b;
  EXPECT_FALSE(a.fc1->weight.equal(b.fc1->weight));
  nn::StateDict sd = a.state_dict();
  // From float64 copies (as a checkpoint written in another dtype would be).
  nn::StateDict sd64;
  for (const auto& [k, v] : sd) sd64.insert(k, v.to(kFloat64));
  Tensor handle = b.fc1->weight;
  auto res = b.load_state_dict(sd64);
  EXPECT_TRUE(res.missing_keys.empty() && res.unexpected_keys.empty());
  EXPECT_TRUE(b.fc1->weight.equal(a.fc1->weight));
  EXPECT_EQ(b.fc1->weight.dtype(), kFloat32);
  EXPECT_TRUE(handle.is_same(b.fc1->weight));  // loaded in place
  EXPECT_TRUE(b.fc1->weight.requires_grad());
  Tensor x = randn({5, 4});
  EXPECT_TRUE(a(x).equal(b(x)));
}

TEST(NnModule, LoadStateDictReportsMissingUnexpectedAndShapeMismatch) {
  Mlp m;
  nn::StateDict sd = m.state_dict();
  sd.erase("fc2.bias");
  sd.insert("fc3.weight", zeros({1}));
  try {
    m.load_state_dict(sd);
    FAIL() << "expected an error";
  } catch (const ValueError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("Error(s) in loading state_dict for Mlp"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Missing key(s) in state_dict: \"fc2.bias\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("Unexpected key(s) in state_dict: \"fc3.weight\""), std::string::npos) << msg;
  }
  // Non-strict: the keys are reported, the rest is loaded.
  sd["fc1.weight"].fill_(0.5);
  auto res = m.load_state_dict(sd, /*strict=*/false);
  EXPECT_EQ(res.missing_keys, std::vector<std::string>{"fc2.bias"});
  EXPECT_EQ(res.unexpected_keys, std::vector<std::string>{"fc3.weight"});
  EXPECT_TRUE(allclose(m.fc1->weight, full({3, 4}, 0.5)));
  // A shape mismatch is an error even when not strict, and nothing is copied.
  nn::StateDict bad = m.state_dict();
  bad["fc1.bias"] = zeros({4});
  Tensor before = m.fc1->weight.clone();
  bad["fc1.weight"] = zeros({3, 4});
  try {
    m.load_state_dict(bad, false);
    FAIL() << "expected an error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("size mismatch for fc1.bias: copying a param with shape [4] from "
                                         "checkpoint, the shape in current model is [3]."),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(m.fc1->weight.equal(before));
}

TEST(NnModule, TrainEvalPropagates) {
  Net net;
  EXPECT_TRUE(net.is_training());
  net.eval();
  for (auto& m : net.modules()) EXPECT_FALSE(m->is_training()) << m->name();
  net.train();
  for (auto& m : net.modules()) EXPECT_TRUE(m->is_training()) << m->name();
}

TEST(NnModule, ToDtypeChangesTensorsInPlace) {
  auto net = std::make_shared<Net>();
  std::vector<Tensor> params = net->parameters();  // what an optimizer would hold
  Tensor x = randn({2, 1, 4, 4});
  (*net)(x).sum().backward();
  ASSERT_TRUE(net->classifier->weight.grad().defined());
  net->to(kFloat64);
  for (const Tensor& p : params) {
    EXPECT_EQ(p.dtype(), kFloat64);
    EXPECT_TRUE(p.requires_grad());
    if (p.grad().defined()) EXPECT_EQ(p.grad().dtype(), kFloat64);
  }
  EXPECT_TRUE(params.back().is_same(net->classifier->bias));
  EXPECT_EQ(net->features->at<nn::BatchNorm2d>(1)->num_batches_tracked.dtype(), kInt64);  // not floating
  EXPECT_EQ(net->features->at<nn::BatchNorm2d>(1)->running_mean.dtype(), kFloat64);
  // Training works in the new dtype, gradients accumulate in it.
  net->zero_grad();
  Tensor y = (*net)(x.to(kFloat64));
  EXPECT_EQ(y.dtype(), kFloat64);
  y.sum().backward();
  EXPECT_EQ(net->classifier->weight.grad().dtype(), kFloat64);
  EXPECT_THROW(net->to(kInt64), DTypeError);
  net->to(kCPU);  // a no-op on the CPU
  EXPECT_EQ(net->scale.dtype(), kFloat64);
}

// module.half() / module.bfloat16() as PyTorch's: every floating parameter and buffer converted in
// place (integer buffers kept), the module returned, and it trains in the new dtype.
TEST(NnModule, HalfAndBfloat16ConvertInPlace) {
  for (DType dt : {kFloat16, kBFloat16}) {
    auto net = std::make_shared<Net>();
    std::vector<Tensor> params = net->parameters();
    nn::Module& same = dt == kFloat16 ? net->half() : net->bfloat16();
    EXPECT_EQ(&same, net.get());
    for (const Tensor& p : params) EXPECT_EQ(p.dtype(), dt) << dtype_name(dt);
    EXPECT_EQ(net->features->at<nn::BatchNorm2d>(1)->num_batches_tracked.dtype(), kInt64);
    EXPECT_EQ(net->features->at<nn::BatchNorm2d>(1)->running_var.dtype(), dt);
    Tensor y = (*net)(randn({2, 1, 4, 4}).to(dt));
    EXPECT_EQ(y.dtype(), dt);
    y.to(kFloat32).sum().backward();
    EXPECT_EQ(net->classifier->weight.grad().dtype(), dt);
  }
}

TEST(NnModule, ZeroGradAndRequiresGrad) {
  Mlp m;
  m(randn({2, 4})).sum().backward();
  for (const Tensor& p : m.parameters()) EXPECT_TRUE(p.grad().defined());
  m.zero_grad(/*set_to_none=*/false);
  for (const Tensor& p : m.parameters()) EXPECT_EQ(p.grad().abs().sum().item<double>(), 0.0);
  m.zero_grad();
  for (const Tensor& p : m.parameters()) EXPECT_FALSE(p.grad().defined());
  m.requires_grad_(false);
  for (const Tensor& p : m.parameters()) EXPECT_FALSE(p.requires_grad());
  EXPECT_FALSE(m(randn({2, 4})).requires_grad());
}

TEST(NnModule, RegistrationErrors) {
  nn::Module m("Custom");
  m.register_parameter("w", zeros({2}));
  EXPECT_THROW(m.register_parameter("w", zeros({2})), ValueError);
  EXPECT_THROW(m.register_buffer("w", zeros({2})), ValueError);
  EXPECT_THROW(m.register_parameter("a.b", zeros({2})), ValueError);
  EXPECT_THROW(m.register_parameter("", zeros({2})), ValueError);
  EXPECT_THROW(m.register_parameter("i", zeros({2}, dtype(kInt64))), DTypeError);
  EXPECT_NO_THROW(m.register_parameter("i2", zeros({2}, dtype(kInt64)), /*requires_grad=*/false));
  EXPECT_THROW(m.register_module("lin", std::shared_ptr<nn::Linear>()), ValueError);
  // An undefined parameter is registered but absent everywhere (like PyTorch's None).
  m.register_parameter("absent", Tensor());
  EXPECT_EQ(m.state_dict().size(), 2u);
  // Calling a module without forward names it.
  try {
    m(zeros({1}));
    FAIL();
  } catch (const NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("Custom: forward(Tensor) is not implemented"), std::string::npos);
  }
  // A parameter with history is stored detached (as a leaf).
  Tensor a = ones({2}, requires_grad());
  Tensor& p = m.register_parameter("from_expr", a * 2);
  EXPECT_TRUE(p.is_leaf());
  EXPECT_TRUE(p.requires_grad());
}

TEST(NnModule, SharedModulesAndParametersAreListedOnce) {
  auto shared = std::make_shared<nn::Linear>(2, 2);
  nn::Sequential seq(shared, nn::ReLU(), shared);
  EXPECT_EQ(seq.parameters().size(), 2u);
  EXPECT_EQ(seq.modules().size(), 3u);  // seq, the shared Linear, ReLU
  // state_dict keeps every name, as PyTorch's does.
  EXPECT_EQ(keys_of(seq.state_dict()), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
}

TEST(NnModule, ForwardHooks) {
  auto lin = std::make_shared<nn::Linear>(2, 2);
  nn::Sequential seq(lin, nn::ReLU());
  int pre_calls = 0, post_calls = 0;
  auto h1 = lin->register_forward_pre_hook([&](nn::Module& m, std::vector<Tensor>& in) {
    ++pre_calls;
    EXPECT_EQ(m.name(), "Linear");
    in[0] = in[0] * 2;  // modify the input
  });
  auto h2 = lin->register_forward_hook([&](nn::Module&, const std::vector<Tensor>& in, Tensor& out) {
    ++post_calls;
    EXPECT_EQ(in.size(), 1u);
    out = out + 100;  // replace the output
  });
  Tensor x = tensor({{1.0f, -1.0f}});
  Tensor y = seq(x);  // hooks run for children called by Sequential
  EXPECT_TRUE(allclose(y, relu(linear(x * 2, lin->weight, lin->bias) + 100)));
  EXPECT_EQ(pre_calls, 1);
  EXPECT_EQ(post_calls, 1);
  // forward() directly skips hooks, as in PyTorch.
  EXPECT_TRUE(allclose(lin->forward(x), linear(x, lin->weight, lin->bias)));
  EXPECT_EQ(pre_calls, 1);
  h1.remove();
  h2.remove();
  EXPECT_TRUE(allclose(seq(x), relu(linear(x, lin->weight, lin->bias))));
  EXPECT_EQ(post_calls, 1);
  // A hook that removes itself while running, and a handle that outlives its module.
  nn::RemovableHandle self_handle;
  int once = 0;
  self_handle = lin->register_forward_hook([&](nn::Module&, const std::vector<Tensor>&, Tensor&) {
    ++once;
    self_handle.remove();
  });
  (*lin)(x);
  (*lin)(x);
  EXPECT_EQ(once, 1);
  nn::RemovableHandle dangling;
  {
    nn::ReLU r;
    dangling = r.register_forward_hook([](nn::Module&, const std::vector<Tensor>&, Tensor&) {});
  }
  EXPECT_NO_THROW(dangling.remove());
}

TEST(NnModule, HooksOnTwoInputModules) {
  nn::Bilinear bl(2, 3, 1);
  std::vector<Shape> seen;
  bl.register_forward_pre_hook([&](nn::Module&, std::vector<Tensor>& in) {
    for (const Tensor& t : in) seen.push_back(t.sizes());
  });
  bl(randn({4, 2}), randn({4, 3}));
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (Shape{4, 3}));
}

TEST(NnModule, PrintsLikePyTorch) {
  nn::Sequential model(nn::Conv2d(1, 8, 3, {.padding = 1}), nn::BatchNorm2d(8), nn::ReLU(), nn::MaxPool2d(2),
                       nn::Dropout(0.25), nn::Flatten(), nn::Linear(8 * 14 * 14, 10));
  EXPECT_EQ(model.repr(),
            "Sequential(\n"
            "  (0): Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
            "  (1): BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n"
            "  (2): ReLU()\n"
            "  (3): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
            "  (4): Dropout(p=0.25, inplace=False)\n"
            "  (5): Flatten(start_dim=1, end_dim=-1)\n"
            "  (6): Linear(in_features=1568, out_features=10, bias=True)\n"
            ")");
  // What PyTorch 1.13 prints for nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1,
  // groups=2, bias=False) and nn.Conv3d(2, 4, (1, 3, 3), dilation=2).
  EXPECT_EQ(nn::ConvTranspose2d({.in_channels = 4,
                                 .out_channels = 6,
                                 .kernel_size = 3,
                                 .stride = 2,
                                 .padding = 1,
                                 .output_padding = 1,
                                 .groups = 2,
                                 .bias = false})
                .extra_repr(),
            "4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1), groups=2, bias=False");
  EXPECT_EQ(nn::Conv3d(2, 4, {1, 3, 3}, {.dilation = 2}).extra_repr(),
            "2, 4, kernel_size=(1, 3, 3), stride=(1, 1, 1), dilation=(2, 2, 2)");
  Mlp mlp;
  std::ostringstream os;
  os << mlp;
  EXPECT_EQ(os.str(),
            "Mlp(\n"
            "  (fc1): Linear(in_features=4, out_features=3, bias=True)\n"
            "  (fc2): Linear(in_features=3, out_features=2, bias=True)\n"
            ")");
  auto line = [](const nn::Module& m) { return m.repr(); };
  EXPECT_EQ(line(nn::LayerNorm({10})), "LayerNorm((10,), eps=1e-05, elementwise_affine=True)");
  EXPECT_EQ(line(nn::LayerNorm({3, 4}, {.eps = 1e-6})), "LayerNorm((3, 4), eps=1e-06, elementwise_affine=True)");
  EXPECT_EQ(line(nn::GroupNorm(2, 6)), "GroupNorm(2, 6, eps=1e-05, affine=True)");
  EXPECT_EQ(line(nn::Embedding(10, 3, {.padding_idx = 0})), "Embedding(10, 3, padding_idx=0)");
  EXPECT_EQ(line(nn::Embedding(10, 3)), "Embedding(10, 3)");
  EXPECT_EQ(line(nn::Bilinear(2, 3, 4)), "Bilinear(in1_features=2, in2_features=3, out_features=4, bias=True)");
  EXPECT_EQ(line(nn::ConvTranspose2d(2, 4, 3, {.stride = 2, .output_padding = 1})),
            "ConvTranspose2d(2, 4, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1))");
  EXPECT_EQ(line(nn::ConvTranspose2d(2, 4, {3, 5}, {.stride = {2, 1}, .padding = {1, 2}, .bias = false})),
            "ConvTranspose2d(2, 4, kernel_size=(3, 5), stride=(2, 1), padding=(1, 2), bias=False)");
  EXPECT_EQ(line(nn::Conv2d(4, 8, {3, 5}, {.stride = 2, .dilation = {1, 2}, .groups = 2})),
            "Conv2d(4, 8, kernel_size=(3, 5), stride=(2, 2), dilation=(1, 2), groups=2)");
  EXPECT_EQ(line(nn::Conv1d(2, 3, 3, {.bias = false})), "Conv1d(2, 3, kernel_size=(3,), stride=(1,), bias=False)");
  EXPECT_EQ(line(nn::Conv3d(4, 8, {3, 1, 2}, {.padding = 1, .dilation = {2, 1, 1}, .groups = 4})),
            "Conv3d(4, 8, kernel_size=(3, 1, 2), stride=(1, 1, 1), padding=(1, 1, 1), dilation=(2, 1, 1), groups=4)");
  EXPECT_EQ(line(nn::AvgPool2d(2)), "AvgPool2d(kernel_size=2, stride=2, padding=0)");
  EXPECT_EQ(line(nn::AvgPool2d({2, 3}, {.stride = 1})), "AvgPool2d(kernel_size=(2, 3), stride=1, padding=0)");
  EXPECT_EQ(line(nn::MaxPool2d(3, {.stride = 2, .padding = 1, .ceil_mode = true})),
            "MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=True)");
  EXPECT_EQ(line(nn::AdaptiveAvgPool2d(1)), "AdaptiveAvgPool2d(output_size=1)");
  EXPECT_EQ(line(nn::AdaptiveAvgPool2d({2, 3})), "AdaptiveAvgPool2d(output_size=(2, 3))");
  EXPECT_EQ(line(nn::LeakyReLU(0.2)), "LeakyReLU(negative_slope=0.2)");
  EXPECT_EQ(line(nn::GELU("tanh")), "GELU(approximate='tanh')");
  EXPECT_EQ(line(nn::ELU()), "ELU(alpha=1.0)");
  EXPECT_EQ(line(nn::Softmax(1)), "Softmax(dim=1)");
  EXPECT_EQ(line(nn::LogSoftmax(-1)), "LogSoftmax(dim=-1)");
  EXPECT_EQ(line(nn::Unflatten(1, {2, 5})), "Unflatten(dim=1, unflattened_size=(2, 5))");
  EXPECT_EQ(line(nn::BatchNorm1d(5, {.momentum = std::nullopt, .affine = false})),
            "BatchNorm1d(5, eps=1e-05, momentum=None, affine=False, track_running_stats=True)");
  EXPECT_EQ(line(nn::Dropout2d(0.1)), "Dropout2d(p=0.1, inplace=False)");
  EXPECT_EQ(line(nn::Dropout(1e-5)), "Dropout(p=1e-05, inplace=False)");
  EXPECT_EQ(line(nn::Linear(3, 2, {.bias = false})), "Linear(in_features=3, out_features=2, bias=False)");
  EXPECT_EQ(line(nn::Identity()), "Identity()");
  EXPECT_EQ(line(nn::Flatten(0, 2)), "Flatten(start_dim=0, end_dim=2)");
  EXPECT_EQ(line(nn::CrossEntropyLoss()), "CrossEntropyLoss()");
  nn::ModuleDict md;
  md.insert("a", nn::Linear(1, 1));
  md.insert("b", nn::Tanh());
  EXPECT_EQ(md.repr(),
            "ModuleDict(\n"
            "  (a): Linear(in_features=1, out_features=1, bias=True)\n"
            "  (b): Tanh()\n"
            ")");
}

TEST(NnModule, PythonFloatFormatting) {
  EXPECT_EQ(nn::repr_double(0.1), "0.1");
  EXPECT_EQ(nn::repr_double(1.0), "1.0");
  EXPECT_EQ(nn::repr_double(1e-5), "1e-05");
  EXPECT_EQ(nn::repr_double(0.0001), "0.0001");
  EXPECT_EQ(nn::repr_double(123456.0), "123456.0");
  EXPECT_EQ(nn::repr_double(1e16), "1e+16");
  EXPECT_EQ(nn::repr_double(-2.5e-7), "-2.5e-07");
  EXPECT_EQ(nn::repr_double(0.30000000000000004), "0.30000000000000004");
}

TEST(NnContainers, SequentialModuleListModuleDict) {
  nn::Sequential seq(nn::Linear(4, 3), nn::ReLU(), std::make_shared<nn::Linear>(3, 2));
  EXPECT_EQ(seq.size(), 3u);
  Tensor x = randn({5, 4});
  auto l0 = seq.at<nn::Linear>(0);
  auto l2 = seq.at<nn::Linear>(2);
  EXPECT_TRUE(allclose(seq(x), linear(relu(linear(x, l0->weight, l0->bias)), l2->weight, l2->bias)));
  EXPECT_THROW(seq.at<nn::Conv2d>(0), ValueError);
  EXPECT_THROW(seq[3], IndexError);
  int count = 0;
  for (const auto& m : seq) count += m != nullptr;
  EXPECT_EQ(count, 3);
  seq.push_back(nn::Sigmoid());
  EXPECT_EQ(seq.named_children().keys().back(), "3");

  nn::Sequential named(nn::OrderedDict<std::shared_ptr<nn::Module>>{{"conv", std::make_shared<nn::Conv2d>(1, 1, 1)},
                                                                    {"act", std::make_shared<nn::ReLU>()}});
  EXPECT_EQ(keys_of(named.state_dict()), (std::vector<std::string>{"conv.weight", "conv.bias"}));

  nn::ModuleList list(nn::Linear(2, 2), nn::Linear(2, 2));
  list.push_back(nn::Tanh());
  EXPECT_EQ(list.size(), 3u);
  EXPECT_EQ(list.parameters().size(), 4u);
  EXPECT_THROW(list(x), NotImplemented);  // a list has no forward
  nn::ModuleList more;
  more.extend(list);
  EXPECT_EQ(more.size(), 3u);

  nn::ModuleDict dict;
  dict.insert("enc", nn::Linear(2, 3));
  dict.insert("act", std::make_shared<nn::GELU>());
  EXPECT_TRUE(dict.contains("enc"));
  EXPECT_EQ(dict.at<nn::Linear>("enc")->out_features, 3);
  EXPECT_THROW(dict["dec"]->name(), IndexError);
  EXPECT_THROW(std::as_const(dict)["dec"], IndexError);
  EXPECT_THROW(dict.insert("enc", nn::ReLU()), ValueError);
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"enc", "act"}));
}

TEST(NnContainers, ReplaceModule) {
  Mlp m;
  auto head = m.replace_module("fc2", std::make_shared<nn::Linear>(3, 5));
  m.fc2 = head;
  EXPECT_EQ(m(randn({1, 4})).sizes(), (Shape{1, 5}));
  EXPECT_EQ(m.state_dict()["fc2.weight"].sizes(), (Shape{5, 3}));
  EXPECT_THROW(m.replace_module("nope", head), IndexError);
}

// A container's children are one list, so a replaced child is the one forward
// calls (the transfer-learning step "replace the classifier's last layer").
TEST(NnContainers, ReplacedChildIsTheOneForwardCallsAndTrains) {
  nn::Sequential classifier(nn::Dropout(0.2), nn::Linear(8, 10));
  Tensor x = randn({2, 8});
  ASSERT_EQ(classifier(x).sizes(), (Shape{2, 10}));
  auto head = classifier.replace_module("1", std::make_shared<nn::Linear>(8, 2));
  classifier.eval();
  EXPECT_EQ(classifier(x).sizes(), (Shape{2, 2}));
  EXPECT_TRUE(allclose(classifier(x), linear(x, head->weight, head->bias)));
  EXPECT_TRUE(classifier[1].ptr() == head);
  EXPECT_EQ(classifier.at<nn::Linear>(1)->out_features, 2);
  // parameters(), what the optimizer is given, are the new head's, and training moves them.
  auto params = classifier.parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_TRUE(params[0].is_same(head->weight));
  classifier.train();
  optim::SGD sgd(params, {.lr = 0.1});
  Tensor before = head->weight.clone();
  nn::functional::cross_entropy(classifier(x), tensor(std::vector<int64_t>{0, 1}, kInt64)).backward();
  sgd.step();
  EXPECT_FALSE(allclose(head->weight, before));
  EXPECT_NE(classifier.repr().find("(1): Linear(in_features=8, out_features=2, bias=True)"), std::string::npos);

  // Assignment by index, as Python's classifier[1] = ...: a shared_ptr, a temporary, a handle;
  // negative indices count from the end.
  classifier[1] = std::make_shared<nn::Linear>(8, 3);
  EXPECT_EQ(classifier(x).sizes(), (Shape{2, 3}));
  classifier[-1] = nn::Linear(8, 4);
  EXPECT_EQ(classifier(x).sizes(), (Shape{2, 4}));
  EXPECT_EQ(classifier.state_dict()["1.weight"].sizes(), (Shape{4, 8}));
  nn::ModuleHolder<nn::Linear> five(8, 5);
  classifier[1] = five;
  EXPECT_EQ(classifier(x).sizes(), (Shape{2, 5}));
  EXPECT_TRUE(classifier[1] == five.ptr());
  EXPECT_THROW(classifier[2] = nn::ReLU(), IndexError);
  EXPECT_THROW(classifier[-3], IndexError);
  EXPECT_EQ(classifier[-2].as<nn::Dropout>(), classifier.at<nn::Dropout>(0).get());
  EXPECT_EQ(classifier[0].as<nn::Linear>(), nullptr);
  std::shared_ptr<nn::Module> kept = classifier[1];  // a slot read into a shared_ptr keeps the module
  classifier[1] = nn::Identity();
  classifier.eval();
  EXPECT_EQ(kept.get(), five.get());
  EXPECT_TRUE(allclose(classifier(x), x));
  EXPECT_EQ(classifier.parameters().size(), 0u);
  classifier[0] = classifier[1];  // the same module twice: listed once
  EXPECT_EQ(classifier.named_modules(false).size(), 1u);

  // A container inside a model, reached through the model's handle (features is a shared_ptr).
  Net net;
  (*net.features)[1] = nn::Identity();
  EXPECT_EQ(keys_of(net.state_dict()),
            (std::vector<std::string>{"scale", "counter", "features.0.weight", "features.0.bias", "classifier.weight",
                                      "classifier.bias"}));

  // ModuleList and ModuleDict likewise; assigning a new key of a ModuleDict adds it.
  nn::ModuleList list(nn::Linear(2, 2), nn::Tanh());
  list[0] = nn::Linear(2, 7);
  EXPECT_EQ(list.at<nn::Linear>(0)->out_features, 7);
  EXPECT_EQ(list.parameters()[0].sizes(), (Shape{7, 2}));
  int seen = 0;
  for (const auto& m : list) seen += m->as<nn::Tanh>() != nullptr;
  EXPECT_EQ(seen, 1);
  nn::ModuleDict dict;
  dict["enc"] = nn::Linear(2, 3);
  dict["enc"] = std::make_shared<nn::Linear>(2, 6);
  dict["act"] = nn::GELU();
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"enc", "act"}));
  EXPECT_EQ(dict.at<nn::Linear>("enc")->out_features, 6);
  EXPECT_EQ(dict.parameters()[0].sizes(), (Shape{6, 2}));
}

// What libtorch users write compiles.
TEST(NnContainers, HandleSpellingsOfLibtorch) {
  auto s = nn::Sequential(nn::Linear(2, 3), nn::ReLU());  // a value, used with a handle's spelling
  Tensor x = randn({4, 2});
  EXPECT_EQ(s->size(), 2u);
  EXPECT_TRUE(allclose(s->forward(x), (*s)(x)));
  EXPECT_EQ((*s).parameters().size(), 2u);
  auto l = nn::ModuleList(nn::Linear(2, 2));
  EXPECT_EQ(l->size(), 1u);
  nn::ModuleDict d;
  d->insert("a", nn::ReLU());
  EXPECT_TRUE(d->contains("a"));
  // Module::as<T>(), as libtorch's.
  nn::Module& base = s;
  EXPECT_EQ(base.as<nn::Sequential>(), &s);
  EXPECT_EQ(base.as<nn::Linear>(), nullptr);
  // replace_module takes a temporary, a shared_ptr or a handle.
  Mlp m;
  m.fc2 = m.replace_module("fc2", nn::Linear(3, 5));
  EXPECT_EQ(m(randn({1, 4})).sizes(), (Shape{1, 5}));
  nn::ModuleHolder<nn::Linear> h(3, 6);
  m.fc2 = m.replace_module("fc2", h).ptr();
  EXPECT_EQ(m(randn({1, 4})).sizes(), (Shape{1, 6}));
  // Pooling in PyTorch's positional order: (kernel, stride[, padding[, dilation]]).
  EXPECT_EQ(nn::MaxPool2d(2, 2).repr(), nn::MaxPool2d(2, {.stride = 2}).repr());
  EXPECT_EQ(nn::MaxPool2d(3, 2, 1).repr(),
            "MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=False)");
  EXPECT_EQ(nn::MaxPool2d(3, 1).stride[0], 1);
  EXPECT_EQ(nn::AvgPool2d(3, 2, 1).repr(), "AvgPool2d(kernel_size=3, stride=2, padding=1)");
  EXPECT_EQ(nn::MaxPool1d(4, 2).stride, 2);
  EXPECT_EQ(nn::AvgPool1d(4, 1, 2).options.padding, 2);
  Tensor img = randn({1, 1, 6, 6});
  EXPECT_TRUE(allclose(nn::MaxPool2d(2, 2)(img), max_pool2d(img, {2, 2}, {2, 2})));
}

// A module member registered by handle is the one eval() reaches (a named
// module by value does not compile: tests/compile_fail/register_member_by_value.cpp).
TEST(NnModule, MembersRegisteredByHandleFollowEval) {
  struct WithDropout : nn::Module {
    WithDropout() {
      drop = register_module("drop", std::make_shared<nn::Dropout>(0.5));
      drop2 = register_module("drop2", nn::Dropout(0.5));  // a temporary: the handle returned is the module
    }
    Tensor forward(Tensor x) override { return (*drop2)((*drop)(x)); }
    std::shared_ptr<nn::Dropout> drop, drop2;
  };
  WithDropout m;
  Tensor x = ones({1000});
  EXPECT_GT((m(x) == 0).sum().item<int64_t>(), 100);
  m.eval();
  EXPECT_FALSE(m.drop->is_training());
  EXPECT_FALSE(m.drop2->is_training());
  EXPECT_TRUE(equal(m(x), x));  // nothing zeroed in eval mode
}

TEST(NnModule, CopiesShareTensorsButNotHooks) {
  nn::Linear a(2, 2);
  int calls = 0;
  a.register_forward_hook([&](nn::Module&, const std::vector<Tensor>&, Tensor&) { ++calls; });
  nn::Linear b = a;
  EXPECT_TRUE(b.weight.is_same(a.weight));  // the same parameters (handles are copied)
  b.register_forward_hook([&](nn::Module&, const std::vector<Tensor>&, Tensor&) { calls += 10; });
  a(zeros({1, 2}));
  EXPECT_EQ(calls, 1);  // a's hooks are its own
  b(zeros({1, 2}));
  EXPECT_EQ(calls, 12);  // b runs its copy of a's hook (+1) and its own (+10)
}
