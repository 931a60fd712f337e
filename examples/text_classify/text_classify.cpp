// Text classification, torchtext's way: what section of the Debian archive (games, science, sound,
// ...) a package belongs to, from its description. Three models on the same data and vocabulary:
//
//   bow   TF-IDF features (text::TfidfVectorizer, scikit-learn's) -> a linear layer
//   bag   nn::EmbeddingBag, the mean of the words' vectors -> Linear (PyTorch's text classification
//         tutorial's TextClassificationModel)
//   lstm  nn::Embedding -> nn::LSTM over packed sequences (pad_token_ids + pack_padded_sequence) ->
//         Linear on each text's last hidden state
//
//   /usr/bin/python3 examples/text_classify/make_data.py debian_sections    # from apt's lists
//   build/examples/text_classify --data debian_sections --model lstm --save lstm.safetensors
//   build/examples/text_classify --load lstm.safetensors --classify "a tool to edit photos"
//
// The data: make_data.py's train.csv, test.csv (AG_NEWS's "label","title","text" rows, labels from
// 1) and classes.txt (the class names, label 1 first), read by text::TextClassificationDataset, whose
// get(i) is a text::TextExample; data::BasicDataLoader batches them in a seeded order through
// Encoder::collate (the tutorial's collate_batch), which returns this program's Batch struct.
// See examples/text_classify/README.md.
#include <nabla.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "examples/flags.h"
using namespace nabla;

const char* kHelp = R"(text_classify: learn which Debian section a package is in from its description

usage: text_classify --data DIR [--model bow|bag|lstm] [--epochs N] [--batch-size N] [--lr X]
                     [--embed-dim N] [--hidden N] [--min-freq N] [--seed N] [--save FILE]
       text_classify --load FILE --classify "a sentence" [--top N]

Make the data first (any Debian machine; it reads apt's package lists):
  /usr/bin/python3 examples/text_classify/make_data.py debian_sections [--max 600]

  --data DIR        the folder make_data.py wrote: train.csv, test.csv, classes.txt
  --model NAME      bow:  TF-IDF features of the words -> one linear layer (a logistic regression)
                    bag:  an EmbeddingBag (the mean of each word's learned vector) -> Linear
                    lstm: word vectors read in order by an LSTM -> Linear (default)
  --epochs N        passes over the training set (default 5)
  --batch-size N    texts per step (default 64)
  --lr X            Adam's learning rate (default 0.01)
  --embed-dim N     the size of a word's vector, bag and lstm (default 64)
  --hidden N        the LSTM's state size (default 128)
  --min-freq N      words seen fewer times in training become <unk> (default 2)
  --seed N          the initial weights and the order of the batches (default 1)
  --save FILE       the trained model, FILE (safetensors) and the vocabulary beside it, FILE's name
                    with .vocab instead of its extension (default text_classify.safetensors)
  --load FILE       a model saved by --save (with its .vocab), for --classify
  --classify TEXT   print the most likely sections of TEXT, with their probabilities
  --top N           how many sections --classify prints (default 3)

Each epoch prints the mean training loss and the accuracy on the training and test sets; the last
line is "test accuracy: X". With six sections, guessing gets about 1/6 right.
)";

// ---- data -------------------------------------------------------------------------------------

// One file of make_data.py's: (label, text) rows, the labels from 1 as AG_NEWS's (checked here
// against classes.txt; the collate subtracts 1).
std::shared_ptr<text::TextClassificationDataset> read_split(const std::string& path, int64_t num_classes) {
  if (!std::filesystem::exists(path))
    throw IOError("no " + path + ": make the data with examples/text_classify/make_data.py (see --help)");
  auto set = std::make_shared<text::TextClassificationDataset>(path);  // label, title, text
  if (set->size() == 0) throw IOError(path + " holds no examples");
  for (size_t i = 0; i < set->labels().size(); ++i)
    if (int64_t label = set->labels()[i]; label < 1 || label > num_classes)
      throw IOError(path + ": label " + std::to_string(label) + " of row " + std::to_string(i + 1) +
                    " is not one of classes.txt's 1.." + std::to_string(num_classes));
  return set;
}

std::vector<std::string> read_classes(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IOError("cannot read " + path + ": make the data with examples/text_classify/make_data.py");
  std::vector<std::string> classes;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) classes.push_back(line);
  if (classes.size() < 2) throw IOError(path + ": expected at least two class names, one a line");
  return classes;
}

