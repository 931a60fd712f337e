// float16 and bfloat16 tensors through nabla's file formats, bit for bit: every one of the 65,536
// patterns of each dtype (both zeros, subnormals, infinities, NaNs with their sign and payload)
// comes back from safetensors, PyTorch's files and .npy (float16; numpy has no bfloat16) with the
// same bits. Checkpoints of a half-precision model therefore lose nothing on a save and a load.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "nabla.h"

using namespace nabla;
namespace fs = std::filesystem;

namespace {

std::string tmp_path(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / "nabla_lowp_bits_test";
  fs::create_directories(dir);
  return (dir / name).string();
}

// The 65,536 bit patterns as a (256, 256) tensor of `dt` (a 16-bit float dtype).
Tensor every_pattern(DType dt) {
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(i);
  return from_blob(bits.data(), {256, 256}, TensorOptions().dtype(dt)).clone();
}

// Whether t holds exactly want's bytes (dtype and shape too).
::testing::AssertionResult same_bits(const Tensor& t, const Tensor& want) {
  if (t.dtype() != want.dtype() || t.sizes() != want.sizes())
    return ::testing::AssertionFailure() << "got " << t.dtype() << " " << t.sizes() << ", want " << want.dtype() << " "
                                         << want.sizes();
  Tensor c = t.contiguous();
  const auto* a = static_cast<const uint16_t*>(c.data_ptr());
  const auto* b = static_cast<const uint16_t*>(want.data_ptr());
  for (int64_t i = 0; i < want.numel(); ++i)
    if (a[i] != b[i]) return ::testing::AssertionFailure() << "element " << i << ": bits " << a[i] << " want " << b[i];
  return ::testing::AssertionSuccess();
}

}  // namespace

TEST(LowpBits, SafetensorsKeepsEvery16BitPattern) {
  const Tensor f16 = every_pattern(kFloat16), bf16 = every_pattern(kBFloat16);
  nn::StateDict sd;
  sd.insert("f16", f16);
  sd.insert("bf16", bf16);
  sd.insert("bf16.strided", bf16.t());  // written contiguous, as its values
  const std::string path = tmp_path("bits.safetensors");
  safetensors::save_file(sd, path);
  safetensors::File f = safetensors::load_file(path);
  EXPECT_TRUE(same_bits(f.tensors["f16"], f16));
  EXPECT_TRUE(same_bits(f.tensors["bf16"], bf16));
  EXPECT_TRUE(same_bits(f.tensors["bf16.strided"], bf16.t().contiguous()));
}

TEST(LowpBits, TorchFilesKeepEvery16BitPattern) {
  const Tensor f16 = every_pattern(kFloat16), bf16 = every_pattern(kBFloat16);
  nn::StateDict sd;
  sd.insert("f16", f16);
  sd.insert("bf16", bf16);
  const std::string path = tmp_path("bits.pt");
  torch_io::save(path, torch_io::Value(sd));
  nn::StateDict back = torch_io::load(path).flatten_tensors();
  EXPECT_TRUE(same_bits(back["f16"], f16));
  EXPECT_TRUE(same_bits(back["bf16"], bf16));
}

TEST(LowpBits, NpyKeepsEveryFloat16Pattern) {
  const Tensor f16 = every_pattern(kFloat16);
  const std::string path = tmp_path("bits.npy");
  save_npy(f16, path);
  EXPECT_TRUE(same_bits(load_npy(path), f16));
}

// A model converted to bfloat16 saves and loads into a fresh bfloat16 model with the same bits.
TEST(LowpBits, HalfPrecisionModelCheckpointsRoundTrip) {
  for (DType dt : {kFloat16, kBFloat16}) {
    manual_seed(5);
    nn::Linear a(16, 8), b(16, 8);
    a.to(dt);
    b.to(dt);
    const std::string path = tmp_path(std::string("model_") + dtype_name(dt) + ".safetensors");
    safetensors::save_file(a.state_dict(), path);
    b.load_state_dict(safetensors::load_file(path).tensors);
    EXPECT_TRUE(same_bits(b.weight, a.weight)) << dtype_name(dt);
    EXPECT_TRUE(same_bits(b.bias, a.bias)) << dtype_name(dt);
  }
}
