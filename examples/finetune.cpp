// finetune: transfer learning as PyTorch's tutorial does it. A torchvision backbone with its
// ImageNet weights gets a new head for your classes and is trained on an ImageFolder (DIR/train/<class>/*.jpg,
// DIR/val/<class>/*.jpg), the whole network or (--freeze-backbone) the head alone.
//
//   build/examples/finetune --make-demo shapes                      # a small 3-class ImageFolder
//   build/examples/finetune --model resnet18 --weights resnet18.pth --data shapes --epochs 5
//   build/examples/finetune --model resnet18 --weights resnet18.pth --data shapes --freeze-backbone
//
// The flow: vision::create_model and vision::load_weights (strict) give the pretrained model; a
// model of the same architecture built for K classes takes every tensor of it except the head's
// (the tensors whose shapes change: for resnet18, fc.weight [1000, 512] -> [K, 512] and fc.bias,
// which is `model.fc = nn.Linear(512, K)` in Python); --freeze-backbone sets requires_grad false on
// everything else and gives the optimizer the head alone. Training crops with RandomResizedCrop and
// flips; evaluation resizes and center-crops; both normalize as the weights expect
// (vision::weights_transforms). SGD with momentum 0.9 and StepLR(7, 0.1), as the tutorial.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "examples/amp.h"
#include "examples/flags.h"
#include "nabla.h"

using namespace nabla;
namespace fs = std::filesystem;

namespace {

const char* kHelp = R"help(usage: finetune --model NAME --weights FILE --data DIR [options]
       finetune --make-demo DIR [--demo-size N]

Fine-tunes one of torchvision's ImageNet models on your own classes (transfer learning): the model
keeps what it learned on ImageNet and gets a new last layer with one output per class.

