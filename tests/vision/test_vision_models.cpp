// The model zoo against torchvision: each architecture's state dict names and shapes, parameter
// count and eval-mode output (1e-4 relative), and training-mode gradients of resnet18 and
// mobilenet_v2; loading weights from PyTorch and safetensors files. References come from
// tests/vision/make_reference.py (see vision_reference.h).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "nabla.h"
#include "vision_reference.h"

namespace nabla::testing {
namespace {

using nabla_test::vision::reference_file;
using nabla_test::vision::relative_error;
using nabla_test::vision::state_from_reference;

// Checks the model's state dict keys (in order) and shapes against the reference, loads the
// reference's values (strict) and returns the reference.
void load_reference(nn::Module& model, const torch_io::Value& ref) {
  nn::StateDict mine = model.state_dict();
  std::vector<std::string> theirs, ours;
  for (const auto& n : ref["names"].items()) theirs.push_back(n.to_string());
  for (const auto& [k, v] : mine) ours.push_back(k);
  EXPECT_EQ(ours, theirs) << "state dict keys differ from torchvision's";
  // The integer buffers the model computes itself (swin's relative_position_index, BatchNorm's
  // num_batches_tracked) must be torchvision's before the reference's replace them.
  for (const auto& [k, v] : ref["ints"].entries()) {
    ASSERT_TRUE(mine.contains(k.to_string())) << k.to_string();
    EXPECT_TRUE(equal(mine[k.to_string()].to(kInt64), v.to_tensor())) << k.to_string() << " differs from torchvision's";
  }
  model.load_state_dict(state_from_reference(ref));  // strict: throws on missing, unexpected or mis-shaped
  EXPECT_EQ(vision::count_parameters(model), ref["num_params"].to_int());
}

// The zoo's model for a reference: built for the reference input's size (vit_b_16 fixes its image
// size at construction; the other architectures ignore the option).
std::shared_ptr<nn::Module> model_for(const std::string& name, const torch_io::Value& ref,
                                      vision::ModelOptions options = {}) {
  options.image_size = ref["input"].to_tensor().size(2);
  // "swin_t_64" is swin_t on a 64x64 input: the reference names the architecture.
  auto model = vision::create_model(ref.find("arch") ? ref["arch"].to_string() : name, options);
  load_reference(*model, ref);
  return model;
}

std::string shape_str(const Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

class VisionModels : public ::testing::TestWithParam<std::string> {};

TEST_P(VisionModels, EvalMatchesTorchvision) {
  NABLA_NEEDS_PYTHON_MODULES("torch, torchvision");
  const std::string name = GetParam();
  torch_io::Value ref = torch_io::load(reference_file(name));
  auto model = model_for(name, ref);
  model->eval();
  autograd::NoGradGuard no_grad;
  auto t0 = std::chrono::steady_clock::now();
  Tensor y = (*model)(ref["input"].to_tensor());
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  Tensor expected = ref["output"].to_tensor();
  ASSERT_EQ(y.sizes(), expected.sizes());
  double err = relative_error(y, expected);
  std::printf("[vision] %s eval: input %s, %lld parameters, max relative error %.3g, forward %.0f ms\n", name.c_str(),
              shape_str(ref["input"].to_tensor()).c_str(), static_cast<long long>(vision::count_parameters(*model)),
              err, ms);
  EXPECT_LE(err, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Zoo, VisionModels,
                         ::testing::Values("resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
                                           "resnext50_32x4d", "wide_resnet50_2", "vgg11", "vgg11_bn", "vgg16",
                                           "vgg16_bn", "alexnet", "squeezenet1_1", "densenet121", "mobilenet_v2",
                                           "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0",
                                           "shufflenet_v2_x1_0", "regnet_y_400mf", "convnext_tiny", "vit_b_16",
                                           "swin_t", "swin_t_64"),
                         [](const auto& info) { return info.param; });

class VisionTraining : public ::testing::TestWithParam<std::string> {};

// Training mode: BatchNorm on batch statistics (and its running statistics updated), the
// gradients of loss = sum(output * w) for every parameter.
TEST_P(VisionTraining, GradientsMatchTorchvision) {
  NABLA_NEEDS_PYTHON_MODULES("torch, torchvision");
  const std::string name = GetParam();
  torch_io::Value ref = torch_io::load(reference_file(name + "_train"));
  auto model = model_for(name, ref, {.dropout = 0.0});  // as make_reference.py's TRAIN
  model->train();
  Tensor y = (*model)(ref["input"].to_tensor());
  double out_err = relative_error(y.detach(), ref["output"].to_tensor());
  EXPECT_LE(out_err, 1e-4);
  (y * ref["loss_weight"].to_tensor()).sum().backward();
  // Each gradient is compared relative to its own scale, floored at 1e-3 of the largest gradient
  // of the model: the biases of a BatchNorm whose output only reaches the loss through another
  // training-mode BatchNorm (mobilenet_v2's projection layers) have a gradient that is zero in exact
  // arithmetic, and both frameworks give rounding noise there (1e-5 against gradients of 1e3).
  double global = 0;
  for (const auto& [pname, g] : ref["grads"].entries())
    global = std::max(global, g.to_tensor().abs().max().item<double>());
  double worst = 0;
  std::string worst_name;
  for (const auto& [pname, p] : model->named_parameters()) {
    const auto* g = ref["grads"].find(pname);
    ASSERT_NE(g, nullptr) << pname;
    ASSERT_TRUE(p.grad().defined()) << pname << " has no gradient";
    Tensor expected = g->to_tensor();
    double scale = std::max(expected.abs().max().item<double>(), 1e-3 * global);
    double e = (p.grad().to(kFloat64) - expected.to(kFloat64)).abs().max().item<double>() / scale;
    if (e > worst) worst = e, worst_name = pname;
    EXPECT_LE(e, 1e-3) << pname;
  }
  double buf_err = 0;
  for (const auto& [bname, b] : model->named_buffers()) {
    const auto* r = ref["buffers"].find(bname);
    ASSERT_NE(r, nullptr) << bname;
    if (b.dtype() == kInt64) EXPECT_TRUE(equal(b, r->to_tensor())) << bname;
    else buf_err = std::max(buf_err, relative_error(b, r->to_tensor()));
  }
  EXPECT_LE(buf_err, 1e-4);
  std::printf("[vision] %s train: output %.3g, worst gradient %.3g (%s), running statistics %.3g\n", name.c_str(),
              out_err, worst, worst_name.c_str(), buf_err);
}

INSTANTIATE_TEST_SUITE_P(Zoo, VisionTraining, ::testing::Values("resnet18", "mobilenet_v2"),
                         [](const auto& info) { return info.param; });

// ---- load_weights -------------------------------------------------------------------------------

TEST(VisionWeights, LoadsTorchvisionStateDictAndSafetensors) {
  NABLA_NEEDS_PYTHON_MODULES("torch, torchvision");
  std::string ref_file = reference_file("resnet18");
  std::string pth = ref_file.substr(0, ref_file.size() - 3) + "_state_dict.pth";
  torch_io::Value ref = torch_io::load(ref_file);
  auto model = vision::resnet18();
  vision::load_weights(*model, pth);  // strict, through the PyTorch-file reader
  model->eval();
  autograd::NoGradGuard no_grad;
  Tensor x = ref["input"].to_tensor();
  EXPECT_LE(relative_error((*model)(x), ref["output"].to_tensor()), 1e-4);

  // The same weights through safetensors (format told by content: no extension on purpose).
  auto st = std::filesystem::temp_directory_path() / ("nabla-vision-st-" + std::to_string(::getpid()));
  nn::save_weights(*model, st.string());
  auto again = vision::resnet18();
  vision::load_weights(*again, st.string());
  again->eval();
  EXPECT_TRUE(equal((*again)(x), (*model)(x)));
  std::filesystem::remove(st);
}

TEST(VisionWeights, StrictLoadingNamesMissingUnexpectedAndMismatchedKeys) {
  auto model = vision::resnet18();
  nn::StateDict sd = model->state_dict();
  auto dir = std::filesystem::temp_directory_path() / ("nabla-vision-keys-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);

  // A head for 10 classes into a 1000-class model: both fc tensors are named with their shapes.
  auto ten = vision::resnet18({.num_classes = 10});
  torch_io::save((dir / "ten.pth").string(), ten->state_dict());
  try {
    vision::load_weights(*model, (dir / "ten.pth").string());
    ADD_FAILURE() << "expected a ValueError";
  } catch (const ValueError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("size mismatch for fc.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("[10, 512]"), std::string::npos) << m;
    EXPECT_NE(m.find("fc.bias"), std::string::npos) << m;
  }

  // A missing and an unexpected key.
  nn::StateDict partial;
  for (const auto& [k, v] : sd)
    if (k != "layer4.1.bn2.running_var") partial.insert(k, v);
  partial.insert("layer5.0.conv1.weight", zeros({1}));
  torch_io::save((dir / "partial.pth").string(), partial);
  try {
    vision::load_weights(*model, (dir / "partial.pth").string());
    ADD_FAILURE() << "expected a ValueError";
  } catch (const ValueError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("Missing key(s) in state_dict: \"layer4.1.bn2.running_var\""), std::string::npos) << m;
    EXPECT_NE(m.find("Unexpected key(s) in state_dict: \"layer5.0.conv1.weight\""), std::string::npos) << m;
  }
  // Not strict: reported, the rest loaded.
  auto res = vision::load_weights(*model, (dir / "partial.pth").string(), {.strict = false});
  EXPECT_EQ(res.missing_keys, std::vector<std::string>{"layer4.1.bn2.running_var"});
  EXPECT_EQ(res.unexpected_keys, std::vector<std::string>{"layer5.0.conv1.weight"});

  // A checkpoint dict: the state dict under a key.
  torch_io::save((dir / "ck.pth").string(), torch_io::Value::dict({{"model", model->state_dict()}, {"epoch", 3}}));
  EXPECT_THROW(vision::load_weights(*model, (dir / "ck.pth").string()), ValueError);  // "model.conv1.weight"...
  EXPECT_NO_THROW(vision::load_weights(*model, (dir / "ck.pth").string(), {.key = "model"}));

  EXPECT_THROW(vision::load_weights(*model, (dir / "nothing.pth").string()), IOError);
  std::filesystem::remove_all(dir);
}

// torchvision's published ViT files predate MLPBlock's change to an MLP ("mlp.linear_1.weight");
// load_weights renames those keys as torchvision's _load_from_state_dict does.
TEST(VisionWeights, LoadsLegacyVitMlpNames) {
  vision::VisionTransformerOptions o{
      .image_size = 32, .patch_size = 16, .num_layers = 2, .num_heads = 2, .hidden_dim = 8, .mlp_dim = 16};
  auto model = std::make_shared<vision::VisionTransformer>(o);
  nn::StateDict legacy;
  for (const auto& [k, v] : model->state_dict()) {
    std::string key = k;
    for (const auto& [from, to] :
         {std::pair<std::string, std::string>{".mlp.0.", ".mlp.linear_1."}, {".mlp.3.", ".mlp.linear_2."}})
      if (auto pos = key.find(from); pos != std::string::npos) key.replace(pos, from.size(), to);
    legacy.insert(key, v + 1.0);
  }
  EXPECT_TRUE(legacy.contains("encoder.layers.encoder_layer_1.mlp.linear_2.bias"));
  auto file = std::filesystem::temp_directory_path() / ("nabla-vit-legacy-" + std::to_string(::getpid()) + ".pth");
  torch_io::save(file.string(), legacy);
  auto again = std::make_shared<vision::VisionTransformer>(o);
  vision::load_weights(*again, file.string());  // strict
  EXPECT_TRUE(equal(again->named_parameters()["encoder.layers.encoder_layer_1.mlp.3.bias"],
                    legacy["encoder.layers.encoder_layer_1.mlp.linear_2.bias"]));
  EXPECT_TRUE(equal(again->named_parameters()["encoder.layers.encoder_layer_0.mlp.0.weight"],
                    legacy["encoder.layers.encoder_layer_0.mlp.linear_1.weight"]));
  std::filesystem::remove(file);
  // The image size is the model's: another one is a shape error naming both.
  try {
    (*again)(zeros({1, 3, 64, 64}));
    ADD_FAILURE() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("(N, 3, 32, 32), got [1, 3, 64, 64]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(vision::VisionTransformer({.image_size = 30, .patch_size = 16}), ValueError);
}

// swin's relative position index and shifted-window mask, on a window of 2x2 (the 7x7 ones are
// checked against torchvision's buffers by the model tests).
TEST(VisionModels, SwinWindowIndexAndMask) {
  Tensor idx = vision::relative_position_index({2, 2});
  // torchvision's define_relative_position_index for window [2, 2]
  std::vector<int64_t> expected = {4, 3, 1, 0, 5, 4, 2, 1, 7, 6, 4, 3, 8, 7, 5, 4};
  ASSERT_EQ(idx.numel(), 16);
  for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(idx.data_ptr<int64_t>()[i], expected[static_cast<size_t>(i)]) << i;
  // a 4x4 map in 2x2 windows shifted by 1: the last window (bottom right) mixes 4 regions, the first none
  Tensor mask = vision::shifted_window_mask(4, 4, {2, 2}, {1, 1});
  EXPECT_EQ(mask.sizes(), (Shape{4, 4, 4}));
  EXPECT_EQ(mask.select(0, 0).abs().sum().item<double>(), 0.0);
  EXPECT_EQ(mask.select(0, 3).eq(0).sum().item<int64_t>(), 4);  // each token only with itself
  EXPECT_THROW(vision::ShiftedWindowAttention(6, {7, 7}, {7, 0}, 3), ValueError);
  EXPECT_THROW(vision::ShiftedWindowAttention(6, {7, 7}, {0, 0}, 4), ValueError);
}

TEST(VisionModels, CreateModelNamesAndOptions) {
  EXPECT_THROW(vision::create_model("resnet19"), ValueError);
  try {
    vision::create_model("resnet19");
  } catch (const ValueError& e) { EXPECT_NE(std::string(e.what()).find("resnet18"), std::string::npos); }
  auto m = vision::resnet50({.num_classes = 7, .zero_init_residual = true});
  EXPECT_EQ(m->named_parameters()["fc.weight"].sizes(), (Shape{7, 2048}));
  EXPECT_EQ(m->named_parameters()["layer1.0.bn3.weight"].abs().sum().item<double>(), 0.0);
  EXPECT_EQ(vision::count_parameters(*vision::resnet18()), 11689512);  // torchvision's
  EXPECT_THROW((*vision::resnet18())(zeros({1, 1, 32, 32})), ShapeError);
  // A new head, as in transfer learning.
  auto r = vision::resnet18();
  r->fc = r->replace_module("fc", std::make_shared<nn::Linear>(512, 3));
  EXPECT_EQ((*r)(zeros({2, 3, 32, 32})).sizes(), (Shape{2, 3}));
  EXPECT_TRUE(r->state_dict().contains("fc.weight"));
  // The tutorial's step for MobileNetV2, model.classifier[1] = nn.Linear(1280, 2): the classifier
  // is a Sequential, and forward runs its new last layer.
  auto mb = vision::mobilenet_v2();
  (*mb->classifier)[1] = std::make_shared<nn::Linear>(1280, 2);
  mb->eval();
  EXPECT_EQ((*mb)(zeros({2, 3, 32, 32})).sizes(), (Shape{2, 2}));
  EXPECT_EQ(mb->state_dict()["classifier.1.weight"].sizes(), (Shape{2, 1280}));
}

}  // namespace
}  // namespace nabla::testing
