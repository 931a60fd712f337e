// Regression on a dataset read from a CSV file, in libtorch's idioms: a custom Dataset whose
// constructor parses the file (torch::from_blob over the parsed rows), a Lambda transform on each
// example, a Stack<> collation, a Sequential model, MSELoss, RMSprop with a StepLR schedule, and
// torch::save / torch::load of a tensor. The program writes its CSV file first (fixed formulas), so
// that libtorch 1.13 and nabla's torch layer read the same numbers and print the same results.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

// Rows x0,x1,x2,y with y = 0.5 x0 - 1.5 x1 + x2 x0 + 0.25.
void write_csv(const std::string& path, int rows) {
  std::ofstream f(path);
  f << "x0,x1,x2,y\n";
  for (int i = 0; i < rows; ++i) {
    double x0 = std::sin(i * 0.37), x1 = std::cos(i * 0.11), x2 = std::sin(i * 0.05 + 1.0);
    f << x0 << "," << x1 << "," << x2 << "," << 0.5 * x0 - 1.5 * x1 + x2 * x0 + 0.25 << "\n";
  }
}

class CSVDataset : public torch::data::datasets::Dataset<CSVDataset> {
 public:
  explicit CSVDataset(const std::string& path) {
    std::ifstream file(path);
    TORCH_CHECK(file.good(), "cannot open ", path);
    std::string line;
    std::getline(file, line);  // the header
    std::vector<float> values;
    int64_t rows = 0;
    while (std::getline(file, line)) {
      std::stringstream ss(line);
      for (std::string cell; std::getline(ss, cell, ',');) values.push_back(std::stof(cell));
      ++rows;
    }
    TORCH_CHECK(values.size() == static_cast<size_t>(rows * 4), "ragged CSV: ", values.size(), " values");
    torch::Tensor table = torch::from_blob(values.data(), {rows, 4}, torch::kFloat32).clone();
    features_ = table.narrow(1, 0, 3);
    targets_ = table.narrow(1, 3, 1);
  }
  torch::data::Example<> get(size_t index) override {
    const auto i = static_cast<int64_t>(index);
    return {features_[i], targets_[i]};
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(features_.size(0)); }

 private:
  torch::Tensor features_, targets_;
};

int main() {
  write_csv("data.csv", 96);
  using Example = torch::data::Example<>;
  auto dataset = CSVDataset("data.csv")
                     .map(torch::data::transforms::Lambda<Example>([](Example e) {
                       return Example{torch::cat({e.data, e.data.pow(2)}), e.target};  // (6) features
                     }))
                     .map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(std::move(dataset), 16);

  torch::nn::Sequential model(torch::nn::Linear(6, 12), torch::nn::ReLU(), torch::nn::Linear(12, 1));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->named_parameters()) {
      torch::Tensor i = torch::arange(0, p.value().numel(), torch::kFloat32);
      p.value().copy_((i * 0.61 + static_cast<double>(p.key().size())).cos().mul(0.3).view_as(p.value()));
    }
  }
  torch::optim::RMSprop optimizer(model->parameters(), torch::optim::RMSpropOptions(0.01).alpha(0.9));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/2, /*gamma=*/0.5);
  torch::nn::MSELoss criterion;
  for (int epoch = 1; epoch <= 6; ++epoch) {
    double total = 0;
    int64_t count = 0;
    for (auto& batch : *loader) {
      optimizer.zero_grad();
      torch::Tensor loss = criterion(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      total += loss.item<double>() * static_cast<double>(batch.data.size(0));
      count += batch.data.size(0);
    }
    scheduler.step();
    std::printf("epoch %d mse %.6f lr %.6f\n", epoch, total / static_cast<double>(count),
                optimizer.param_groups()[0].options().get_lr());
  }
  torch::NoGradGuard no_grad;
  torch::Tensor probe = torch::tensor({{0.1f, 0.2f, 0.3f, 0.01f, 0.04f, 0.09f}});
  torch::Tensor prediction = model->forward(probe);
  torch::save(prediction, "prediction.pt");
  torch::Tensor loaded;
  torch::load(loaded, "prediction.pt");
  std::printf("prediction %.6f reloaded %.6f\n", prediction.item<double>(), loaded.item<double>());
}