// What a step needs: the labels and the model's input, either bags (bow, bag) or padded ids (lstm).
struct Batch {
  Tensor labels;                   // (B) int64
  Tensor input, offsets, weights;  // bags: (N) ids, (B) starts, (N) TF-IDF values (bow only)
  text::PaddedBatch padded;        // lstm: (B, T) ids and (B) lengths
};

// ---- bow's features: TF-IDF over a fixed list of terms ------------------------------------------
// scikit-learn's TfidfVectorizer(sublinear_tf=True): (1 + ln count) * idf per term, each text's row
// scaled to unit l2 norm. Training fits a text::TfidfVectorizer for the terms and their idf; the saved
// model keeps both (the terms as its vocabulary, the idf as a buffer), and this struct turns texts
// into rows from them in training and after loading alike.
struct TfidfFeatures {
  text::CountVectorizer counts;
  std::vector<double> idf;

  TfidfFeatures(const std::vector<std::string>& terms, std::vector<double> idf_)
      : counts({.tokenizer = text::get_tokenizer("basic_english")}), idf(std::move(idf_)) {
    counts.fit_tokens({terms});  // one "document" holding every term: the same features, same order
    if (counts.get_feature_names_out() != terms || idf.size() != terms.size())
      throw ValueError("the bow model's terms and idf do not match");
  }
  std::vector<text::SparseRow> rows(const std::vector<std::vector<std::string>>& tokens) const {
    std::vector<text::SparseRow> out = counts.count_rows(tokens);
    for (auto& row : out) {
      double norm = 0;
      for (auto& [j, v] : row) {
        v = (1 + std::log(v)) * idf[static_cast<size_t>(j)];
        norm += v * v;
      }
      for (auto& [j, v] : row) v /= std::sqrt(norm);
    }
    return out;
  }
};

// ---- models -----------------------------------------------------------------------------------

struct TextModel : nn::Module {
  using nn::Module::Module;
  virtual Tensor logits(const Batch& b) = 0;  // (B, num_classes)
};

// Linear on the TF-IDF row x, which is sparse: x W^T + b is an EmbeddingBag "sum" of W's columns
// weighted by x's values, plus b (no dense (B, terms) matrix is made).
struct BowModel : TextModel {
  BowModel(int64_t terms, int64_t classes, const std::vector<double>& idf_values) : TextModel("BowModel") {
    fc = register_module("fc", nn::EmbeddingBag(terms, classes, {.mode = "sum"}));
    nn::init::zeros_(fc->weight);
    bias = register_parameter("bias", zeros({classes}));
    std::vector<float> v(idf_values.begin(), idf_values.end());
    idf = register_buffer("idf", tensor(v));  // saved with the weights, for --classify
  }
  Tensor logits(const Batch& b) override { return fc->forward(b.input, b.offsets, b.weights) + bias; }
  nn::ModuleHolder<nn::EmbeddingBag> fc{nullptr};
  Tensor bias, idf;
};

// PyTorch's tutorial model: EmbeddingBag (mean) -> Linear, weights uniform in [-0.5, 0.5].
struct BagModel : TextModel {
  BagModel(int64_t vocab, int64_t embed_dim, int64_t classes) : TextModel("BagModel") {
    embedding = register_module("embedding", nn::EmbeddingBag(vocab, embed_dim, {.mode = "mean"}));
    fc = register_module("fc", nn::Linear(embed_dim, classes));
    nn::init::uniform_(embedding->weight, -0.5, 0.5);
    nn::init::uniform_(fc->weight, -0.5, 0.5);
    nn::init::zeros_(fc->bias);
  }
  Tensor logits(const Batch& b) override { return fc(embedding->forward(b.input, b.offsets)); }
  nn::ModuleHolder<nn::EmbeddingBag> embedding{nullptr};
  nn::ModuleHolder<nn::Linear> fc{nullptr};
};

