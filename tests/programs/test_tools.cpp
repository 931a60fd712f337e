// The command-line tools, end to end: nabla-inspect and nabla-convert on the PyTorch fixtures of
// tests/torch_files/, safetensors, .npy and .npz files; their --help, errors and exit codes; and,
// with Debian's python3-torchvision, a torchvision resnet18 state dict: 122 tensors with the shapes
// PyTorch reports, and .pt -> .safetensors -> .pt bitwise equal as PyTorch reads it back.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/file.h"
#include "io/zip.h"
#include "nabla.h"
#include "tests/common/python_torch.h"

using namespace nabla;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct Result {
  int code;
  std::string out;
};

Result run(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

Result inspect(const std::string& args) { return run(std::string(NABLA_INSPECT_BIN) + " " + args); }
Result convert(const std::string& args) { return run(std::string(NABLA_CONVERT_BIN) + " " + args); }

json inspect_json(const std::string& file) {
  Result r = inspect("--json '" + file + "'");
  EXPECT_EQ(r.code, 0) << r.out;
  return json::parse(r.out);
}

// name -> (dtype, shape, crc32)
std::map<std::string, std::string> summary(const json& j) {
  std::map<std::string, std::string> m;
  for (const auto& t : j["tensors"])
    m[t["name"]] = t["dtype"].get<std::string>() + " " + t["shape"].dump() + " " + t["crc32"].get<std::string>();
  return m;
}

const std::string kFixtures = std::string(NABLA_TESTS_DIR) + "/torch_files/";

class Tools : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nabla_tools_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

}  // namespace

TEST_F(Tools, HelpExplainsUsage) {
  Result a = inspect("--help"), b = convert("--help");
  EXPECT_EQ(a.code, 0);
  EXPECT_EQ(b.code, 0);
  EXPECT_NE(a.out.find("usage: nabla-inspect"), std::string::npos);
  EXPECT_NE(a.out.find("crc32"), std::string::npos);
  EXPECT_NE(b.out.find("usage: nabla-convert [--max-mb N] IN OUT"), std::string::npos);
  EXPECT_NE(b.out.find(".safetensors"), std::string::npos);
}

TEST_F(Tools, UsageMistakesExitWithTwo) {
  EXPECT_EQ(inspect("").code, 2);
  EXPECT_EQ(inspect("--bogus x").code, 2);
  EXPECT_EQ(convert("onlyone.pt").code, 2);
  Result r = convert(kFixtures + "tensor.pt " + path("out.weird"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("cannot tell the format"), std::string::npos) << r.out;
}

TEST_F(Tools, UnreadableFilesExitWithOneAndSayWhy) {
  Result r = inspect(path("missing.pt"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("cannot open"), std::string::npos) << r.out;
  r = inspect(std::string(NABLA_TESTS_DIR) + "/hostile/torch/os_system.pt");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("refusing GLOBAL posix.system"), std::string::npos) << r.out;
  r = convert(std::string(NABLA_TESTS_DIR) + "/hostile/torch/short_storage.pt " + path("x.safetensors"));
  EXPECT_EQ(r.code, 1);
  EXPECT_FALSE(fs::exists(path("x.safetensors")));
}

TEST_F(Tools, InspectListsAStateDict) {
  Result r = inspect(kFixtures + "state_dict.pt");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PyTorch (torch.save zip archive), 9 tensors"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0.weight"), std::string::npos);
  EXPECT_NE(r.out.find("[2, 1, 3, 3]"), std::string::npos);
  EXPECT_NE(r.out.find("1.num_batches_tracked  int64"), std::string::npos) << r.out;
  json j = inspect_json(kFixtures + "state_dict.pt");
  ASSERT_EQ(j["tensors"].size(), 9u);
  EXPECT_EQ(j["tensors"][0]["name"], "0.weight");
  EXPECT_EQ(j["tensors"][0]["bytes"], 72);
  // The legacy file of the same object lists the same tensors with the same checksums.
  EXPECT_EQ(summary(inspect_json(kFixtures + "dtypes.pt")), summary(inspect_json(kFixtures + "dtypes_legacy.pt")));
  EXPECT_EQ(summary(inspect_json(kFixtures + "dtypes.pt")), summary(inspect_json(kFixtures + "dtypes_big_endian.pt")));
}

