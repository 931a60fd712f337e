// Spoken-word classification, the audio module of the PyTorch course in C++: one-second clips in
// a folder per word (SpeechCommands' layout) -> a log-mel spectrogram (or MFCCs) -> a small CNN.
// Train, evaluate, and classify a WAV file.
//
//   /usr/bin/python3 examples/audio_classify/make_data.py data/words          # espeak-ng + sox
//   build/examples/audio_classify --data data/words                          # 30 epochs, ~1.5 min
//   build/examples/audio_classify --load words.safetensors --classify data/words/test/yes/0000.wav
//
// The feature extraction (torchaudio's MelSpectrogram + AmplitudeToDB, or MFCC) is part of the
// model, with its filters as buffers, so the saved weights take raw waveforms; the class names are
// saved in the weights file's metadata.
#include <nabla.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "examples/flags.h"
using namespace nabla;
namespace T = nabla::audio::transforms;

const char* kHelp = R"(audio_classify: recognise spoken words in one-second clips (a CNN on mel spectrograms)

usage: audio_classify --data DIR [--features mel|mfcc] [--epochs N] [--batch-size N] [--lr X]
                      [--seed N] [--workers N] [--no-augment] [--save FILE]
       audio_classify --load FILE --classify CLIP.wav

  --data DIR        DIR/train/<word>/*.wav and DIR/test/<word>/*.wav, 16 kHz mono
                    (examples/audio_classify/make_data.py DIR makes them with espeak-ng and sox)
  --features KIND   mel: 64 log-mel bands (MelSpectrogram + AmplitudeToDB, default);
                    mfcc: 20 MFCCs of 64 mel bands (torchaudio's MFCC)
  --epochs N        passes over the training clips (default 30)
  --batch-size N    clips per step (default 32)
  --lr X            Adam's learning rate at the start of a cosine schedule (default 0.002)
  --seed N          initialisation, data order and augmentation (default 1)
  --workers N       DataLoader threads reading the clips (default 1)
  --no-augment      train without the frequency and time masks (SpecAugment)
  --save FILE       where the trained model goes (default words.safetensors)
  --load FILE       a model saved by --save, for --classify
  --classify CLIP   a WAV file (any rate: resampled to 16 kHz; cut or padded to one second)

Prints the loss and accuracies after every epoch and "test accuracy: X" at the end.
)";

constexpr int64_t kRate = 16000, kFrames = 16000;

// ---- the model ------------------------------------------------------------------------------------
// waveform (B, 1, 16000) -> features (B, 1, bands, 101) -> 3 conv blocks -> class logits. During
// training, SpecAugment-style frequency and time masks hide bands and frames of each batch.
struct WordNetImpl : nn::Module {
  WordNetImpl(int64_t n_classes, const std::string& features) : features(features) {
    if (features == "mfcc") {
      mfcc = register_module(
          "mfcc",
          std::make_shared<T::MFCC>(T::MFCCOptions{
              .sample_rate = kRate, .n_mfcc = 20, .melkwargs = {.n_fft = 400, .hop_length = 160, .n_mels = 64}}));
    } else {
      mel = register_module("mel", std::make_shared<T::MelSpectrogram>(T::MelSpectrogramOptions{
                                       .sample_rate = kRate, .n_fft = 400, .hop_length = 160, .n_mels = 64}));
      to_db = register_module("to_db", std::make_shared<T::AmplitudeToDB>("power", 80.0));
    }
    freq_mask = register_module("freq_mask", std::make_shared<T::FrequencyMasking>(features == "mfcc" ? 3 : 8));
    time_mask = register_module("time_mask", std::make_shared<T::TimeMasking>(12));
    auto block = [](int64_t in, int64_t out) {
      return std::make_shared<nn::Sequential>(nn::Conv2d(in, out, 3, {.padding = 1}), nn::BatchNorm2d(out), nn::ReLU(),
                                              nn::MaxPool2d(2));
    };
    body = register_module("body", nn::Sequential(block(1, 16), block(16, 32), block(32, 64), nn::AdaptiveAvgPool2d(1),
                                                  nn::Flatten(), nn::Dropout(0.2), nn::Linear(64, n_classes)));
  }

  // (B, 1, time) -> (B, 1, bands, frames), standardised per clip.
  Tensor featurize(const Tensor& waveform) {
    Tensor f = features == "mfcc" ? mfcc->forward(waveform) : to_db->forward(mel->forward(waveform));
    Tensor mean = f.mean({1, 2, 3}, true), std = f.std({1, 2, 3}, true, true);
    return (f - mean) / (std + 1e-5);
  }

  Tensor forward(Tensor waveform) override {
    Tensor f = featurize(waveform);
    if (is_training() && augment) f = time_mask->forward(freq_mask->forward(f));
    return body(f);
  }

  std::string features;
  bool augment = true;
  std::shared_ptr<T::MelSpectrogram> mel;
  std::shared_ptr<T::AmplitudeToDB> to_db;
  std::shared_ptr<T::MFCC> mfcc;
  std::shared_ptr<T::FrequencyMasking> freq_mask;
  std::shared_ptr<T::TimeMasking> time_mask;
  nn::ModuleHolder<nn::Sequential> body{nullptr};
};
NABLA_MODULE(WordNet);

// Accuracy over a dataset, in evaluation mode.
double accuracy(WordNet& model, const data::AudioFolder& set, int64_t batch_size) {
  NoGradGuard no_grad;
  model->eval();
  data::DataLoader loader(set, {.batch_size = batch_size});
  int64_t correct = 0;
  for (auto& batch : loader) correct += model(batch.data).argmax(1).eq(batch.target).sum().item<int64_t>();
  model->train();
  return static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(set.size(), 1));
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

int classify(const std::string& load, const std::string& clip) {
  safetensors::Metadata meta;
  safetensors::read_header(load, &meta);
  auto get = [&](const std::string& key) {
    auto it = meta.find(key);
    if (it == meta.end())
      throw IOError("audio_classify: '" + load + "' has no '" + key + "' metadata: was it saved by --save?");
    return it->second;
  };
  const std::vector<std::string> classes = split(get("classes"));
  WordNet model(static_cast<int64_t>(classes.size()), get("features"));
  nn::load_weights(*model, load);
  model->eval();
  auto [waveform, rate] = audio::load(clip);
  Tensor x = waveform.mean({0}, true);  // mono
  if (rate != kRate) x = audio::functional::resample(x, rate, kRate);
  x = x.size(1) >= kFrames ? x.narrow(1, 0, kFrames) : pad(x, {0, kFrames - x.size(1)});
  NoGradGuard no_grad;
  Tensor p = softmax(model(x.unsqueeze(0)), 1).squeeze(0);
  std::vector<int64_t> order(classes.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return p[a].item<double>() > p[b].item<double>(); });
  std::printf("%s (%lld Hz, %.2f s):\n", clip.c_str(), static_cast<long long>(rate),
              static_cast<double>(waveform.size(1)) / static_cast<double>(rate));
  for (size_t i = 0; i < std::min<size_t>(3, order.size()); ++i)
    std::printf("  %-10s %5.1f%%\n", classes[static_cast<size_t>(order[i])].c_str(), 100 * p[order[i]].item<double>());
  return 0;
}

int main(int argc, char** argv) try {
  examples::Flags flags(argc, argv, kHelp);
  const std::string load = flags.str("load", ""), clip = flags.str("classify", "");
  if (!clip.empty() || !load.empty()) {
    if (clip.empty() || load.empty()) flags.usage("--classify and --load go together");
    flags.finish();
    return classify(load, clip);
  }
  const std::string dir = flags.str("data", "");
  const std::string features = flags.str("features", "mel");
  const int64_t epochs = flags.integer("epochs", 30, 1, 10000);
  const int64_t batch_size = flags.integer("batch-size", 32, 1, 4096);
  const double lr = flags.number("lr", 0.002, 1e-6, 1.0);
  const int64_t seed = flags.integer("seed", 1, 0, 1 << 30);
  const int workers = static_cast<int>(flags.integer("workers", 1, 0, 64));
  const std::string save = flags.str("save", "words.safetensors");
  const bool augment = !flags.flag("no-augment");
  flags.finish();
  if (dir.empty()) flags.usage("--data DIR is needed (make it with examples/audio_classify/make_data.py DIR)");
  if (features != "mel" && features != "mfcc") flags.usage("--features is mel or mfcc, got '" + features + "'");

  manual_seed(static_cast<uint64_t>(seed));
  data::AudioFolder train(dir + "/train", {.num_frames = kFrames, .sample_rate = kRate});
  data::AudioFolder test(dir + "/test", {.num_frames = kFrames, .sample_rate = kRate});
  if (test.classes() != train.classes())
    throw ValueError("audio_classify: " + dir + "/test has the words {" + join(test.classes()) + "}, " + dir +
                     "/train has {" + join(train.classes()) + "}");
  const auto& classes = train.classes();
  std::printf("%lld training and %lld test clips of %zu words: %s\n", static_cast<long long>(train.size()),
              static_cast<long long>(test.size()), classes.size(), join(classes).c_str());

  WordNet model(static_cast<int64_t>(classes.size()), features);
  model->augment = augment;
  optim::Adam optimizer(model->parameters(), {.lr = lr});
  optim::CosineAnnealingLR schedule(optimizer, epochs);  // the rate falls to 0 by the last epoch
  data::DataLoader loader(
      train, {.batch_size = batch_size, .shuffle = true, .seed = static_cast<uint64_t>(seed), .num_workers = workers});
  double test_acc = 0;
  for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
    double loss_sum = 0;
    int64_t seen = 0, correct = 0;
    for (auto& batch : loader) {
      Tensor logits = model(batch.data);
      Tensor loss = nn::functional::cross_entropy(logits, batch.target);
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      const int64_t n = batch.target.size(0);
      loss_sum += loss.item<double>() * static_cast<double>(n);
      correct += logits.argmax(1).eq(batch.target).sum().item<int64_t>();
      seen += n;
    }
    schedule.step();
    test_acc = accuracy(model, test, 64);
    std::printf("epoch %2lld  loss %.4f  train accuracy %.4f  test accuracy %.4f\n", static_cast<long long>(epoch),
                loss_sum / static_cast<double>(seen), static_cast<double>(correct) / static_cast<double>(seen),
                test_acc);
    std::fflush(stdout);
  }
  nn::save_weights(*model, save, {{"classes", join(classes)}, {"features", features}});
  std::printf(
      "test accuracy: %.4f\nmodel saved to %s (classify a clip: audio_classify --load %s --classify CLIP.wav)\n",
      test_acc, save.c_str(), save.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "audio_classify: %s\n", e.what());
  return 1;
}