// Embedding -> LSTM over the packed batch (no step is spent on padding) -> Linear on h_n.
struct LstmModel : TextModel {
  LstmModel(int64_t vocab, int64_t embed_dim, int64_t hidden, int64_t classes, int64_t pad) : TextModel("LstmModel") {
    embedding = register_module("embedding", nn::Embedding(vocab, embed_dim, {.padding_idx = pad}));
    lstm = register_module("lstm", nn::LSTM(embed_dim, hidden, {.batch_first = true}));
    dropout = register_module("dropout", nn::Dropout(0.3));
    fc = register_module("fc", nn::Linear(hidden, classes));
  }
  Tensor logits(const Batch& b) override {
    Tensor x = embedding(b.padded.padded);  // (B, T, embed_dim)
    auto packed = nn::utils::rnn::pack_padded_sequence(x, b.padded.lengths, /*batch_first=*/true,
                                                       /*enforce_sorted=*/false);
    auto out = lstm->forward_with_state(packed);  // h_n (1, B, hidden), in the batch's order
    return fc(dropout(out.h_n.select(0, 0)));
  }
  nn::ModuleHolder<nn::Embedding> embedding{nullptr};
  nn::ModuleHolder<nn::LSTM> lstm{nullptr};
  nn::ModuleHolder<nn::Dropout> dropout{nullptr};
  nn::ModuleHolder<nn::Linear> fc{nullptr};
};

// ---- batches ----------------------------------------------------------------------------------

// What turns texts into a model's input: the vocabulary (ids for bag and lstm, terms for bow).
struct Encoder {
  std::string model;
  text::Vocab vocab;
  std::optional<TfidfFeatures> tfidf;  // bow
  text::Tokenizer tokenize = text::get_tokenizer("basic_english");

  // The DataLoader's collate (the tutorial's collate_batch): a batch of (label, text) samples,
  // tokenized here, labels from 0.
  Batch collate(std::span<const text::TextExample> samples) const {
    Batch b;
    std::vector<int64_t> y;
    std::vector<std::vector<std::string>> toks;
    for (const text::TextExample& e : samples) {
      y.push_back(e.label - 1);
      toks.push_back(tokenize(e.text));
    }
    b.labels = tensor(y, kInt64);
    if (model == "bow") {
      text::EmbeddingBagInput bags = text::sparse_rows_to_bags(tfidf->rows(toks));
      b.input = bags.input, b.offsets = bags.offsets, b.weights = bags.per_sample_weights;
      return b;
    }
    std::vector<std::vector<int64_t>> ids;
    for (const auto& t : toks) ids.push_back(vocab.lookup_indices(t));
    if (model == "bag") {
      text::BagBatch bags = text::bag_token_ids(ids);  // an empty text is an empty bag: zeros
      b.input = bags.input, b.offsets = bags.offsets;
      return b;
    }
    for (auto& s : ids)
      if (s.empty()) s.push_back(vocab["<unk>"]);  // a packed sequence needs at least one step
    b.padded = text::pad_token_ids(ids, vocab["<pad>"]);
    return b;
  }
};

// Accuracy over a dataset, in batches of 512 in order, without gradients.
double accuracy(TextModel& model, const Encoder& enc, const std::shared_ptr<text::TextClassificationDataset>& set) {
  NoGradGuard no_grad;
  model.eval();
  int64_t correct = 0;
  data::BasicDataLoader loader(set, {.batch_size = 512},
                               [&](std::span<const text::TextExample> s) { return enc.collate(s); });
  for (Batch& b : loader) correct += (model.logits(b).argmax(1) == b.labels).sum().item<int64_t>();
  model.train();
  return static_cast<double>(correct) / static_cast<double>(set->size());
}

