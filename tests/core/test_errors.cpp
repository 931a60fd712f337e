// The error hierarchy: each mistake raises its error class, with a message that names the op and
// shows what was passed.
#include <gtest/gtest.h>

#include <sstream>
#include <utility>

#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) { return e.what(); }
  return "(no exception)";
}

TEST(Errors, HierarchyDerivesFromError) {
  EXPECT_THROW(throw ShapeError("x"), Error);
  EXPECT_THROW(throw DTypeError("x"), Error);
  EXPECT_THROW(throw DeviceError("x"), Error);
  EXPECT_THROW(throw IndexError("x"), Error);
  EXPECT_THROW(throw ValueError("x"), Error);
  EXPECT_THROW(throw IOError("x"), Error);
  EXPECT_THROW(throw NotImplemented("x"), Error);
  EXPECT_THROW(throw AutogradError("x"), Error);
  EXPECT_THROW(throw CudaOutOfMemory("x"), CudaError);
  EXPECT_THROW(throw Error("x"), std::runtime_error);
}

// NABLA_CHECK evaluates its message only when the check fails and throws the class it names.
TEST(Errors, CheckMacroBuildsItsMessageOnlyOnFailure) {
  int built = 0;
  auto part = [&] {
    ++built;
    return std::string("[2, 3]");
  };
  NABLA_CHECK(ShapeError, 1 + 1 == 2, "never shown ", part());
  EXPECT_EQ(built, 0);
  std::string msg;
  try {
    NABLA_CHECK(ShapeError, 1 + 1 == 3, "op: got ", part(), " and ", 4);
  } catch (const ShapeError& e) { msg = e.what(); }
  EXPECT_EQ(built, 1);
#ifdef NDEBUG
  EXPECT_EQ(msg, "op: got [2, 3] and 4");  // no location in release builds: see test_check_debug.cpp
#else
  EXPECT_EQ(msg.rfind("op: got [2, 3] and 4 (", 0), 0u) << msg;
#endif
  EXPECT_EQ(internal::check_location("core/views.cpp", 120), " (core/views.cpp:120)");
  EXPECT_EQ(internal::check_location(nullptr, 0), "");
  // A condition with commas in it (template arguments, braces) is one argument once parenthesised.
  EXPECT_THROW(NABLA_CHECK(ValueError, (std::pair<int, int>{1, 2}.first == 2), "pair"), ValueError);
  // The function form still works where a check must be an expression.
  EXPECT_THROW(check<IndexError>(false, "index ", 5), IndexError);
  EXPECT_NO_THROW(check<IndexError>(true, "index ", 5));
}

