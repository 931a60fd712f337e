// mnist: train, evaluate and use handwritten-digit classifiers with nabla.
#include <cstdio>
#include <cstring>
#include <string>

#include "examples/mnist/cli.h"
#include "examples/mnist/common.h"

namespace {

const char* kUsage =
    "usage: mnist <command> [options]\n"
    "\n"
    "Train a network on handwritten digits and use it.\n"
    "\n"
    "commands:\n"
    "  train      train a model (default: a small CNN that reaches 99%+ in 3 epochs)\n"
    "  eval       test accuracy, per-class precision/recall and the confusion matrix of a checkpoint\n"
    "  predict    classify your own images (PNG, JPEG, BMP)\n"
    "  export     write test-set digits as PNG files, to try predict on, or a model as ONNX (--onnx)\n"
    "\n"
    "Run `mnist <command> --help` for a command's options. The data comes from scripts/get-data.sh.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? mnist::kExitUsage : mnist::kExitOk;
  }
  std::string cmd = argv[1];
  try {
    if (cmd == "train") return mnist::cmd_train(argc, argv);
    if (cmd == "eval") return mnist::cmd_eval(argc, argv);
    if (cmd == "predict") return mnist::cmd_predict(argc, argv);
    if (cmd == "export") return mnist::cmd_export(argc, argv);
    std::fprintf(stderr, "mnist: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
    return mnist::kExitUsage;
  } catch (const mnist::UsageError& e) {
    std::fprintf(stderr, "mnist %s: %s\n(see `mnist %s --help`)\n", cmd.c_str(), e.what(), cmd.c_str());
    return mnist::kExitUsage;
  } catch (const mnist::Failure& e) {
    std::fprintf(stderr, "mnist: %s\n", e.what());
    return e.code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mnist: %s\n", e.what());
    return mnist::kExitError;
  } catch (...) {  // (nothing nabla throws; a message and exit code 1 rather than an abort all the same)
    std::fprintf(stderr, "mnist %s: stopped by an unknown error\n", cmd.c_str());
    return mnist::kExitError;
  }
}