std::shared_ptr<TextModel> make_model(const std::string& kind, const Encoder& enc, int64_t embed_dim, int64_t hidden,
                                      int64_t classes) {
  if (kind == "bow") return std::make_shared<BowModel>(enc.vocab.size(), classes, enc.tfidf->idf);
  if (kind == "bag") return std::make_shared<BagModel>(enc.vocab.size(), embed_dim, classes);
  return std::make_shared<LstmModel>(enc.vocab.size(), embed_dim, hidden, classes, enc.vocab["<pad>"]);
}

std::string vocab_path(const std::string& model_path) {
  return std::filesystem::path(model_path).replace_extension(".vocab").string();
}

std::string join(const std::vector<std::string>& v, char sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : std::string(1, sep)) + x;
  return s;
}
std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s)
    if (c == sep) out.emplace_back();
    else out.back().push_back(c);
  return out;
}

// ---- --classify -------------------------------------------------------------------------------

int classify(const std::string& load, const std::string& sentence, int64_t top) {
  // The model's kind, sizes and class names are in the file's metadata; the vocabulary beside it.
  safetensors::Metadata meta = safetensors::load_file(load).metadata;
  for (const char* key : {"model", "classes", "embed_dim", "hidden"})
    if (!meta.contains(key)) throw IOError(load + " was not saved by text_classify (no '" + key + "' in its metadata)");
  Encoder enc{.model = meta["model"], .vocab = text::Vocab::load(vocab_path(load))};
  std::vector<std::string> classes = split_on(meta["classes"], '\n');
  const auto n_classes = static_cast<int64_t>(classes.size());
  if (enc.model == "bow") {
    Tensor idf = safetensors::load_file(load).tensors.at("idf").to(kFloat64).contiguous();
    const double* p = idf.data_ptr<double>();
    enc.tfidf.emplace(enc.vocab.get_itos(), std::vector<double>(p, p + idf.numel()));
  }
  auto model = make_model(enc.model, enc, std::stoll(meta["embed_dim"]), std::stoll(meta["hidden"]), n_classes);
  nn::load_weights(*model, load);
  model->eval();
  NoGradGuard no_grad;
  const text::TextExample example{.label = 1, .text = sentence};  // the label is not used
  Tensor probs = softmax(model->logits(enc.collate({&example, 1})), 1)[0];
  auto [p, idx] = probs.topk(std::min(top, n_classes));
  std::printf("\"%s\"\n", sentence.c_str());
  for (int64_t i = 0; i < p.size(0); ++i)
    std::printf("  %5.1f%%  %s\n", 100 * p[i].item<double>(),
                classes[static_cast<size_t>(idx[i].item<int64_t>())].c_str());
  return 0;
}

// ---- training ---------------------------------------------------------------------------------

