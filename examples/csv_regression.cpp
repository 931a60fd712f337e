// A custom Dataset read from a CSV file, and an MLP that learns to predict one of its columns from
// the others: a train/validation split, standardisation kept inside the model (saved with it), Adam
// with a cosine learning-rate schedule, gradient clipping and a checkpoint to resume from.
//
//   build/examples/csv_regression --write-demo houses.csv     # 2,000 made-up houses, price_k last
//   build/examples/csv_regression houses.csv --target price_k --epochs 40
//
// The CSV: a header line of column names, then one line of numbers per example (no quoting; empty
// lines are skipped). Any other content is an error that names the line and the column, and so is a
// number float32 cannot hold (beyond +-3.4e38) or a header of more than --max-columns columns.
// Training stops with an error, and saves nothing, when the loss stops being a finite number.
#include <nabla.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "examples/flags.h"
using namespace nabla;

const char* kHelp = R"(csv_regression: learn to predict one column of a CSV file from the others (an MLP)

usage: csv_regression FILE.csv [--target NAME] [--epochs N] [--batch-size N] [--lr X] [--hidden N]
                      [--seed N] [--checkpoint FILE] [--save FILE] [--max-columns N]
       csv_regression --write-demo FILE.csv [--rows N]

  FILE.csv          a header of column names, then rows of numbers
  --target NAME     the column to predict (default: the last one)
  --epochs N        passes over the training rows (default 40)
  --batch-size N    rows per step (default 32)
  --lr X            Adam's learning rate at the start of the cosine schedule (default 0.003)
  --hidden N        width of the two hidden layers (default 64)
  --seed N          the split, the initial weights and the shuffling (default 1)
  --checkpoint FILE save model, optimizer, schedule and data order there after every epoch, and
                    resume from it when it exists (Ctrl-C and rerun the same command)
  --save FILE       the trained model's weights, with the standardisation (default regressor.safetensors)
  --max-columns N   refuse a header with more columns than this (default 10000): each feature
                    column widens the first layer, so a wrong file could take all the memory
  --write-demo FILE write a made-up CSV of houses (area_m2, rooms, age_years, distance_km, price_k)
  --rows N          rows of the demo file (default 2000)
)";

// ---- the dataset ------------------------------------------------------------------------------
// Any Dataset: size() and get(i). This one reads the whole file at construction and keeps the
// numbers in two tensors, so get_batch gathers a batch in one step instead of stacking examples.
// At most this much of a field or a header is quoted in an error message.
constexpr size_t kQuoteBytes = 40;
std::string quote(const std::string& s) {
  if (s.size() <= kQuoteBytes) return "'" + s + "'";
  return "'" + s.substr(0, kQuoteBytes) + "...' (" + std::to_string(s.size()) + " bytes)";
}

class CsvDataset : public data::Dataset {
 public:
  CsvDataset(const std::string& path, const std::string& target, int64_t max_columns) {
    std::ifstream in(path);
    if (!in) throw IOError("cannot open '" + path + "'");
    std::string line;
    int64_t line_no = 0;
    std::vector<float> values;
    while (std::getline(in, line)) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      if (columns_.empty()) {
        // Counted before the header is split: a header of 10^7 names would cost gigabytes.
        const auto n = static_cast<int64_t>(std::count(line.begin(), line.end(), ',')) + 1;
        if (n > max_columns)
          throw IOError(path + ":" + std::to_string(line_no) + ": the header names " + std::to_string(n) +
                        " columns, more than --max-columns " + std::to_string(max_columns) +
                        " (raise it if the file is right)");
        columns_ = split(line);
        continue;
      }
      std::vector<std::string> fields = split(line);
      if (fields.size() != columns_.size())
        throw IOError(path + ":" + std::to_string(line_no) + ": " + std::to_string(fields.size()) +
                      " fields, but the header names " + std::to_string(columns_.size()) + " columns");
      for (size_t c = 0; c < fields.size(); ++c) {
        const std::string& f = fields[c];
        double v = 0;
        auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
        const std::string where = path + ":" + std::to_string(line_no) + ": column " + quote(columns_[c]);
        // from_chars reports result_out_of_range for 1e400; 1e39 parses but float32 cannot hold it.
        if (!f.empty() && end == f.data() + f.size() &&
            (ec == std::errc::result_out_of_range ||
             (ec == std::errc() && std::isfinite(v) && std::abs(v) > std::numeric_limits<float>::max())))
          throw IOError(where + ": " + quote(f) + " is beyond float32's range (magnitudes up to 3.4e38)");
        if (f.empty() || ec != std::errc() || end != f.data() + f.size() || !std::isfinite(v))
          throw IOError(where + " is not a finite number: " + quote(f));
        values.push_back(static_cast<float>(v));
      }
    }
    if (columns_.size() < 2) throw IOError(path + ": expected a header with at least two columns");
    const auto rows = static_cast<int64_t>(values.size() / columns_.size());
    if (rows == 0) throw IOError(path + ": no rows of numbers after the header");
    int64_t t = static_cast<int64_t>(columns_.size()) - 1;
    if (!target.empty()) {
      auto it = std::find(columns_.begin(), columns_.end(), target);
      if (it == columns_.end()) throw ValueError("--target " + quote(target) + " is not a column of " + path);
      t = it - columns_.begin();
    }
    target_name_ = columns_[static_cast<size_t>(t)];
    Tensor all = tensor(values, {rows, static_cast<int64_t>(columns_.size())});
    std::vector<int64_t> keep;
    for (int64_t c = 0; c < all.size(1); ++c)
      if (c != t) keep.push_back(c);
    features_ = all.index_select(1, tensor(keep, kInt64)).contiguous();
    targets_ = all.index({indexing::Slice(), indexing::Slice(t, t + 1)}).contiguous();  // (rows, 1)
  }

  int64_t size() const override { return features_.size(0); }
  data::Example get(int64_t i) const override { return {features_[i], targets_[i]}; }
  data::Example get_batch(std::span<const int64_t> indices) const override {
    Tensor idx = tensor(std::vector<int64_t>(indices.begin(), indices.end()), kInt64);
    return {features_.index_select(0, idx), targets_.index_select(0, idx)};
  }
  int64_t num_features() const { return features_.size(1); }
  const std::string& target_name() const { return target_name_; }

 private:
  static std::vector<std::string> split(const std::string& line) {
    std::vector<std::string> out;
    std::stringstream ss(line);
    std::string f;
    while (std::getline(ss, f, ',')) {
      auto b = f.find_first_not_of(" \t"), e = f.find_last_not_of(" \t");
      out.push_back(b == std::string::npos ? "" : f.substr(b, e - b + 1));
    }
    if (!line.empty() && line.back() == ',') out.push_back("");
    return out;
  }
  std::vector<std::string> columns_;
  std::string target_name_;
  Tensor features_, targets_;
};