// ---- shapes ----------------------------------------------------------------------------------------
TEST(Errors, MatmulNamesItselfAndShowsBothShapes) {
  EXPECT_EQ(message_of([] {
              matmul(zeros({64, 320}), zeros({50, 10}));
            }),
            "matmul: inner dimensions differ: lhs [64, 320] rhs [50, 10]");
  EXPECT_THROW(matmul(zeros({64, 320}), zeros({50, 10})), ShapeError);
  EXPECT_EQ(message_of([] { matmul(zeros({3}), zeros({4})); }), "matmul: inner dimensions differ: lhs [3] rhs [4]");
  EXPECT_EQ(message_of([] {
              matmul(zeros({2, 3}), zeros({4}));
            }),
            "matmul: inner dimensions differ: lhs [2, 3] rhs [4]");
  EXPECT_EQ(message_of([] {
              matmul(zeros({5, 2, 3}), zeros({4, 2}));
            }),
            "matmul: inner dimensions differ: lhs [5, 2, 3] rhs [4, 2]");
  EXPECT_TRUE(throws_with<ShapeError>([] { matmul(zeros({2, 2, 3}), zeros({3, 3, 4})); }, {"matmul", "[2]", "[3]"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { matmul(tensor(1.), zeros({2})); }, {"matmul", "at least 1 dim"}));
  EXPECT_TRUE(throws_with<DTypeError>(
      [] {
        matmul(zeros({2, 2}), zeros({2, 2}, kFloat64));
      },
      {"matmul", "float32", "float64"}));
  EXPECT_EQ(message_of([] { mm(zeros({2, 3}), zeros({4, 5})); }), "mm: inner dimensions differ: lhs [2, 3] rhs [4, 5]");
  EXPECT_TRUE(throws_with<ShapeError>([] { bmm(zeros({2, 2, 3}), zeros({3, 3, 2})); }, {"bmm", "batch", "[2, 2, 3]"}));
}

TEST(Errors, BroadcastFailuresNameTheOp) {
  EXPECT_TRUE(throws_with<ShapeError>(
      [] {
        ones({2, 3}) + ones({4});
      },
      {"add: shapes [2, 3] and [4] cannot be broadcast"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { ones({2, 3}) * ones({3, 2}); }, {"mul: shapes [2, 3] and [3, 2]"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { ones({2}) - ones({3}); }, {"sub: shapes [2] and [3]"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { ones({2}) < ones({3}); }, {"lt: shapes [2] and [3]"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { where(ones({2}) > 0, ones({3}), ones({2})); }, {"where", "[2]", "[3]"}));
}

TEST(Errors, ShapeErrorsOfViewsAndShapeOps) {
  EXPECT_TRUE(throws_with<ShapeError>(
      [] {
        zeros({2, 3}).view({4});
      },
      {"view: shape [4] is invalid for input of shape [2, 3]"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { zeros({2, 3}).reshape({4, -1}); }, {"reshape", "[4, -1]", "[2, 3]"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { zeros({2, 3}).expand({3, 3}); }, {"expand", "[2, 3]", "[3, 3]"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { cat({zeros({2, 3}), zeros({3, 4})}, 0); }, {"cat", "[3, 4]", "[2, 3]"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { stack({zeros({2}), zeros({3})}); }, {"stack", "[3]", "[2]"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { zeros({2, 3}).permute({1, 0, 2}); }, {"permute", "[2, 3]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [] {
        linear(zeros({2, 3}), zeros({4, 5}));
      },
      {"linear: input of shape [2, 3] does not match weight of shape [4, 5]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [] {
        conv2d(zeros({1, 3, 8, 8}), zeros({4, 2, 3, 3}));
      },
      {"conv2d", "3 channels", "[4, 2, 3, 3]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [] {
        conv2d(zeros({3, 8}), zeros({4, 2, 3, 3}));
      },
      {"conv2d", "(N, C, H, W)", "[3, 8]"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { max_pool2d(zeros({1, 1, 2, 2}), 3, 1); }, {"max_pool2d", "[1, 1, 2, 2]"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { tensor(std::vector<double>{1, 2, 3}, {2, 2}); }, {"tensor", "[2, 2]"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { zeros({2}).copy_(zeros({3})); }, {"copy_", "[3]", "[2]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [] {
        zeros({2, 2}).diagonal().unsqueeze(0).diagonal(0, 0, 1).diagonal();
      },
      {"diagonal", "2 dims"}));
  EXPECT_THROW(zeros({-1}), ShapeError);
  // Sizes whose element count or byte count overflows are errors, not tiny allocations.
  EXPECT_TRUE(throws_with<ShapeError>([] { zeros({int64_t(1) << 40, int64_t(1) << 40}); }, {"too many elements"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { arange(0, int64_t(1) << 62); }, {"too many bytes"}));
  EXPECT_THROW(empty({int64_t(1) << 61}, kFloat64), ShapeError);
}

// ---- dtypes ----------------------------------------------------------------------------------------
TEST(Errors, DTypeErrors) {
  EXPECT_TRUE(throws_with<DTypeError>([] { zeros({2}).data_ptr<int64_t>(); }, {"data_ptr", "float32", "int64"}));
  EXPECT_TRUE(throws_with<DTypeError>(
      [] {
        tensor({1, 2}).add_(1.5);
      },
      {"add_: result type float32 cannot be stored in a tensor of dtype int64"}));
  EXPECT_TRUE(throws_with<DTypeError>(
      [] {
        mm(zeros({2, 2}), zeros({2, 2}, kFloat64));
      },
      {"mm", "float32", "float64"}));
  EXPECT_TRUE(throws_with<DTypeError>([] { tensor({1, 2}).mean(); }, {"mean", "int64"}));
  EXPECT_TRUE(throws_with<DTypeError>([] { where(ones({2}), ones({2}), ones({2})); }, {"where", "bool", "float32"}));
  EXPECT_TRUE(throws_with<DTypeError>([] { ones({2}).index_select(0, tensor({0.})); }, {"index_select", "float32"}));
  EXPECT_TRUE(throws_with<DTypeError>([] { rand({2}, kInt64); }, {"rand", "int64"}));
  EXPECT_TRUE(throws_with<DTypeError>([] { neg(tensor({true})); }, {"neg", "bool"}));
  EXPECT_TRUE(throws_with<DTypeError>([] { ones({2}).masked_fill(ones({2}), 0); }, {"masked_fill", "bool"}));
  EXPECT_TRUE(throws_with<DTypeError>([] { tensor({1, 2}) & tensor({1, 2}); }, {"operator&", "int64"}));
  EXPECT_TRUE(throws_with<DTypeError>(
      [] {
        conv2d(zeros({1, 1, 3, 3}), zeros({1, 1, 2, 2}, kFloat64));
      },
      {"conv2d", "float32", "float64"}));
}

// ---- devices ---------------------------------------------------------------------------------------
TEST(Errors, CudaOnACpuOnlyBuildIsADeviceError) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is available: CUDA tensors are legal here";
  EXPECT_EQ(cuda::device_count(), 0);
  EXPECT_TRUE(throws_with<DeviceError>([] { zeros({2}, kCUDA); }, {"cuda:0"}));
  EXPECT_TRUE(throws_with<DeviceError>([] { ones({2}).to(kCUDA); }, {"cuda:0"}));
  EXPECT_THROW(ones({2}).cuda(), DeviceError);
  EXPECT_THROW(tensor({1., 2.}, kCUDA), DeviceError);
  EXPECT_THROW(empty({3}, Device::cuda(1)), DeviceError);
  EXPECT_THROW(randn({3}, device(kCUDA)), DeviceError);
  EXPECT_THROW(arange(3, kCUDA), DeviceError);
  float buf[2] = {1, 2};
  EXPECT_THROW(from_blob(buf, {2}, kCUDA), DeviceError);
  // CPU work still runs afterwards.
  EXPECT_TRUE(tensor_is(ones({2}) + 1, {2}, {2, 2}));
}

// ---- indices and dims ------------------------------------------------------------------------------
TEST(Errors, IndexErrors) {
  Tensor x = zeros({3, 2});
  EXPECT_TRUE(throws_with<IndexError>([&] { x.select(0, 5); },
                                      {"select: index 5 is out of range for dim 0 of size 3 (shape [3, 2])"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.sum(2); },
                                      {"sum: dim 2 is out of range for a tensor with 2 dims (expected -2 to 1)"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x[3]; }, {"select", "3"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.transpose(0, 2); }, {"transpose", "dim 2"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.unsqueeze(-4); }, {"unsqueeze", "-4"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.size(-3); }, {"size", "-3"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.softmax(2); }, {"softmax", "dim 2"}));
  EXPECT_TRUE(throws_with<IndexError>(
      [&] {
        x.index_select(0, tensor({0, 3}));
      },
      {"index_select", "index 3", "size 3"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.gather(1, tensor({{2}, {0}, {0}})); }, {"gather", "index 2"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.narrow(0, 2, 2); }, {"narrow", "[3, 2]"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.topk(3, 1); }, {"topk", "k (3)"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.index({0, 0, 0}); }, {"index", "too many indices", "[3, 2]"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { one_hot(tensor({0, 5}), 3); }, {"one_hot", "[0, 3)"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.as_strided({4, 2}, {2, 1}); }, {"as_strided", "storage"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { embedding(zeros({4, 2}), tensor({4})); }, {"index_select", "index 4"}));
}

// ---- values ----------------------------------------------------------------------------------------
TEST(Errors, ValueErrors) {
  EXPECT_TRUE(throws_with<ValueError>([] { zeros({2}).item(); }, {"item", "2 elements"}));
  EXPECT_TRUE(throws_with<ValueError>([] { arange(0, 5, 0); }, {"arange", "step"}));
  EXPECT_TRUE(throws_with<ValueError>([] { linspace(0, 1, -3); }, {"linspace", "-3"}));
  EXPECT_TRUE(throws_with<ValueError>([] { zeros({4}).chunk(0); }, {"chunk", "0"}));
  EXPECT_TRUE(throws_with<ValueError>([] { randint(3, 3, {2}); }, {"randint", "high"}));
  EXPECT_TRUE(throws_with<ValueError>([] { zeros({2}).bernoulli_(1.5); }, {"bernoulli_", "1.5"}));
  EXPECT_TRUE(throws_with<ValueError>([] { multinomial(zeros({3}), 1); }, {"multinomial", "sum to zero"}));
  EXPECT_TRUE(throws_with<ValueError>([] { multinomial(ones({3}), 4); }, {"multinomial", "without replacement"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [] {
        conv2d(zeros({1, 1, 4, 4}), zeros({1, 1, 2, 2}), {}, 0);
      },
      {"conv2d", "stride"}));
  EXPECT_TRUE(throws_with<ValueError>([] { zeros({4}).slice(0, 0, 4, 0); }, {"slice", "step"}));
  EXPECT_TRUE(throws_with<ValueError>([] { Device("tpu:0"); }, {"Device", "tpu:0"}));
  EXPECT_TRUE(throws_with<ValueError>([] { clamp(zeros({2}), std::optional<Scalar>{}, std::nullopt); }, {"clamp"}));
  EXPECT_TRUE(throws_with<ValueError>([] { zeros({2, 3}).sum({0, -2}); }, {"sum", "more than once"}));
}

// ---- undefined tensors -------------------------------------------------------------------------------
TEST(Errors, UndefinedTensorUse) {
  Tensor u;
  EXPECT_TRUE(throws_with<Error>([&] { u.sizes(); }, {"undefined tensor"}));
  EXPECT_THROW(u.numel(), Error);
  EXPECT_THROW(u.dtype(), Error);
  EXPECT_THROW(u.item(), Error);
  EXPECT_THROW(u.sum(), Error);
  EXPECT_THROW(u.view({1}), Error);
  EXPECT_TRUE(throws_with<Error>([&] { u + ones({2}); }, {"add", "undefined"}));
  EXPECT_TRUE(throws_with<Error>([&] { ones({2}) * u; }, {"mul", "undefined"}));
  EXPECT_TRUE(throws_with<Error>([&] { exp(u); }, {"exp", "undefined"}));
  EXPECT_TRUE(throws_with<Error>([&] { matmul(u, ones({2})); }, {"matmul", "undefined"}));
  EXPECT_TRUE(throws_with<Error>([&] { cat({ones({2}), u}); }, {"cat", "undefined"}));
  EXPECT_TRUE(throws_with<Error>([&] { ones({2}).copy_(u); }, {"copy_", "undefined"}));
  EXPECT_TRUE(throws_with<Error>([&] { save_npy(u, "/tmp/never_written.npy"); }, {"save_npy", "undefined"}));
}

// ---- not implemented, I/O, autograd ------------------------------------------------------------------
TEST(Errors, NotImplementedNamesOpAndDtype) {
  EXPECT_TRUE(throws_with<NotImplemented>([] { save_npy(ones({2}, kBFloat16), "/tmp/never_written.npy"); },
                                          {"save_npy", "bfloat16"}));
  // In-place writes into views under autograd work (CopySlices) when the base is contiguous; a
  // base laid out otherwise (here: a detached transpose) is reported instead.
  Tensor x = ones({2, 3}, requires_grad());
  Tensor base = (x * 2).t().detach();
  Tensor src = ones({2}, requires_grad());
  EXPECT_TRUE(throws_with<NotImplemented>([&] { base[0].copy_(src); }, {"copy_", "contiguous"}));
}

TEST(Errors, IOErrorsNameThePath) {
  EXPECT_TRUE(throws_with<IOError>([] { load_npy("/nonexistent/dir/file.npy"); }, {"/nonexistent/dir/file.npy"}));
  EXPECT_TRUE(throws_with<IOError>([] { save_npy(ones({1}), "/nonexistent/dir/file.npy"); }, {"/nonexistent/dir"}));
}

TEST(Errors, AutogradErrors) {
  EXPECT_TRUE(throws_with<AutogradError>(
      [] {
        tensor({1, 2}).requires_grad_();
      },
      {"requires_grad_", "floating", "int64"}));
  EXPECT_TRUE(throws_with<AutogradError>([] { ones({2}).sum().backward(); }, {"backward", "does not require grad"}));
  Tensor x = ones({2}, requires_grad());
  EXPECT_TRUE(throws_with<AutogradError>([&] { (x * 2).backward(); }, {"backward", "one-element", "[2]"}));
  EXPECT_TRUE(throws_with<AutogradError>([&] { x.add_(1); }, {"add", "leaf", "requires grad"}));
  EXPECT_TRUE(throws_with<AutogradError>([&] { (x * 2).requires_grad_(false); }, {"requires_grad_", "MulBackward"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { (x * 2).backward(ones({3})); }, {"backward", "[3]", "[2]"}));
  EXPECT_TRUE(throws_with<AutogradError>([&] { (x * 2).to(kInt64); }, {"to", "int64", "requires grad"}));
}

}  // namespace
}  // namespace nabla::testing

namespace nabla::testing {
namespace {

// The habits of a PyTorch/libtorch user in their first hour with nabla: they compile, or the error names
// what to write instead.
TEST(Habits, GuardsAndPrintingAsLibtorchSpellsThem) {
  {
    nabla::NoGradGuard no_grad;  // also autograd::NoGradGuard
    Tensor w = ones({2}).requires_grad_();
    EXPECT_FALSE((w * 2).requires_grad());
    EXPECT_FALSE(nabla::is_grad_enabled());
  }
  {
    nabla::InferenceMode inference;
    EXPECT_FALSE((ones({2}).requires_grad_() * 2).requires_grad());
  }
  EXPECT_TRUE(nabla::is_grad_enabled());
  std::ostringstream t, m, direct;
  t << tensor({1.5, 2.0});
  EXPECT_NE(t.str().find("1.5"), std::string::npos) << t.str();
  auto model = std::make_shared<nn::Linear>(3, 2);
  m << model;  // the module, not the pointer's address
  direct << *model;
  EXPECT_EQ(m.str(), direct.str());
  EXPECT_NE(m.str().find("Linear(in_features=3, out_features=2"), std::string::npos) << m.str();
}

TEST(Habits, CrossEntropyWithFloatClassIndicesSaysInt64) {
  Tensor logits = zeros({4, 3});
  EXPECT_TRUE(throws_with<DTypeError>([&] { nn::functional::cross_entropy(logits, zeros({4})); },
                                      {"cross_entropy", "class indices", "int64", "float32", "to(kInt64)"}));
  // Errors about index targets name the loss that was called, not the nll_loss it is built on.
  EXPECT_TRUE(throws_with<ShapeError>([&] { nn::functional::cross_entropy(logits, zeros({5}, kInt64)); },
                                      {"cross_entropy", "[4]", "[5]"}));
  EXPECT_TRUE(
      throws_with<IndexError>([&] { nn::functional::cross_entropy(logits, full({4}, 7, kInt64)); }, {"cross_entropy"}));
}

// libtorch's module pattern: a class NetImpl, NABLA_MODULE(Net), members that are handles made
// from nullptr and assigned by register_module, modules registered by value, handles called as
// net(x).
struct TinyNetImpl : nn::Module {
  TinyNetImpl(int64_t in, int64_t hidden) {
    fc1 = register_module("fc1", nn::Linear(in, hidden));                   // a module by value
    fc2 = register_module("fc2", nn::ModuleHolder<nn::Linear>(hidden, 2));  // a handle
  }
  Tensor forward(Tensor x) override { return fc2(relu((*fc1)(x))); }
  std::shared_ptr<nn::Linear> fc1;
  nn::ModuleHolder<nn::Linear> fc2{nullptr};
};
NABLA_MODULE(TinyNet);

struct ParentImpl : nn::Module {
  ParentImpl() { body = register_module("body", TinyNet(4, 3)); }
  Tensor forward(Tensor x) override { return body(x); }
  TinyNet body{nullptr};
};
NABLA_MODULE(Parent);

struct ScaleImpl : nn::Module {  // a forward of its own signature: the handle calls it directly
  using nn::Module::forward;
  Tensor forward(Tensor x, const std::string& how) { return how == "double" ? x * 2 : x; }
};
NABLA_MODULE(Scale);

TEST(Habits, ModuleHandlesAreCalledAndPrintedAsLibtorchsAre) {
  manual_seed(0);
  TinyNet net(4, 3);
  Tensor x = randn({5, 4});
  Tensor y = net(x);
  EXPECT_EQ(y.sizes(), (Shape{5, 2}));
  EXPECT_TRUE(equal(y, net->forward(x)));
  EXPECT_TRUE(equal(y, (*net)(x)));
  int calls = 0;  // net(x) runs the hooks, as (*net)(x) does
  net->register_forward_hook([&](nn::Module&, const std::vector<Tensor>&, Tensor&) { ++calls; });
  net(x);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(net->named_parameters().keys(),
            (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  std::ostringstream os;
  os << net;  // the module's tree, named without "Impl"
  EXPECT_EQ(os.str(),
            "TinyNet(\n"
            "  (fc1): Linear(in_features=4, out_features=3, bias=True)\n"
            "  (fc2): Linear(in_features=3, out_features=2, bias=True)\n"
            ")");
  // Handles share their module and go where module pointers go.
  TinyNet copy = net;
  EXPECT_EQ(copy.get(), net.get());
  std::shared_ptr<nn::Module> base = net;
  EXPECT_EQ(base.get(), net.get());
  nn::Sequential seq(net, nn::ReLU());
  EXPECT_EQ(seq.ptr(0).get(), net.get());  // libtorch's Sequential::ptr
  EXPECT_EQ(seq.ptr<TinyNetImpl>(0).get(), net.get());
  EXPECT_TRUE(equal(seq(x), relu(y)));
  Parent parent;
  EXPECT_EQ(parent->named_parameters().keys().front(), "body.fc1.weight");
  EXPECT_EQ(parent(x).sizes(), (Shape{5, 2}));
  nn::ModuleHolder<nn::Sequential> stack(nn::Linear(4, 4), nn::ReLU());
  EXPECT_EQ(stack[1]->name(), "ReLU");
  EXPECT_EQ(stack(x).sizes(), (Shape{5, 4}));
  Scale scale;
  EXPECT_TRUE(equal(scale(x, "double"), x * 2));
  // An empty handle is a clear error, not a null dereference.
  TinyNet empty(nullptr);
  EXPECT_TRUE(empty.is_empty());
  EXPECT_FALSE(static_cast<bool>(empty));
  EXPECT_TRUE(throws_with<ValueError>([&] { empty(x); }, {"ModuleHolder<TinyNet>", "empty", "register_module"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { empty->parameters(); }, {"ModuleHolder<TinyNet>", "empty"}));
}

TEST(Habits, LibtorchSpellingsOfItemsIndexingDevicesAndGroups) {
  TinyNet net(4, 3);
  auto named = net->named_parameters();
  for (const auto& item : named) EXPECT_TRUE(item.value().is_same(named[item.key()])) << item.key();
  for (const auto& [name, t] : named) EXPECT_TRUE(t.is_same(named[name]));  // structured bindings still work
  Tensor x = arange(24, kFloat32).view({2, 3, 4});
  EXPECT_TRUE(equal(x.index({"...", -1}), x.index({indexing::Ellipsis, -1})));
  EXPECT_TRUE(throws_with<ValueError>([&] { x.index({"..", 0}); }, {"index", "\"...\"", "'..'"}));
  EXPECT_EQ(x.sizes().vec().size(), 3u);
  EXPECT_EQ(x.index({0, 0, 1}).item<float>(), 1.0f);
  EXPECT_TRUE(equal(x.to("cpu"), x));
  EXPECT_THROW(x.to("gpu"), ValueError);
  optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
  auto groups = opt.param_groups();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].params().size(), 4u);
  EXPECT_DOUBLE_EQ(groups[0].option("momentum"), 0.9);
  for (auto& g : opt.param_groups()) g.set_lr(g.lr() * 0.5);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.05);
  data::TensorDataset ds(zeros({7, 2}), zeros({7}, kInt64));
  EXPECT_EQ(ds.size(), 7);
}

TEST(Habits, MissingFashionMnistNamesTheDebianPackage) {
  EXPECT_TRUE(throws_with<IOError>([] { data::FashionMNIST("/nonexistent-dir"); },
                                   {"FashionMNIST", "/nonexistent-dir", "dataset-fashion-mnist",
                                    "/usr/share/datasets/fashion-mnist", "scripts/get-data.sh"}));
}

}  // namespace
}  // namespace nabla::testing