int main(int argc, char** argv) try {
  examples::Flags flags(argc, argv, kHelp);
  std::string load = flags.str("load", ""), sentence = flags.str("classify", "");
  int64_t top = flags.integer("top", 3, 1, 1000);
  if (!sentence.empty() || !load.empty()) {
    flags.finish();
    if (load.empty() || sentence.empty()) flags.usage("--classify TEXT and --load FILE go together");
    return classify(load, sentence, top);
  }
  std::string data_dir = flags.str("data", "");
  std::string kind = flags.str("model", "lstm");
  if (kind != "bow" && kind != "bag" && kind != "lstm") flags.usage("--model is bow, bag or lstm, not '" + kind + "'");
  int64_t epochs = flags.integer("epochs", 5, 1, 100000);
  int64_t batch_size = flags.integer("batch-size", 64, 1, 1 << 20);
  double lr = flags.number("lr", 1e-2, 1e-9, 100);
  int64_t embed_dim = flags.integer("embed-dim", 64, 1, 1 << 16);
  int64_t hidden = flags.integer("hidden", 128, 1, 1 << 16);
  int64_t min_freq = flags.integer("min-freq", 2, 1, 1 << 30);
  int64_t seed = flags.integer("seed", 1, 0, INT64_MAX);
  std::string save = flags.str("save", "text_classify.safetensors");
  flags.finish();
  if (data_dir.empty()) flags.usage("which data? --data DIR (make it with examples/text_classify/make_data.py)");

  manual_seed(static_cast<uint64_t>(seed));
  auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::vector<std::string> classes = read_classes(data_dir + "/classes.txt");
  const auto n_classes = static_cast<int64_t>(classes.size());
  auto train = read_split(data_dir + "/train.csv", n_classes), test = read_split(data_dir + "/test.csv", n_classes);
  Encoder enc{.model = kind};
  std::vector<std::vector<std::string>> train_tokens;
  for (const std::string& t : train->texts()) train_tokens.push_back(enc.tokenize(t));

  // The vocabulary: the training words seen at least min_freq times, most frequent first.
  if (kind == "bow") {
    text::TfidfVectorizer tfidf({.min_df = min_freq, .tokenizer = enc.tokenize, .sublinear_tf = true});
    tfidf.fit(train->texts());
    enc.vocab = text::Vocab(tfidf.get_feature_names_out());
    enc.tfidf.emplace(tfidf.get_feature_names_out(), tfidf.idf());
    // The rows --classify will make from the saved terms and idf are the vectorizer's own.
    std::vector<std::vector<std::string>> some(train_tokens.begin(),
                                               train_tokens.begin() + std::min<size_t>(200, train_tokens.size()));
    auto mine = enc.tfidf->rows(some), theirs = tfidf.transform_rows(some);
    for (size_t i = 0; i < mine.size(); ++i)
      for (size_t j = 0; j < mine[i].size(); ++j)
        if (j >= theirs[i].size() || mine[i][j].first != theirs[i][j].first ||
            std::abs(mine[i][j].second - theirs[i][j].second) > 1e-9)
          throw ValueError("the bow features differ from TfidfVectorizer's");
  } else {
    enc.vocab = text::build_vocab_from_iterator(train_tokens, {.min_freq = min_freq, .specials = {"<unk>", "<pad>"}});
    enc.vocab.set_default_index(enc.vocab["<unk>"]);
  }
  std::printf("%s: %lld training and %lld test texts, %lld classes; a vocabulary of %lld %s\n", data_dir.c_str(),
              static_cast<long long>(train->size()), static_cast<long long>(test->size()),
              static_cast<long long>(n_classes), static_cast<long long>(enc.vocab.size()),
              kind == "bow" ? "terms" : "words");

  auto model = make_model(kind, enc, embed_dim, hidden, n_classes);
  optim::Adam optimizer(model->parameters(), {.lr = lr});
  // The training texts in a fresh seeded order each epoch, batched by the collate.
  data::BasicDataLoader loader(train, {.batch_size = batch_size, .shuffle = true, .seed = static_cast<uint64_t>(seed)},
                               [&](std::span<const text::TextExample> s) { return enc.collate(s); });
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    double loss_sum = 0;
    int64_t steps = 0;
    for (Batch& b : loader) {
      Tensor loss = nn::functional::cross_entropy(model->logits(b), b.labels);
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      ++steps;
    }
    std::printf("epoch %3lld  loss %.4f  train accuracy %.4f  test accuracy %.4f  (%.1f s)\n",
                static_cast<long long>(epoch + 1), loss_sum / static_cast<double>(steps), accuracy(*model, enc, train),
                accuracy(*model, enc, test), seconds());
  }
  nn::save_weights(*model, save,
                   {{"model", kind},
                    {"classes", join(classes, '\n')},
                    {"embed_dim", std::to_string(embed_dim)},
                    {"hidden", std::to_string(hidden)}});
  enc.vocab.save(vocab_path(save));
  std::printf("saved %s and %s\n", save.c_str(), vocab_path(save).c_str());
  std::printf("test accuracy: %.4f\n", accuracy(*model, enc, test));
} catch (const std::exception& e) {
  std::fprintf(stderr, "text_classify: %s\n", e.what());
  return 1;
}