// ---- the model --------------------------------------------------------------------------------
// Inputs and the target are standardised with the training rows' mean and standard deviation,
// held as buffers: they are saved with the weights, so the saved model takes raw rows. The
// statistics are computed in float64, so columns near float32's limits do not overflow them.
struct RegressorImpl : nn::Module {
  RegressorImpl(const Tensor& x, const Tensor& y, int64_t hidden) {
    auto mean = [](const Tensor& t) { return t.to(kFloat64).mean({0}).to(kFloat32); };
    auto stdev = [](const Tensor& t) { return t.to(kFloat64).std({0}).clamp_min(1e-6).to(kFloat32); };
    x_mean = register_buffer("x_mean", mean(x));
    x_std = register_buffer("x_std", stdev(x));
    y_mean = register_buffer("y_mean", mean(y));
    y_std = register_buffer("y_std", stdev(y));
    body = register_module("body", nn::Sequential(nn::Linear(x.size(1), hidden), nn::ReLU(), nn::Linear(hidden, hidden),
                                                  nn::ReLU(), nn::Linear(hidden, 1)));
  }
  // The standardised prediction (what the loss compares with standardise_target(y)).
  Tensor forward(Tensor x) override { return body((x - x_mean) / x_std); }
  Tensor standardise_target(const Tensor& y) const { return (y - y_mean) / y_std; }
  Tensor predict(const Tensor& x) { return forward(x) * y_std + y_mean; }

  Tensor x_mean, x_std, y_mean, y_std;
  nn::ModuleHolder<nn::Sequential> body{nullptr};
};
NABLA_MODULE(Regressor);

// Every example of a dataset in one batch (these datasets are small).
data::Example all_rows(const data::Dataset& set) {
  std::vector<int64_t> rows(static_cast<size_t>(set.size()));
  std::iota(rows.begin(), rows.end(), int64_t{0});
  return set.get_batch(rows);
}

// Mean squared error (in the target's units) and R² over a dataset.
std::pair<double, double> evaluate(Regressor& model, const data::Dataset& set) {
  NoGradGuard no_grad;
  model->eval();
  data::Example e = all_rows(set);
  double mse = nn::functional::mse_loss(model->predict(e.data), e.target).item<double>();
  double var = e.target.var({0}, /*unbiased=*/false).item<double>();
  model->train();
  return {mse, var > 0 ? 1 - mse / var : 0.0};
}

void write_demo(const std::string& path, int64_t rows) {
  std::mt19937 gen(1);
  std::uniform_real_distribution<double> area(30, 250), age(0, 80), distance(0.2, 40), noise(-1, 1);
  std::uniform_int_distribution<int> rooms(1, 8);
  std::ofstream out(path);
  if (!out) throw IOError("cannot write '" + path + "'");
  out << "area_m2,rooms,age_years,distance_km,price_k\n";
  for (int64_t i = 0; i < rows; ++i) {
    double a = area(gen), d = distance(gen), g = age(gen);
    int r = rooms(gen);
    double price = 40 + 2.4 * a + 12 * r - 0.9 * g - 55 * std::log1p(d) + 0.004 * a * (80 - g) + 15 * noise(gen);
    out << std::fixed;
    out.precision(1);
    out << a << "," << r << "," << g << "," << d << "," << price << "\n";
  }
  if (!out.flush()) throw IOError("cannot write '" + path + "'");
}

