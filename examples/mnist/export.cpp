// mnist export: writes test-set digits as PNG files, to try `mnist predict` on real image files, or
// (--onnx) a trained model as an ONNX file.
#include <cstdio>
#include <filesystem>

#include "examples/mnist/args.h"
#include "examples/mnist/cli.h"
#include "examples/mnist/common.h"
#include "onnx/export.h"

namespace mnist {

using namespace nabla;

namespace {

// The model with the input normalization in front, so the ONNX graph takes pixels in [0, 1].
struct WithNormalization : nn::Module {
  explicit WithNormalization(std::shared_ptr<nn::Module> m) : nn::Module("MnistClassifier") {
    model = register_module("model", std::move(m));
  }
  Tensor forward(Tensor x) override { return (*model)(normalize(x)); }
  std::shared_ptr<nn::Module> model;
};

int export_onnx(const ExportArgs& args) {
  ModelInfo m = load_trained_model(args.checkpoint, kCPU);
  WithNormalization net(m.module);
  onnx::ExportOptions o;
  o.opset_version = args.opset;
  o.input_names = {"image"};
  o.output_names = {"scores"};
  o.dynamic_axes = {{"image", {{0, "N"}}}, {"scores", {{0, "N"}}}};
  onnx::export_model(net, {rand({1, 1, 28, 28})}, args.onnx, o);
  std::printf("wrote %s (opset %lld): image float32 (N, 1, 28, 28) in [0, 1] -> scores (N, 10)%s\n", args.onnx.c_str(),
              static_cast<long long>(args.opset), m.outputs_log_probs ? ", log-probabilities" : ", logits");
  return kExitOk;
}

}  // namespace

int cmd_export(int argc, char** argv) {
  std::optional<ExportArgs> args = parse_export_args(argc, argv);
  if (!args) return kExitOk;
  if (!args->onnx.empty()) return export_onnx(*args);
  const std::string& dataset = args->dataset;
  std::string dir = !args->data.empty() ? args->data : default_data_dir(dataset);
  const int64_t count = args->count;
  auto test_set = load_split(dataset, dir, false);
  const int64_t n = test_set->size();
  if (count > n)
    throw UsageError("--count " + std::to_string(count) + " is more than the " + std::to_string(n) +
                     " images of the test set");
  Tensor picks;
  if (args->first) {
    picks = arange(count, dtype(kInt64));
  } else {
    manual_seed(static_cast<uint64_t>(args->seed));
    picks = randperm(n, dtype(kInt64)).narrow(0, 0, count).contiguous();
  }
  std::filesystem::path out = args->out;
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) throw Failure("cannot create the folder " + out.string() + ": " + ec.message(), kExitError);
  const Tensor& images = test_set->images();  // (N, 1, 28, 28) u8
  const int64_t* idx = picks.data_ptr<int64_t>();
  const int64_t* labels = test_set->targets().data_ptr<int64_t>();
  for (int64_t k = 0; k < count; ++k) {
    Tensor img = images[idx[k]][0];
    if (args->invert) img = (255 - img.to(kInt64)).to(kUInt8);
    std::filesystem::path file = out / (std::to_string(idx[k]) + "-" + std::to_string(labels[idx[k]]) + ".png");
    data::save_image(file.string(), img);
    std::printf("%s\n", file.string().c_str());
  }
  return kExitOk;
}

}  // namespace mnist
