// mnist eval: test accuracy of a checkpoint, per-class precision and recall, and the confusion matrix.
#include <cstdio>

#include "examples/amp.h"
#include "examples/mnist/args.h"
#include "examples/mnist/cli.h"
#include "examples/mnist/common.h"
#include "examples/mnist/progress.h"

namespace mnist {

using namespace nabla;

int cmd_eval(int argc, char** argv) {
  std::optional<EvalArgs> args = parse_eval_args(argc, argv);
  if (!args) return kExitOk;
  Device device = pick_device(args->device);
  std::map<std::string, std::string> info;
  ModelInfo m = load_trained_model(args->checkpoint, device, &info);
  std::string dataset = MetadataReader(info, args->checkpoint).choice("mnist.dataset", kDatasets);
  std::string dir = !args->data.empty() ? args->data : default_data_dir(dataset);
  auto test_set = load_split(dataset, dir, false);
  const int64_t bs = args->batch_size;
  const std::string amp = args->amp != "saved"      ? args->amp
                          : info.count("mnist.amp") ? info["mnist.amp"]
                                                    : std::string("off");

  autograd::InferenceMode guard;
  const int64_t C = 10;
  metrics::Accuracy acc(C);
  metrics::Precision prec(C, metrics::Average::none);
  metrics::Recall rec(C, metrics::Average::none);
  double loss = 0;
  const bool gpu = device.is_cuda();  // page-locked batches, copied to the GPU without waiting
  data::DataLoader loader(test_set, {.batch_size = bs, .pin_memory = gpu});
  std::optional<CompiledModule> compiled;
  if (args->compile) compiled.emplace(compile(m.module));
  for (auto& batch : loader) {
    Tensor x = normalize(batch.data.to(device, gpu)), y = batch.target.to(device, gpu);
    Tensor out, l;
    {
      auto region = examples::amp_region(amp, device);  // the forward and the loss, as in training
      out = compiled ? (*compiled)(x) : (*m.module)(x);
      l = m.outputs_log_probs ? nn::functional::nll_loss(out, y, {.reduction = nn::Reduction::sum})
                              : nn::functional::cross_entropy(out, y, {.reduction = nn::Reduction::sum});
    }
    loss += l.item<double>();
    Tensor pred = out.argmax(1).cpu(), yc = y.cpu();
    acc.update(pred, yc);
    prec.update(pred, yc);
    rec.update(pred, yc);
  }
  int64_t n = test_set->size();
  std::printf("%s on %s test set (%s images)%s\n", info["mnist.model"].c_str(), dataset_title(dataset).c_str(),
              format_count(static_cast<double>(n)).c_str(),
              amp == "off"    ? ""
              : amp == "bf16" ? ", under autocast to bfloat16"
                              : ", under autocast to float16");
  std::printf("test accuracy %.2f%%  loss %.4f\n", acc.compute().item<double>() * 100, loss / n);
  if (compiled)
    std::printf("compiled: %lld capture(s), %lld replay(s), %lld eager call(s)%s%s\n",
                static_cast<long long>(compiled->stats().captures), static_cast<long long>(compiled->stats().replays),
                static_cast<long long>(compiled->stats().eager_calls),
                compiled->stats().last_fallback.empty() ? "" : ": ", compiled->stats().last_fallback.c_str());
  std::printf("\n");
  Tensor p = prec.compute(), r = rec.compute();
  const auto& names = test_set->classes();
  std::printf("class          precision  recall\n");
  for (int64_t c = 0; c < C; ++c)
    std::printf("%-14s %8.2f%%  %6.2f%%\n",
                names.size() == static_cast<size_t>(C) ? names[c].c_str() : std::to_string(c).c_str(),
                p[c].item<double>() * 100, r[c].item<double>() * 100);
  Tensor cm = acc.confusion();
  std::printf("\nconfusion matrix (rows: true class, columns: predicted)\n      ");
  for (int64_t c = 0; c < C; ++c) std::printf("%6lld", static_cast<long long>(c));
  std::printf("\n");
  for (int64_t i = 0; i < C; ++i) {
    std::printf("%6lld", static_cast<long long>(i));
    for (int64_t j = 0; j < C; ++j) std::printf("%6lld", static_cast<long long>(cm[i][j].item<int64_t>()));
    std::printf("\n");
  }
  return kExitOk;
}

}  // namespace mnist