int main(int argc, char** argv) try {
  examples::Flags flags(argc, argv, kHelp);
  std::string demo = flags.str("write-demo", "");
  if (!demo.empty()) {
    int64_t rows = flags.integer("rows", 2000, 10, 10'000'000);
    flags.finish();
    write_demo(demo, rows);
    std::printf("wrote %lld rows to %s; now: csv_regression %s --target price_k\n", static_cast<long long>(rows),
                demo.c_str(), demo.c_str());
    return 0;
  }
  std::string target = flags.str("target", "");
  int64_t epochs = flags.integer("epochs", 40, 1, 100000);
  int64_t batch_size = flags.integer("batch-size", 32, 1, 1 << 20);
  double lr = flags.number("lr", 3e-3, 1e-9, 10);
  int64_t hidden = flags.integer("hidden", 64, 1, 1 << 16);
  int64_t seed = flags.integer("seed", 1, 0, INT64_MAX);
  std::string checkpoint = flags.str("checkpoint", "");
  std::string save = flags.str("save", "regressor.safetensors");
  int64_t max_columns = flags.integer("max-columns", 10000, 2, 100'000'000);
  flags.finish(1);
  if (flags.positional().empty()) flags.usage("which CSV file? (or --write-demo FILE to make one)");

  manual_seed(static_cast<uint64_t>(seed));
  CsvDataset rows(flags.positional()[0], target, max_columns);
  if (rows.size() < 5)
    throw ValueError(flags.positional()[0] + ": at least 5 rows are needed to split off a validation set");
  auto parts = data::random_split_fractions(rows, {0.8, 0.2}, static_cast<uint64_t>(seed));
  data::Subset& train_set = parts[0];
  data::Subset& val_set = parts[1];
  std::printf("%s: %lld rows, %lld features -> %s; %lld for training, %lld for validation\n",
              flags.positional()[0].c_str(), static_cast<long long>(rows.size()),
              static_cast<long long>(rows.num_features()), rows.target_name().c_str(),
              static_cast<long long>(train_set.size()), static_cast<long long>(val_set.size()));

  data::Example train_all = all_rows(train_set);
  Regressor model(train_all.data, train_all.target, hidden);
  optim::Adam optimizer(model->parameters(), {.lr = lr});
  optim::CosineAnnealingLR schedule(optimizer, epochs);
  data::DataLoader loader(train_set, {.batch_size = batch_size, .shuffle = true, .seed = static_cast<uint64_t>(seed)});

  optim::Checkpoint ck{.model = model.get(), .optimizer = &optimizer, .scheduler = &schedule, .loader = &loader};
  if (!checkpoint.empty() && std::filesystem::exists(checkpoint)) {
    optim::load_checkpoint(checkpoint, ck);
    std::printf("resumed from %s after epoch %lld\n", checkpoint.c_str(), static_cast<long long>(ck.epoch));
  }
  for (int64_t epoch = ck.epoch; epoch < epochs; ++epoch) {
    double sum = 0;
    int64_t steps = 0;
    for (auto& batch : loader) {
      Tensor loss = nn::functional::mse_loss(model(batch.data), model->standardise_target(batch.target));
      const double l = loss.item<double>();
      // A loss that is not finite stays so: stop before anything is saved over earlier work.
      if (!std::isfinite(l))
        throw ValueError("training diverged: the loss is " + std::to_string(l) + " at epoch " +
                         std::to_string(epoch + 1) + ", step " + std::to_string(steps + 1) +
                         "; nothing was saved (try a smaller --lr, or check the data for extreme values)");
      optimizer.zero_grad();
      loss.backward();
      nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      optimizer.step();
      sum += l;
      ++steps;
    }
    schedule.step();
    auto [val_mse, val_r2] = evaluate(model, val_set);
    std::printf("epoch %3lld  train loss %.4f (standardised)  validation RMSE %.3f  R^2 %.4f  lr %.2g\n",
                static_cast<long long>(epoch + 1), sum / static_cast<double>(std::max<int64_t>(steps, 1)),
                std::sqrt(val_mse), val_r2, optimizer.lr());
    ck.epoch = epoch + 1;
    if (!checkpoint.empty()) optim::save_checkpoint(checkpoint, ck);
  }
  auto [val_mse, val_r2] = evaluate(model, val_set);
  nn::save_weights(*model, save);
  std::printf("validation RMSE %.3f, R^2 %.4f; weights and standardisation saved to %s\n", std::sqrt(val_mse), val_r2,
              save.c_str());
} catch (const std::exception& e) {
  std::fprintf(stderr, "csv_regression: %s\n", e.what());
  return 1;
}
