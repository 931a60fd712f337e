// Pieces shared by the mnist subcommands.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "examples/mnist/models.h"
#include "nabla.h"

namespace mnist {

int cmd_train(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_predict(int argc, char** argv);
int cmd_export(int argc, char** argv);

// Exit codes.
inline constexpr int kExitOk = 0, kExitError = 1, kExitUsage = 2, kExitNoData = 3, kExitInterrupted = 130;

// An error that already carries the message for the user (printed as "mnist: <message>").
struct Failure : std::runtime_error {
  Failure(const std::string& msg, int code) : std::runtime_error(msg), code(code) {}
  int code;
};

// A string's contents for a JSON string literal (quotes, backslashes and control characters escaped).
std::string json_escape(const std::string& s);

// "auto" picks CUDA when a GPU is usable, else the CPU.
nabla::Device pick_device(const std::string& spec);

// Loads the train or test split, explaining how to fetch the files when they are missing.
std::shared_ptr<nabla::data::MNIST> load_split(const std::string& dataset, const std::string& dir, bool train);
std::string default_data_dir(const std::string& dataset);
std::string dataset_title(const std::string& dataset);  // "MNIST", "Fashion-MNIST"

// (x - mean) / std, on the batch's device.
inline nabla::Tensor normalize(const nabla::Tensor& x) { return (x - kMean) / kStd; }

// The mnist.* values stored in a checkpoint's metadata (see train.cpp).
std::map<std::string, std::string> read_checkpoint_info(const std::string& path);

// Loads the model recorded in a checkpoint, in eval mode, on `device`.
ModelInfo load_trained_model(const std::string& checkpoint, nabla::Device device,
                             std::map<std::string, std::string>* info = nullptr);

}  // namespace mnist
