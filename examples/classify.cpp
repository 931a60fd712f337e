// classify: what is in this photo? One of torchvision's ImageNet models, with weights trained in
// Python, on JPEG/PNG files: the top-k classes with their probabilities.
//
//   build/examples/classify --model resnet50 --weights resnet50-11ad3fa6.pth photo.jpg more.jpg
//   build/examples/classify --model efficientnet_b0 --weights effnet.pth *.jpg --topk 3 --json
//
// The flow: vision::create_model builds the architecture, vision::load_weights reads torchvision's
// file (strict: every tensor must fit), vision::weights_transforms gives the preprocessing those
// weights were trained with (resize, center crop, normalize), and the images go through the model
// in batches under InferenceMode; softmax and topk give the answer.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "examples/amp.h"
#include "examples/flags.h"
#include "examples/imagenet_classes.h"
#include "nabla.h"

using namespace nabla;
namespace fs = std::filesystem;

namespace {

const char* kHelp = R"help(usage: classify --model NAME --weights FILE IMAGE [IMAGE ...] [options]

Names what is in each photo with one of torchvision's ImageNet classifiers and the weights trained
for it in Python: prints the top classes and their probabilities for every image (JPEG, PNG or BMP).

  --model NAME       the architecture the weights belong to: resnet50, efficientnet_b0, vit_b_16, ...
                     (--list-models shows them all)
  --weights FILE     the weights: torchvision's own file (e.g. resnet50-11ad3fa6.pth), any
                     torch.save(model.state_dict()) of that architecture, or a .safetensors file
  --topk K           how many classes to show per image (default 5)
  --json             print JSON instead of text: [{"file", "top": [{"index", "label", "probability"}]}]
  --device D         cpu or cuda (default cpu)
  --batch-size N     images per forward pass (default 8)
  --amp MODE         off, bf16 or fp16: run the forward under autocast to bfloat16 or float16 (as
                     torch.autocast; the weights stay float32); faster where the CPU or GPU has fast
                     16-bit products, probabilities within about 1% of float32's (default off)
  --labels FILE      class names, one per line, for weights trained on other classes (the model's
                     output count is the number of lines); default: ImageNet's 1000 classes
  --compile          run the model through nabla::compile: the first batch of each size is
                     captured, the others replay the optimised graph (batch norms folded,
                     activations fused)
  --no-antialias     resize without antialiasing, exactly as torchvision 0.14's transforms do on a
                     tensor (the default antialiases, as PIL and torchvision >= 0.17 do)
  --list-models      print each model with its weights' file name and preprocessing, and exit
  -h, --help         this text

Each image is resized, center-cropped to 224x224 and normalized the way torchvision's DEFAULT
weights of the model expect (e.g. resnet50: shorter side 232, bilinear; efficientnet_b0: 256, bicubic).

Getting weights (once, in Python with torchvision, which downloads them):
  python3 -c "import torch, torchvision as tv; torch.save(tv.models.resnet50(weights='DEFAULT').state_dict(), 'resnet50.pth')"
or download the file --list-models names from https://download.pytorch.org/models/

Example:
  classify --model resnet50 --weights resnet50.pth cat.jpg dog.png --topk 3
)help";

// Options that take no value (Flags then never reads the next argument as theirs).
const std::set<std::string> kSwitches = {"json", "no-antialias", "list-models", "compile"};

struct Prediction {
  int64_t index;
  double probability;
};

