// mnist predict: classifies image files (PNG, JPEG or BMP) with a trained checkpoint. Photos and
// drawings are converted the way MNIST was made: grayscale, digit white on black, scaled into
// 20x20 and centered by mass in 28x28.
#include <cstdio>

#include "examples/mnist/args.h"
#include "examples/mnist/cli.h"
#include "examples/mnist/common.h"
#include "examples/mnist/preprocess.h"

namespace mnist {

using namespace nabla;

int cmd_predict(int argc, char** argv) {
  std::optional<PredictArgs> args = parse_predict_args(argc, argv);
  if (!args) return kExitOk;
  Device device = pick_device(args->device);
  ModelInfo m = load_trained_model(args->checkpoint, device);
  const bool json = args->json;
  const std::string& save_dir = args->save_input;
  int failures = 0;
  autograd::InferenceMode guard;
  for (const std::string& path : args->images) {
    Prepared in;
    try {
      in = prepare_digit(path);
    } catch (const nabla::Error& e) {
      ++failures;
      if (json) {
        std::printf("{\"file\": \"%s\", \"error\": \"%s\"}\n", json_escape(path).c_str(),
                    json_escape(e.what()).c_str());
      } else {
        std::fprintf(stderr, "mnist: %s: %s\n", path.c_str(), e.what());
      }
      continue;
    }
    if (!save_dir.empty()) {
      std::string name = path.substr(path.find_last_of('/') + 1);
      data::save_image(save_dir + "/" + name + ".28x28.png", (in.image[0] * 255).round().to(kUInt8));
    }
    Tensor out = (*m.module)(normalize(in.image.unsqueeze(0).to(device)));
    Tensor probs = (m.outputs_log_probs ? out.exp() : out.softmax(1))[0].cpu().to(kFloat64);
    int64_t digit = probs.argmax().item<int64_t>();
    const double* p = probs.data_ptr<double>();
    if (json) {
      std::printf("{\"file\": \"%s\", \"digit\": %lld, \"probabilities\": [", json_escape(path).c_str(),
                  static_cast<long long>(digit));
      for (int64_t c = 0; c < probs.numel(); ++c) std::printf("%s%.6f", c ? ", " : "", p[c]);
      std::printf("]}\n");
    } else {
      std::printf("%s: %lld (%.1f%%)  ", path.c_str(), static_cast<long long>(digit), p[digit] * 100);
      for (int64_t c = 0; c < probs.numel(); ++c) std::printf(" %lld:%.2f", static_cast<long long>(c), p[c]);
      std::printf("\n");
    }
  }
  return failures ? kExitError : kExitOk;
}

}  // namespace mnist
