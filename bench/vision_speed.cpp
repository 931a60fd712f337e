// One row of the vision benchmark in nabla (bench/vision_compare.py runs it next to PyTorch, each
// row in its own process so that the peak memory is the row's): a torchvision architecture from
// nabla's zoo with random weights, inference (eval, InferenceMode) or a training step (forward,
// cross_entropy, backward, SGD with momentum), on a batch of random 224x224 images.
//
//   build/bench/vision_speed --model resnet50 --batch 8 --mode infer --reps 3
//
// Prints one JSON line: the best and every timed iteration's seconds (after one warm-up iteration),
// the peak resident memory of the process (getrusage) and the resident memory before the model was
// built, in MB.
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "nabla.h"

using namespace nabla;

namespace {

double rss_mb() {  // resident now, from /proc/self/statm (pages)
  std::ifstream f("/proc/self/statm");
  long long size = 0, resident = 0;
  f >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1e6;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1e3;  // KiB on Linux
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "vision_speed: %s\n"
               "usage: vision_speed --model NAME [--batch N] [--mode infer|train] [--reps N] [--size PIXELS]\n"
               "  NAME: any of nabla::vision::model_names() (resnet50, mobilenet_v2, vit_b_16, ...)\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_name, mode = "infer";
  int64_t batch = 1, reps = 3, size = 224;
  for (int i = 1; i < argc; ++i) {
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage((std::string(argv[i]) + " needs a value").c_str());
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--model")) model_name = value();
    else if (!std::strcmp(argv[i], "--batch")) batch = std::stoll(value());
    else if (!std::strcmp(argv[i], "--mode")) mode = value();
    else if (!std::strcmp(argv[i], "--reps")) reps = std::stoll(value());
    else if (!std::strcmp(argv[i], "--size")) size = std::stoll(value());
    else usage((std::string("unknown option ") + argv[i]).c_str());
  }
  if (model_name.empty()) usage("--model is required");
  if (mode != "infer" && mode != "train") usage("--mode is infer or train");
  if (batch < 1 || reps < 1 || size < 32) usage("--batch and --reps must be at least 1, --size at least 32");

  const double rss_before = rss_mb();
  manual_seed(0);
  vision::ModelOptions options;
  if (model_name == "vit_b_16") options.image_size = size;
  std::shared_ptr<nn::Module> model = vision::create_model(model_name, options);
  Tensor x = randn({batch, 3, size, size});
  Tensor y = randint(0, 1000, {batch});
  std::unique_ptr<optim::SGD> opt;
  if (mode == "train") {
    model->train();
    opt = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
  } else {
    model->eval();
  }
  auto iteration = [&] {
    if (mode == "infer") {
      autograd::InferenceMode guard;
      Tensor out = (*model)(x);
      (void)out.data_ptr<float>();
    } else {
      opt->zero_grad();
      Tensor loss = nn::functional::cross_entropy((*model)(x), y);
      loss.backward();
      opt->step();
    }
  };
  iteration();  // warm-up: caches, the allocator's pools, lazily made buffers
  std::vector<double> times;
  for (int64_t r = 0; r < reps; ++r) times.push_back(bench::time_batch(iteration, 1));
  double best = *std::min_element(times.begin(), times.end());
  std::printf(
      "{\"framework\": \"nabla\", \"model\": \"%s\", \"mode\": \"%s\", \"batch\": %lld, \"threads\": %d, "
      "\"best_s\": %.6f, \"times_s\": [",
      model_name.c_str(), mode.c_str(), static_cast<long long>(batch), get_num_threads(), best);
  for (size_t i = 0; i < times.size(); ++i) std::printf("%s%.6f", i ? ", " : "", times[i]);
  std::printf("], \"peak_rss_mb\": %.1f, \"rss_before_model_mb\": %.1f}\n", peak_rss_mb(), rss_before);
  return 0;
}