std::string shape_str(const Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

// Why `path` does not fit `model` (an architecture called `name`), in a few lines: the keys missing
// from the file, the keys the file has that the model does not, and the tensors whose shapes differ.
std::string mismatch_report(const std::string& name, nn::Module& model, const std::string& path, int64_t num_classes,
                            bool custom_labels) {
  nn::StateDict file = vision::read_weights(path);
  nn::StateDict mine = model.state_dict();
  std::vector<std::string> missing, unexpected, shapes;
  int64_t file_classes = -1;  // the first dimension of the first tensor whose shape differs
  for (const auto& [k, v] : mine)
    if (!file.contains(k)) missing.push_back(k);
  for (const auto& [k, v] : file) {
    if (!mine.contains(k)) unexpected.push_back(k);
    else if (mine[k].sizes() != v.sizes()) {
      shapes.push_back(k + ": the file's " + shape_str(v) + ", " + name + "'s " + shape_str(mine[k]));
      if (file_classes < 0 && v.dim() > 0) file_classes = v.size(0);
    }
  }
  std::ostringstream os;
  auto some = [&](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < std::min<size_t>(v.size(), 3); ++i) s += (i ? ", " : "") + v[i];
    return s + (v.size() > 3 ? ", ..." : "");
  };
  os << "'" << path << "' does not hold " << name << "'s weights:";
  if (!missing.empty())
    os << "\n  " << missing.size() << " of " << name << "'s " << mine.size() << " tensors are not in the file ("
       << some(missing) << ")";
  if (!unexpected.empty())
    os << "\n  " << unexpected.size() << " of the file's " << file.size() << " tensors are not " << name << "'s ("
       << some(unexpected) << ")";
  if (!shapes.empty()) os << "\n  " << shapes.size() << " tensors have other shapes (" << some(shapes) << ")";
  if (missing.empty() && unexpected.empty() && !shapes.empty()) {
    // Only shapes differ: most often the classifier of a model trained on other classes.
    if (custom_labels)
      os << "\n  --labels names " << num_classes << " classes; the file's classifier has " << file_classes
         << " outputs";
    else
      os << "\n  these weights were trained on " << file_classes << " classes, not ImageNet's " << num_classes
         << ": pass --labels with a file of their " << file_classes << " names, one per line";
  } else {
    os << "\n  is --model the architecture these weights were saved from?";
  }
  return os.str();
}

std::vector<std::string> read_labels(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IOError("classify: cannot open the labels file '" + path + "'");
  std::vector<std::string> labels;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) labels.push_back(line);
  }
  if (labels.empty()) throw ValueError("classify: the labels file '" + path + "' has no names (one per line)");
  return labels;
}

}  // namespace

