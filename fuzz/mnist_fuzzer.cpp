// libFuzzer target: the mnist program's inputs. The first byte picks what the rest is:
//   even: a command line, arguments separated by NUL bytes ("train\0--epochs\0003"), given to the
//         parser of its command (parse_train_args, ...), which checks every value and touches no file;
//   odd:  a checkpoint file, read as `mnist eval`, `predict` and `train --resume` read one: its
//         mnist.* metadata (settings_from_metadata, progress_from_metadata) and the model in it.
// The program's own errors (UsageError, Failure) and nabla::Errors are expected outcomes; any
// other exception (std::out_of_range from map::at, std::invalid_argument from stoll, ...) is a
// finding, as are crashes and sanitizer reports.
#include <string>
#include <vector>

#include "examples/mnist/args.h"
#include "examples/mnist/cli.h"
#include "examples/mnist/common.h"
#include "fuzz/fuzz_util.h"

namespace {

void command_line(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"mnist"};
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(data[i]);
    }
  }
  args.push_back(cur);
  if (args.size() < 2) return;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int argc = static_cast<int>(args.size());
  const std::string& cmd = args[1];
  if (cmd == "train") mnist::parse_train_args(argc, argv.data());
  else if (cmd == "eval") mnist::parse_eval_args(argc, argv.data());
  else if (cmd == "predict") mnist::parse_predict_args(argc, argv.data());
  else if (cmd == "export") mnist::parse_export_args(argc, argv.data());
}

void checkpoint(const uint8_t* data, size_t size) {
  static nabla_fuzz::ScratchFile file("mnist.safetensors");
  const std::string& path = file.write(data, size);
  auto info = mnist::read_checkpoint_info(path);
  mnist::settings_from_metadata(info, path);
  mnist::load_trained_model(path, nabla::kCPU);
  nabla::optim::Checkpoint ck{.rng = false};
  nabla::optim::load_checkpoint(path, ck);
  mnist::progress_from_metadata(ck.metadata, path, 60000);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  nabla_fuzz::expect_clean([&] {
    try {
      if (data[0] % 2 == 0) command_line(data + 1, size - 1);
      else checkpoint(data + 1, size - 1);
    } catch (const mnist::UsageError& e) {
      if (!*e.what()) nabla_fuzz::finding("a UsageError with an empty message", "");
    } catch (const mnist::Failure& e) {
      if (!*e.what()) nabla_fuzz::finding("a Failure with an empty message", "");
    }
  });
  return 0;
}