  --model NAME        the architecture (resnet18, mobilenet_v3_small, efficientnet_b0, ...)
  --weights FILE      its ImageNet weights, as torchvision saves them (e.g. resnet18-f37072fd.pth;
                      in Python: torch.save(torchvision.models.resnet18(weights='DEFAULT').state_dict(), 'resnet18.pth'))
  --data DIR          the images: DIR/train/<class>/*.jpg|png and DIR/val/<class>/... (class names are
                      the folder names, the same in both)
  --epochs N          passes over the training images (default 5)
  --batch-size N      images per step (default 16)
  --lr X              SGD learning rate (default 0.001; momentum 0.9, x0.1 every 7 epochs)
  --freeze-backbone   train the new head only (faster; the tutorial's "ConvNet as fixed feature extractor")
  --image-size N      the training crop and evaluation size (default 224)
  --save FILE         where the best epoch's weights go, in PyTorch's format (default finetuned.pth)
  --device D          cpu or cuda (default cpu)
  --amp MODE          off, bf16 or fp16: the forward and the loss under autocast to bfloat16 or
                      float16 (as torch.autocast), float32 weights, a GradScaler for fp16 (default off)
  --workers N         threads decoding images (default 2)
  --seed N            random seed (default 0)
  --make-demo DIR     write a small ImageFolder of 3 classes (red circles, green squares, blue stripes)
                      to DIR and exit
  --demo-size N       training images per class of the demo (default 40; val gets a quarter)
  -h, --help          this text

Load the result in Python:
  model = torchvision.models.resnet18(num_classes=K); model.load_state_dict(torch.load("finetuned.pth"))
)help";

// Options that take no value (Flags then never reads the next argument as theirs).
const std::set<std::string> kSwitches = {"freeze-backbone"};

// A small "CIFAR-like" dataset the example can make itself: 64x64 RGB pictures of three kinds of
// shape (a disc, a square, vertical stripes) in random sizes and places on noise, each kind in
// colours of its own (reddish, greenish, bluish).
void make_demo(const fs::path& root, int64_t per_class) {
  const std::vector<std::string> classes = {"circles", "squares", "stripes"};
  manual_seed(1234);
  const int64_t S = 64;
  for (const auto& [split, n] : std::vector<std::pair<std::string, int64_t>>{
           {"train", per_class}, {"val", std::max<int64_t>(per_class / 4, 2)}}) {
    for (size_t c = 0; c < classes.size(); ++c) {
      fs::path dir = root / split / classes[c];
      fs::create_directories(dir);
      for (int64_t i = 0; i < n; ++i) {
        Tensor img = (rand({S, S, 3}) * 90).to(kUInt8).contiguous();  // dark noise
        Tensor r = rand({6});
        const float* v = r.data_ptr<float>();
        // Each class has its own palette (as CIFAR's classes differ in colour too): its channel c bright.
        uint8_t color[3] = {static_cast<uint8_t>(60 + 120 * v[0]), static_cast<uint8_t>(60 + 120 * v[1]),
                            static_cast<uint8_t>(60 + 120 * v[2])};
        color[c] = static_cast<uint8_t>(200 + 55 * v[0]);
        const double cx = 16 + 32 * v[3], cy = 16 + 32 * v[4], half = 8 + 8 * v[5];
        uint8_t* px = img.data_ptr<uint8_t>();
        for (int64_t y = 0; y < S; ++y)
          for (int64_t x = 0; x < S; ++x) {
            double dx = static_cast<double>(x) - cx, dy = static_cast<double>(y) - cy;
            bool on = c == 0   ? dx * dx + dy * dy <= half * half
                      : c == 1 ? std::abs(dx) <= half && std::abs(dy) <= half
                               : (x / 4) % 2 == 0 && std::abs(dy) <= 2 * half;
            if (on)
              for (int k = 0; k < 3; ++k) px[(y * S + x) * 3 + k] = color[k];
          }
        // PNG and JPEG both, as a real folder would have.
        data::save_image((dir / (std::to_string(i) + (i % 2 ? ".jpg" : ".png"))).string(), img);
      }
    }
  }
  std::printf("wrote %s: train/ and val/ with classes circles, squares, stripes (%lld training images each)\n",
              root.string().c_str(), static_cast<long long>(per_class));
}

struct EpochResult {
  double loss, accuracy;
};

EpochResult run_epoch(nn::Module& model, data::DataLoader& loader, Device device, optim::Optimizer* optimizer,
                      const std::string& amp, examples::AmpStep* stepper) {
  const bool train = optimizer != nullptr;
  model.train(train);
  double loss_sum = 0;
  int64_t correct = 0, seen = 0;
  std::optional<InferenceMode> inference;
  if (!train) inference.emplace();
  for (auto& b : loader) {
    Tensor x = b.data.to(device), y = b.target.to(device);
    Tensor logits, loss;
    {
      auto region = examples::amp_region(amp, device);  // the forward and the loss; backward after it
      logits = model(x);
      loss = nn::functional::cross_entropy(logits, y);
    }
    if (train) {
      optimizer->zero_grad();
      stepper->step(loss, *optimizer);
    }
    loss_sum += loss.item<double>() * static_cast<double>(x.size(0));
    correct += logits.argmax(1).eq(y).sum().item<int64_t>();
    seen += x.size(0);
  }
  return {loss_sum / static_cast<double>(std::max<int64_t>(seen, 1)),
          100.0 * static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(seen, 1))};
}

}  // namespace

int main(int argc, char** argv) try {
  examples::Flags flags(argc, argv, kHelp, kSwitches);
  std::string demo = flags.str("make-demo", "");
  int64_t demo_size = flags.integer("demo-size", 40, 2, 100000);
  if (!demo.empty()) {
    flags.finish();
    make_demo(demo, demo_size);
    return 0;
  }
  std::string model_name = flags.str("model", "");
  std::string weights = flags.str("weights", "");
  std::string root = flags.str("data", "");
  int64_t epochs = flags.integer("epochs", 5, 1, 10000);
  int64_t batch_size = flags.integer("batch-size", 16, 1, 4096);
  double lr = flags.number("lr", 1e-3, 1e-9, 10);
  int64_t image_size = flags.integer("image-size", 224, 16, 4096);
  std::string save_path = flags.str("save", "finetuned.pth");
  std::string device_name = flags.str("device", "cpu");
  int64_t workers = flags.integer("workers", 2, 0, 64);
  int64_t seed = flags.integer("seed", 0, 0, INT64_MAX);
  const bool freeze = flags.flag("freeze-backbone");
  const std::string amp = examples::amp_mode(flags);
  flags.finish();

  const std::vector<std::string> names = vision::model_names();
  if (model_name.empty() || weights.empty() || root.empty())
    flags.usage("--model, --weights and --data are required (or --make-demo DIR to make a dataset to try)");
  if (std::find(names.begin(), names.end(), model_name) == names.end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    flags.usage("unknown model '" + model_name + "'; the models are: " + known);
  }
  if (device_name != "cpu" && device_name != "cuda") flags.usage("--device is cpu or cuda, got '" + device_name + "'");
  if (device_name == "cuda" && !cuda::is_available())
    flags.usage("--device cuda: no usable GPU (" + cuda::unavailable_reason() + ")");
  for (const char* split : {"train", "val"})
    if (!fs::is_directory(fs::path(root) / split))
      throw IOError("finetune: '" + (fs::path(root) / split).string() +
                    "' is not a folder: --data needs train/<class>/ and val/<class>/ folders of images");
  manual_seed(static_cast<uint64_t>(seed));

  // The data: training crops with augmentation, evaluation resized and center-cropped.
  vision::WeightsTransforms wt = vision::weights_transforms(model_name);
  const int64_t eval_resize = static_cast<int64_t>(std::lround(
      static_cast<double>(wt.resize_size) * static_cast<double>(image_size) / static_cast<double>(wt.crop_size)));
  data::RandomResizedCrop crop(image_size);
  crop.interpolation = wt.interpolation;
  data::Compose train_tf{crop, data::RandomHorizontalFlip(), data::Normalize(wt.mean, wt.std)};
  data::Compose val_tf{data::Resize(eval_resize, wt.interpolation), data::CenterCrop(image_size),
                       data::Normalize(wt.mean, wt.std)};
  data::ImageFolder train_set((fs::path(root) / "train").string(), {.transform = train_tf});
  data::ImageFolder val_set((fs::path(root) / "val").string(), {.transform = val_tf});
  if (train_set.classes() != val_set.classes())
    throw ValueError("finetune: train/ and val/ have different class folders (" +
                     std::to_string(train_set.classes().size()) + " and " + std::to_string(val_set.classes().size()) +
                     ")");
  const auto num_classes = static_cast<int64_t>(train_set.classes().size());
  if (num_classes < 2)
    throw ValueError("finetune: " + root + "/train has " + std::to_string(num_classes) +
                     " class folder(s); at least 2 are needed");
  std::printf("%lld classes:", static_cast<long long>(num_classes));
  for (const auto& c : train_set.classes()) std::printf(" %s", c.c_str());
  std::printf("; %lld training and %lld validation images\n", static_cast<long long>(train_set.size()),
              static_cast<long long>(val_set.size()));
  data::DataLoader train_loader(train_set, {.batch_size = batch_size,
                                            .shuffle = true,
                                            .seed = static_cast<uint64_t>(seed),
                                            .num_workers = static_cast<int>(workers)});
  data::DataLoader val_loader(val_set, {.batch_size = batch_size, .num_workers = static_cast<int>(workers)});

  // The pretrained model, then the same architecture with a head of num_classes outputs that takes
  // every pretrained tensor whose shape it shares.
  auto pretrained = vision::create_model(model_name);
  try {
    vision::load_weights(*pretrained, weights);
  } catch (const ValueError& e) {
    // load_weights lists every offending key; a person needs the gist.
    std::string why = e.what();
    if (why.size() > 300) why = why.substr(0, 300) + "...";
    throw ValueError("'" + weights + "' does not hold " + model_name +
                     "'s ImageNet weights; is --model the architecture they were saved from? (" + why + ")");
  }
  auto model = vision::create_model(model_name, {.num_classes = num_classes});
  nn::StateDict from = pretrained->state_dict(), to = model->state_dict();
  std::vector<std::string> head;
  {
    NoGradGuard no_grad;
    for (const auto& [k, v] : to) {
      if (from[k].sizes() == v.sizes()) Tensor(v).copy_(from[k]);  // v shares the model's storage
      else head.push_back(k);
    }
  }
  pretrained.reset();
  for (const auto& k : head) {
    std::ostringstream a, b;
    a << from[k].sizes();
    b << to[k].sizes();
    std::printf("new head: %s %s -> %s\n", k.c_str(), a.str().c_str(), b.str().c_str());
  }
  std::vector<Tensor> trained;
  for (const auto& [k, p] : model->named_parameters()) {
    bool is_head = std::find(head.begin(), head.end(), k) != head.end();
    if (freeze && !is_head) Tensor(p).requires_grad_(false);
    else trained.push_back(p);
  }
  int64_t n_trained = 0;
  for (const auto& p : trained) n_trained += p.numel();
  std::printf("training %lld of %lld parameters%s\n", static_cast<long long>(n_trained),
              static_cast<long long>(vision::count_parameters(*model)), freeze ? " (the backbone is frozen)" : "");

  Device device(device_name);
  model->to(device);
  optim::SGD optimizer(trained, {.lr = lr, .momentum = 0.9});
  optim::StepLR schedule(optimizer, 7, 0.1);
  examples::AmpStep stepper(amp);
  if (amp != "off") std::printf("%s\n", examples::amp_description(amp).c_str());
  double best = -1;
  for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
    EpochResult tr = run_epoch(*model, train_loader, device, &optimizer, amp, &stepper);
    schedule.step();
    EpochResult va = run_epoch(*model, val_loader, device, nullptr, amp, nullptr);
    std::printf("epoch %lld/%lld: train loss %.4f acc %.1f%% | val loss %.4f acc %.1f%%\n",
                static_cast<long long>(epoch), static_cast<long long>(epochs), tr.loss, tr.accuracy, va.loss,
                va.accuracy);
    if (va.accuracy > best) {
      best = va.accuracy;
      nn::save_torch_weights(*model, save_path);
    }
  }
  std::printf("best val accuracy %.1f%%; weights saved to %s\n", best, save_path.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "finetune: %s\n", e.what());
  return 1;
} catch (...) {
  std::fprintf(stderr, "finetune: an unknown error\n");
  return 1;
}