int main(int argc, char** argv) try {
  examples::Flags flags(argc, argv, kHelp, kSwitches);
  const bool json = flags.flag("json");
  const bool antialias = !flags.flag("no-antialias");

  if (flags.flag("list-models")) {
    flags.finish();
    std::printf("%-20s %-16s %-40s %s\n", "model", "weights", "torchvision's file", "preprocessing");
    for (const auto& name : vision::model_names()) {
      vision::WeightsTransforms t = vision::weights_transforms(name);
      std::printf("%-20s %-16s %-40s resize %lld %s, crop %lld\n", name.c_str(), t.weights.c_str(), t.file.c_str(),
                  static_cast<long long>(t.resize_size),
                  t.interpolation == data::Interpolation::bicubic ? "bicubic" : "bilinear",
                  static_cast<long long>(t.crop_size));
    }
    return 0;
  }

  std::string model_name = flags.str("model", "");
  std::string weights = flags.str("weights", "");
  int64_t topk = flags.integer("topk", 5, 1, 1000);
  std::string device_name = flags.str("device", "cpu");
  int64_t batch_size = flags.integer("batch-size", 8, 1, 1024);
  std::string labels_path = flags.str("labels", "");
  const std::string amp = examples::amp_mode(flags);
  flags.finish(SIZE_MAX);
  const std::vector<std::string>& images = flags.positional();

  const std::vector<std::string> names = vision::model_names();
  if (model_name.empty())
    flags.usage("--model is required (one of: resnet18, resnet50, mobilenet_v3_small, ...; --list-models shows all)");
  if (std::find(names.begin(), names.end(), model_name) == names.end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    flags.usage("unknown model '" + model_name + "'; the models are: " + known);
  }
  if (weights.empty())
    flags.usage("--weights is required: the .pth file of " + model_name + "'s weights (torchvision's is " +
                vision::weights_transforms(model_name).file + ")");
  if (images.empty()) flags.usage("no image given: name one or more JPEG/PNG files after the options");
  if (device_name != "cpu" && device_name != "cuda") flags.usage("--device is cpu or cuda, got '" + device_name + "'");
  if (device_name == "cuda" && !cuda::is_available())
    flags.usage("--device cuda: no usable GPU (" + cuda::unavailable_reason() + ")");
  // Every file first, so that a typo in the last name does not wait for the model to load.
  if (!fs::is_regular_file(weights))
    throw IOError("cannot open the weights file '" + weights +
                  "': " + (fs::exists(weights) ? "not a file" : "no such file"));
  for (const auto& f : images)
    if (!fs::is_regular_file(f))
      throw IOError("cannot open the image '" + f + "': " + (fs::exists(f) ? "not a file" : "no such file"));

  std::vector<std::string> labels;
  if (!labels_path.empty()) labels = read_labels(labels_path);
  else labels.assign(examples::kImageNetClasses.begin(), examples::kImageNetClasses.end());
  const auto num_classes = static_cast<int64_t>(labels.size());
  topk = std::min(topk, num_classes);

  // The model and its weights.
  auto model = vision::create_model(model_name, {.num_classes = num_classes});
  try {
    vision::load_weights(*model, weights);
  } catch (const ValueError&) {
    std::exception_ptr load_error = std::current_exception();
    std::string report;
    try {
      report = mismatch_report(model_name, *model, weights, num_classes, !labels_path.empty());
    } catch (const std::exception&) {
      std::rethrow_exception(load_error);  // the file itself is the problem: load_weights' message says why
    }
    throw ValueError(report);
  }
  Device device(device_name);
  model->to(device);
  model->eval();
  vision::WeightsTransforms transforms = vision::weights_transforms(model_name);
  transforms.antialias = antialias;

  // The images, in batches: (B, 3, 224, 224) -> probabilities (B, classes) -> top k.
  std::vector<std::vector<Prediction>> results;
  InferenceMode inference;
  std::optional<CompiledModule> compiled;
  if (flags.flag("compile")) compiled.emplace(compile(model));
  for (size_t start = 0; start < images.size(); start += static_cast<size_t>(batch_size)) {
    size_t stop = std::min(images.size(), start + static_cast<size_t>(batch_size));
    std::vector<Tensor> batch;
    for (size_t i = start; i < stop; ++i) batch.push_back(transforms.load(images[i]));
    Tensor x = stack(batch).to(device);  // (B, 3, 224, 224)
    Tensor logits;
    {
      auto region = examples::amp_region(amp, device);
      logits = compiled ? (*compiled)(x) : (*model)(x);
    }
    Tensor probs = softmax(logits.to(kFloat32), -1).cpu();  // (B, classes)
    auto [p, idx] = probs.topk(topk, -1);
    for (int64_t b = 0; b < p.size(0); ++b) {
      std::vector<Prediction> top;
      for (int64_t k = 0; k < topk; ++k) top.push_back({idx[b][k].item<int64_t>(), p[b][k].item<double>()});
      results.push_back(std::move(top));
    }
  }

  if (json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (size_t i = 0; i < images.size(); ++i) {
      nlohmann::ordered_json top = nlohmann::ordered_json::array();
      for (const auto& pr : results[i])
        top.push_back(
            {{"index", pr.index}, {"label", labels[static_cast<size_t>(pr.index)]}, {"probability", pr.probability}});
      out.push_back({{"file", images[i]}, {"top", top}});
    }
    std::cout << out.dump(2) << "\n";
  } else {
    if (amp != "off") std::printf("(%s)\n", examples::amp_description(amp, false).c_str());
    for (size_t i = 0; i < images.size(); ++i) {
      std::printf("%s\n", images[i].c_str());
      for (size_t k = 0; k < results[i].size(); ++k)
        std::printf("  %zu. %6.2f%%  %s (%lld)\n", k + 1, 100 * results[i][k].probability,
                    labels[static_cast<size_t>(results[i][k].index)].c_str(),
                    static_cast<long long>(results[i][k].index));
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "classify: %s\n", e.what());
  return 1;
} catch (...) {
  std::fprintf(stderr, "classify: an unknown error\n");
  return 1;
}