TEST_F(Tools, InspectShowsACheckpointsOtherValues) {
  Result r = inspect(kFixtures + "checkpoint.pt");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("epoch = 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("loss = 0.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("optimizer.state.0.momentum_buffer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("optimizer.param_groups.0.lr = 0.1"), std::string::npos) << r.out;
}

TEST_F(Tools, ConvertToSafetensorsAndBackIsBitwiseEqual) {
  for (const char* fixture : {"state_dict.pt", "checkpoint.pt", "dtypes_legacy.pt"}) {
    SCOPED_TRACE(fixture);
    std::string st = path("m.safetensors"), back = path("back.pt");
    Result r = convert(kFixtures + fixture + " " + st);
    ASSERT_EQ(r.code, 0) << r.out;
    ASSERT_EQ(convert(st + " " + back).code, 0);
    auto a = summary(inspect_json(kFixtures + fixture)), b = summary(inspect_json(st)), c = summary(inspect_json(back));
    if (std::string(fixture) == "dtypes_legacy.pt") {
      // int8 and int16 become I32 in safetensors (noted); everything else is equal.
      EXPECT_NE(r.out.find("saved as I32"), std::string::npos) << r.out;
      for (auto* m : {&a, &b, &c})
        for (const char* k : {"i8", "i16", "empty_i8", "shared.whole", "shared.part", "shared.row"}) m->erase(k);
    }
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, c);
    auto sa = torch_io::load(kFixtures + fixture).flatten_tensors(), sc = torch_io::load(back).flatten_tensors();
    for (const auto& [name, t] : sa) {
      if (!a.count(name)) continue;
      Tensor x = t.contiguous(), y = sc[name].contiguous();
      ASSERT_EQ(x.nbytes(), y.nbytes()) << name;
      EXPECT_EQ(std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()), 0) << name;
    }
  }
}

TEST_F(Tools, NumpyFiles) {
  Tensor a = arange(6, dtype(kFloat32)).view({2, 3}), b = tensor(std::vector<int64_t>{7, 8, 9}, dtype(kInt64));
  save_npy(a, path("a.npy"));
  save_npy(b, path("b.npy"));
  // An .npz: np.savez's layout (one .npy member per array), written with the zip writer.
  std::ifstream fa(path("a.npy"), std::ios::binary), fb(path("b.npy"), std::ios::binary);
  std::string sa((std::istreambuf_iterator<char>(fa)), {}), sb((std::istreambuf_iterator<char>(fb)), {});
  io::atomic_write(path("ab.npz"), [&](std::FILE* f) {
    zip::Writer w(f, path("ab.npz"));
    w.add("a.npy", sa.data(), sa.size(), 0);
    w.add("b.npy", sb.data(), sb.size(), 0);
    w.finish();
  });
  json j = inspect_json(path("ab.npz"));
  ASSERT_EQ(j["tensors"].size(), 2u);
  EXPECT_EQ(j["tensors"][1]["name"], "b");
  EXPECT_EQ(j["tensors"][1]["dtype"], "int64");
  ASSERT_EQ(convert(path("ab.npz") + " " + path("ab.pt")).code, 0);
  torch_io::Value v = torch_io::load(path("ab.pt"));
  EXPECT_TRUE(v.is_ordered_dict());
  EXPECT_TRUE(equal(v["a"].to_tensor(), a));
  ASSERT_EQ(convert(path("a.npy") + " " + path("a.pt")).code, 0);
  EXPECT_TRUE(equal(torch_io::load(path("a.pt")).to_tensor(), a));
  EXPECT_EQ(inspect_json(path("a.npy"))["tensors"][0]["shape"], json({2, 3}));
}

TEST_F(Tools, TorchvisionResnet18) {
  NABLA_NEEDS_PYTHON_MODULES("torch, torchvision");
  const std::string pt = path("resnet18.pth"), shapes = path("shapes.json");
  std::ofstream(path("save.py")) << "import json, sys, torch, torchvision\n"
                                    "torch.manual_seed(0)\n"
                                    "sd = torchvision.models.resnet18().state_dict()\n"
                                    "torch.save(sd, sys.argv[1])\n"
                                    "json.dump({k: list(v.shape) for k, v in sd.items()}, open(sys.argv[2], 'w'))\n";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + path("save.py") + " " + pt + " " + shapes).c_str()), 0);
  json want = json::parse(std::ifstream(shapes));
  json got = inspect_json(pt);
  ASSERT_EQ(got["tensors"].size(), 122u);
  ASSERT_EQ(want.size(), 122u);
  for (const auto& t : got["tensors"]) EXPECT_EQ(t["shape"], want[t["name"].get<std::string>()]) << t["name"];
  // .pt -> .safetensors -> .pt, and PyTorch finds the last bitwise equal to the first.
  ASSERT_EQ(convert(pt + " " + path("resnet18.safetensors")).code, 0);
  ASSERT_EQ(convert(path("resnet18.safetensors") + " " + path("back.pth")).code, 0);
  EXPECT_EQ(summary(got), summary(inspect_json(path("back.pth"))));
  std::ofstream(path("check.py"))
      << "import sys, torch\n"
         "a = torch.load(sys.argv[1], weights_only=True)\n"
         "b = torch.load(sys.argv[2], weights_only=True)\n"
         "assert sorted(a) == sorted(b), 'names differ'  # safetensors keeps no order\n"
         "for k in a:\n"
         "    assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k\n"
         "    assert a[k].reshape(-1).view(torch.uint8).equal(b[k].reshape(-1).view(torch.uint8)), k\n"
         "print('bitwise equal:', len(a), 'tensors')\n";
  Result r = run("/usr/bin/python3 " + path("check.py") + " " + pt + " " + path("back.pth"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("bitwise equal: 122 tensors"), std::string::npos) << r.out;
}
