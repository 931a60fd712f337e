// libFuzzer target: load_checkpoint and one training step. The first byte picks one of the
// training set-ups of checkpoint_run.h, the rest is the checkpoint file. Loading either succeeds
// or throws a nabla::Error, and so does the training step after it (undefined behaviour from a
// number stored in the file, such as an Adam step of 1e300 or a scheduler's last_epoch of
// INT64_MAX, is a finding under UBSan).
#include "fuzz/checkpoint_run.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static nabla_fuzz::ScratchFile file("checkpoint.safetensors");
  nabla_fuzz::CheckpointRun run(data[0]);
  const std::string& path = file.write(data + 1, size - 1);
  nabla::optim::Checkpoint ck = run.checkpoint();
  if (!nabla_fuzz::expect_clean([&] { nabla::optim::load_checkpoint(path, ck); }).empty()) return 0;
  if (run.expensive_step()) return 0;  // valid, but a step of up to a million L-BFGS iterations
  nabla_fuzz::expect_clean([&] { run.step(); });
  return 0;
}
