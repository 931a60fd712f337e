// PyTorch's files (nn/torch_file.h): the fixtures PyTorch wrote (tests/torch_files/, made by
// make_fixtures.py) against their manifest, state dicts into modules, optimizer state resumed from
// Python, nabla's own files read back, the hostile files of tests/hostile/torch/ (made by
// make_hostile.py), the zip reader and writer, and, with python3-torch, the live round trip
// Python -> nabla -> Python (weights_only=True). Without PyTorch the live test skips, unless
// NABLA_REQUIRE_TORCH=1 (scripts/test.sh sets it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "io/torch_file.h"
#include "io/zip.h"
#include "nabla.h"
#include "nn/serialize.h"
#include "tests/common/python_torch.h"
#include "tests/data/data_util.h"

using namespace nabla;
namespace fs = std::filesystem;
using json = nlohmann::json;
using nabla_test::TempDir;

namespace {

const std::string kDir = std::string(NABLA_TESTS_DIR) + "/torch_files/";

std::string hex(const void* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<const unsigned char*>(p)[i];
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

// The elements of a loaded tensor in order, as little-endian bytes of its file dtype.
std::string file_hex(const torch_io::Value& v) {
  Tensor t = v.to_tensor().detach().contiguous();
  const auto st = v.storage_type();
  if (st == torch_io::StorageType::int8 || st == torch_io::StorageType::int16) {
    std::string bytes;
    const int32_t* p = t.data_ptr<int32_t>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (st == torch_io::StorageType::int8) {
        bytes.push_back(static_cast<char>(static_cast<int8_t>(p[i])));
      } else {
        int16_t x = static_cast<int16_t>(p[i]);
        bytes.append(reinterpret_cast<const char*>(&x), 2);
      }
    }
    return hex(bytes.data(), bytes.size());
  }
  return hex(t.data_ptr(), t.nbytes());
}

json manifest() {
  std::ifstream f(kDir + "manifest.json");
  return json::parse(f);
}

std::map<std::string, torch_io::Value> leaves(const torch_io::Value& root) {
  std::map<std::string, torch_io::Value> out;
  for (auto& [path, v] : root.flatten()) out.emplace(path, v);
  return out;
}

// Checks a loaded value against its manifest entry: every tensor's dtype, layout, flags and bytes,
// which tensors share storage, and every other leaf's repr.
void check_against(const torch_io::Value& root, const json& desc, const std::string& file) {
  SCOPED_TRACE(file);
  auto got = leaves(root);
  std::map<int, const StorageImpl*> storage_of;  // manifest storage id -> nabla storage
  std::set<const StorageImpl*> used;
  size_t tensors = 0;
  for (const auto& t : desc["tensors"]) {
    const std::string path = t["path"];
    SCOPED_TRACE(path);
    ASSERT_TRUE(got.count(path)) << "missing";
    const torch_io::Value& v = got.at(path);
    ASSERT_TRUE(v.is_tensor());
    ++tensors;
    const Tensor& x = v.to_tensor();
    EXPECT_EQ(torch_io::storage_type_name(v.storage_type()), t["dtype"].get<std::string>());
    EXPECT_EQ(std::vector<int64_t>(x.sizes().begin(), x.sizes().end()), t["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(std::vector<int64_t>(x.strides().begin(), x.strides().end()), t["stride"].get<std::vector<int64_t>>());
    EXPECT_EQ(x.storage_offset(), t["offset"].get<int64_t>());
    EXPECT_EQ(x.requires_grad(), t["requires_grad"].get<bool>());
    EXPECT_EQ(v.is_parameter(), t["parameter"].get<bool>());
    EXPECT_EQ(file_hex(v), t["hex"].get<std::string>());
    const StorageImpl* s = x.impl()->storage.get();
    auto [it, fresh] = storage_of.emplace(t["storage"].get<int>(), s);
    if (fresh) EXPECT_TRUE(used.insert(s).second) << "shares a storage it should not";
    else EXPECT_EQ(it->second, s) << "should share its storage";
  }
  size_t scalars = 0;
  for (const auto& [path, repr] : desc["scalars"].items()) {
    SCOPED_TRACE(path);
    ASSERT_TRUE(got.count(path)) << "missing";
    EXPECT_EQ(got.at(path).repr(), repr.get<std::string>());
    ++scalars;
  }
  EXPECT_EQ(got.size(), tensors + scalars) << "leaves the manifest does not list";
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Small modules with PyTorch's names (as make_fixtures.py builds them).
std::shared_ptr<nn::Sequential> small_model(int64_t out_features = 3) {
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Conv2d>(1, 2, 3), std::make_shared<nn::BatchNorm2d>(2),
                                          std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(),
                                          std::make_shared<nn::Linear>(8, out_features));
}

std::shared_ptr<nn::Sequential> mlp() {
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(),
                                          std::make_shared<nn::Linear>(8, 3));
}

}  // namespace

// ---- fixtures written by PyTorch ------------------------------------------------------------------

TEST(TorchFile, FixturesMatchTheirManifest) {
  json m = manifest();
  int files = 0;
  for (const auto& [file, object] : m["files"].items()) {
    torch_io::Value v = torch_io::load(kDir + file);
    check_against(v, m["objects"][object.get<std::string>()], file);
    ++files;
  }
  EXPECT_EQ(files, 10);
}

TEST(TorchFile, LoadBytesEqualsLoad) {
  for (const char* file : {"dtypes.pt", "dtypes_legacy.pt", "checkpoint.pt"}) {
    std::vector<char> bytes = read_all(kDir + file);
    torch_io::Value a = torch_io::load(kDir + file), b = torch_io::load_bytes(bytes.data(), bytes.size(), file);
    EXPECT_EQ(a.repr(), b.repr());
    auto ta = a.flatten_tensors(), tb = b.flatten_tensors();
    ASSERT_EQ(ta.size(), tb.size());
    for (const auto& [name, t] : ta)
      EXPECT_EQ(hex(t.contiguous().data_ptr(), t.nbytes()), hex(tb[name].contiguous().data_ptr(), t.nbytes())) << name;
  }
}

TEST(TorchFile, SharedStorageStaysOneBuffer) {
  torch_io::Value v = torch_io::load(kDir + "dtypes.pt");
  Tensor whole = v["shared"]["whole"].to_tensor(), part = v["shared"]["part"].to_tensor();
  EXPECT_EQ(whole.impl()->storage.get(), part.impl()->storage.get());
  // A write through one view shows in the other, as in PyTorch.
  autograd::NoGradGuard ng;
  part.fill_(100);
  EXPECT_EQ(whole.flatten()[5].item<int64_t>(), 100);
  EXPECT_EQ(v["shared"]["whole"].storage_type(), torch_io::StorageType::int16);
}

TEST(TorchFile, StateDictLoadsIntoModule) {
  auto model = small_model();
  torch_io::Value sd = torch_io::load(kDir + "state_dict.pt");
  EXPECT_TRUE(sd.is_ordered_dict());
  EXPECT_FALSE(sd.attributes().is_none()) << "the state dict's _metadata";
  auto res = model->load_state_dict(sd.flatten_tensors());  // strict
  EXPECT_TRUE(res.missing_keys.empty() && res.unexpected_keys.empty());
  torch_io::Value io = torch_io::load(kDir + "state_dict_io.pt");
  model->eval();
  Tensor y = (*model)(io["x"].to_tensor());
  EXPECT_TRUE(allclose(y, io["y"].to_tensor(), 1e-5, 1e-6)) << y << io["y"].to_tensor();
  EXPECT_EQ(model->state_dict()["1.num_batches_tracked"].item<int64_t>(), 1);
}

TEST(TorchFile, ShapeMismatchNamesTheKeyAndBothShapes) {
  auto model = small_model(5);
  try {
    nn::load_torch_weights(*model, kDir + "state_dict.pt");
    FAIL() << "loaded";
  } catch (const ValueError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("size mismatch for 4.weight: copying a param with shape [3, 8] from checkpoint, the shape in "
                       "current model is [5, 8]"),
              std::string::npos)
        << msg;
  }
}

TEST(TorchFile, NestedCheckpoint) {
  torch_io::Value ck = torch_io::load(kDir + "checkpoint.pt");
  EXPECT_EQ(ck["epoch"].to_int(), 3);
  EXPECT_EQ(ck["loss"].to_double(), 0.1);
  EXPECT_EQ(ck["args"]["name"].to_string(), "run-1");
  EXPECT_EQ(ck["args"]["layers"][1].to_int(), 32);
  EXPECT_TRUE(ck["args"]["flags"].is_tuple());
  EXPECT_TRUE(ck["args"]["none"].is_none());
  EXPECT_EQ(ck["args"]["big"].to_int(), int64_t(1) << 40);
  EXPECT_EQ(ck["args"]["unicode"].to_string(),
            "gr\xc3\xbc\xc3\x9f"
            "e");
  EXPECT_THROW(ck["nope"], IndexError);
  try {
    ck["nope"];
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("'model', 'optimizer', 'epoch', 'loss', 'args'"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ck["epoch"].to_string(), ValueError);
  // The model and the optimizer (SGD with momentum after one step).
  auto model = small_model();
  model->load_state_dict(ck["model"].flatten_tensors());
  optim::SGD opt(model->parameters(), {.lr = 1});
  opt.load_state_dict(ck["optimizer"]);
  EXPECT_DOUBLE_EQ(opt.options().lr, 0.1);
  EXPECT_DOUBLE_EQ(opt.options().momentum, 0.9);
  nn::StateDict flat = opt.state_dict();
  const torch_io::Value& st = ck["optimizer"]["state"];
  ASSERT_EQ(st.size(), 6u);
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_TRUE(equal(flat["state." + std::to_string(i) + ".momentum_buffer"],
                      st.find(i)->operator[]("momentum_buffer").to_tensor()));
  // Flattened names of the whole checkpoint.
  nn::StateDict all = ck.flatten_tensors();
  EXPECT_TRUE(all.contains("model.0.weight"));
  EXPECT_TRUE(all.contains("optimizer.state.0.momentum_buffer"));
}

// A run started in PyTorch (5 steps) continues in nabla for 10 steps and matches PyTorch's own 10.
class TorchResume : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchResume, TenStepsMatchPyTorch) {
  torch_io::Value f = torch_io::load(kDir + "resume.pt");
  const torch_io::Value& run = f["runs"][GetParam()];
  auto model = mlp();
  model->load_state_dict(run["model"].flatten_tensors());
  std::unique_ptr<optim::Optimizer> opt;
  if (GetParam() == "adam") opt = std::make_unique<optim::Adam>(model->parameters());
  else if (GetParam() == "adamw_amsgrad") opt = std::make_unique<optim::AdamW>(model->parameters());
  else opt = std::make_unique<optim::SGD>(model->parameters());
  opt->load_state_dict(run["optimizer"]);
  Tensor x = f["x"].to_tensor(), y = f["y"].to_tensor();
  for (int i = 0; i < 10; ++i) {
    opt->zero_grad();
    nn::functional::cross_entropy((*model)(x), y).backward();
    opt->step();
  }
  nn::StateDict expected = run["expected"].flatten_tensors();
  double worst = 0;
  for (const auto& [name, p] : model->state_dict()) {
    double diff = (p - expected[name]).abs().max().item<double>();
    EXPECT_LE(diff, 1e-6) << name;
    worst = std::max(worst, diff);
  }
  std::printf("%s: max |nabla - PyTorch| over the parameters after 10 more steps: %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, TorchResume, ::testing::Values("adam", "adamw_amsgrad", "sgd_nesterov"));

TEST(TorchFile, OptimizerStateRefusesWhatItCannotMap) {
  torch_io::Value f = torch_io::load(kDir + "resume.pt");
  auto model = mlp();
  optim::Adam adam(model->parameters());
  // SGD's state into Adam: nabla's flat loader names what does not fit.
  EXPECT_THROW(adam.load_state_dict(f["runs"]["sgd_nesterov"]["optimizer"]), ValueError);
  optim::SGD sgd(std::vector<Tensor>{model->parameters()[0]});
  try {
    sgd.load_state_dict(f["runs"]["sgd_nesterov"]["optimizer"]);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("parameter group 0 lists 4 parameters in the state dict but has 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(adam.load_state_dict(torch_io::Value::dict()), ValueError);
}

TEST(TorchFile, OptimizerStateInPyTorchLayoutRoundTrips) {
  torch_io::Value f = torch_io::load(kDir + "resume.pt");
  auto model = mlp();
  optim::AdamW opt(model->parameters());
  opt.load_state_dict(f["runs"]["adamw_amsgrad"]["optimizer"]);
  torch_io::Value pt = opt.torch_state_dict();
  EXPECT_EQ(pt["param_groups"][0]["betas"].repr(), "(0.9, 0.999)");
  EXPECT_EQ(pt["param_groups"][0]["amsgrad"].repr(), "True");
  EXPECT_EQ(pt["state"].find(int64_t(0))->operator[]("step").to_tensor().item<double>(), 5.0);
  // Through a file and back into another optimizer: the same flat state.
  std::vector<char> bytes = torch_io::serialize(pt);
  optim::AdamW again(mlp()->parameters());
  again.load_state_dict(torch_io::load_bytes(bytes.data(), bytes.size()));
  nn::StateDict a = opt.state_dict(), b = again.state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [k, t] : a) EXPECT_TRUE(equal(t, b[k])) << k;
}

// ---- pickles PyTorch 1.13 does not write (2.x, older versions), made by hand -------------------

namespace {

// Protocol-2 pickle pieces.
std::string glob(const std::string& m, const std::string& n) { return "c" + m + "\n" + n + "\n"; }
std::string str(const std::string& s) {
  std::string out = "X";
  for (int k = 0; k < 4; ++k) out.push_back(static_cast<char>((s.size() >> (8 * k)) & 0xff));
  return out + s;
}
std::string k1(int v) { return std::string("K") + static_cast<char>(v); }
const std::string kOrderedDict = glob("collections", "OrderedDict") + ")R";
std::string storage_pid(const std::string& key, int numel) {
  return "(" + str("storage") + glob("torch", "FloatStorage") + str(key) + str("cpu") + k1(numel) + "tQ";
}
std::string rebuild_v2(const std::string& key, int numel) {  // a 1-d tensor of numel elements
  return glob("torch._utils", "_rebuild_tensor_v2") + "(" + storage_pid(key, numel) + k1(0) + "(" + k1(numel) + "t(" +
         k1(1) + "t\x89" + kOrderedDict + "tR";
}

// An archive holding data.pkl = "\x80\x02" + body + "." and storage "0" = 1, 2, 3, 4 (float32).
torch_io::Value load_pickle(const std::string& body) {
  const std::string pkl = "\x80\x02" + body + ".";
  const float values[4] = {1, 2, 3, 4};
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  {
    zip::Writer w(f, "mem");
    w.add("m/data.pkl", pkl.data(), pkl.size());
    w.add("m/data/0", values, sizeof(values));
    w.finish();
  }
  std::fclose(f);
  std::vector<char> bytes(buf, buf + len);
  std::free(buf);
  return torch_io::load_bytes(bytes.data(), bytes.size(), "hand-made");
}

}  // namespace

TEST(TorchFile, HandMadePicklesOfOtherPyTorchVersions) {
  // PyTorch 2.x: a Parameter rebuilt through _rebuild_from_type_v2 and _rebuild_parameter_with_state.
  torch_io::Value p =
      load_pickle(glob("torch._tensor", "_rebuild_from_type_v2") + "(" + glob("torch._utils", "_rebuild_tensor_v2") +
                  glob("torch.nn.parameter", "Parameter") + "(" + storage_pid("0", 4) + k1(0) + "(" + k1(4) + "t(" +
                  k1(1) + "t\x88" + kOrderedDict + "t}tR");
  EXPECT_TRUE(p.is_parameter());
  EXPECT_TRUE(p.to_tensor().requires_grad());
  torch_io::Value q = load_pickle(glob("torch._utils", "_rebuild_parameter_with_state") + "(" + rebuild_v2("0", 4) +
                                  "\x89" + kOrderedDict + "}tR");
  EXPECT_TRUE(q.is_parameter());
  EXPECT_FALSE(q.to_tensor().requires_grad());
  // Old files: _rebuild_tensor (4 arguments); torch.Size, torch.device, dtypes and bytes as data.
  torch_io::Value old = load_pickle(glob("torch._utils", "_rebuild_tensor") + "(" + storage_pid("0", 4) + k1(1) + "(" +
                                    k1(3) + "t(" + k1(1) + "ttR");
  EXPECT_EQ(old.to_tensor().sizes(), Shape({3}));
  EXPECT_EQ(old.to_tensor()[0].item<float>(), 2.0f);
  torch_io::Value misc = load_pickle(
      "(" + glob("torch", "Size") + "(" + k1(2) + k1(3) + "l\x85R" + glob("torch", "device") + str("cuda") + k1(1) +
      "\x86R" + glob("torch", "float16") + glob("_codecs", "encode") + str("a\xc3\xbf") + str("latin1") + "\x86Rt");
  EXPECT_EQ(misc.repr(), "((2, 3), 'cuda:1', torch.float16, b'a\\xff')");
  EXPECT_EQ(misc[3].to_string(), "a\xff");
  // Refused even though PyTorch's weights_only allows them: named, with the reason.
  try {
    load_pickle(glob("torch._utils", "_rebuild_qtensor") + ")R");
    FAIL();
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("quantized tensors are not supported by nabla"), std::string::npos)
        << e.what();
  }
}

// ---- nabla's own files ----------------------------------------------------------------------------

TEST(TorchFile, SaveLoadRoundTripKeepsEverything) {
  TempDir dir;
  json m = manifest();
  torch_io::Value v = torch_io::load(kDir + "dtypes.pt");
  for (bool zip64 : {false, true}) {
    std::string path = dir / (zip64 ? "out64.pt" : "out.pt");
    torch_io::save(path, v, {.force_zip64 = zip64});
    torch_io::Value back = torch_io::load(path);
    // Views are re-based on the part of the storage they cover: compare everything but offsets.
    json desc = m["objects"]["dtypes"];
    for (auto& t : desc["tensors"]) t["offset"] = back.flatten_tensors()[t["path"].get<std::string>()].storage_offset();
    check_against(back, desc, path);
    zip::Source src(path);
    zip::Reader z(src);
    EXPECT_EQ(z.entries().front().name, std::string(zip64 ? "out64" : "out") + "/data.pkl");
    for (const auto& e : z.entries())
      if (e.name.find("/data/") != std::string::npos) EXPECT_EQ(z.data_offset(e) % 64, 0u) << e.name;
  }
}

TEST(TorchFile, ViewsOfOneStorageAreSavedOnceAndOnlyTheirPart) {
  Tensor base = arange(1000, dtype(kFloat32));
  torch_io::Value v =
      torch_io::Value::dict({{"a", base.slice(0, 100, 110)}, {"b", base.slice(0, 105, 120).view({3, 5})}});
  std::vector<char> bytes = torch_io::serialize(v);
  zip::Source src(bytes.data(), bytes.size(), "mem");
  zip::Reader z(src);
  int records = 0;
  for (const auto& e : z.entries())
    if (e.name.find("/data/") != std::string::npos) {
      ++records;
      EXPECT_EQ(e.size, 20u * 4) << "elements 100..119";
    }
  EXPECT_EQ(records, 1);
  torch_io::Value back = torch_io::load_bytes(bytes.data(), bytes.size());
  EXPECT_TRUE(equal(back["b"].to_tensor(), base.slice(0, 105, 120).view({3, 5})));
  EXPECT_EQ(back["a"].to_tensor().impl()->storage.get(), back["b"].to_tensor().impl()->storage.get());
}

TEST(TorchFile, ValuesBuildAndPrint) {
  using torch_io::Value;
  Value d = Value::dict({{"epoch", 4}, {"lr", 0.001}, {"name", "x'y"}, {"ok", true}, {"none", nullptr}});
  d.set(int64_t(7), Value::list({Value::tuple({1, 2.5}), Value::bytes("\x01z")}));
  d.set("epoch", 5);  // replaces in place
  EXPECT_EQ(d.repr(), "{'epoch': 5, 'lr': 0.001, 'name': 'x\\'y', 'ok': True, 'none': None, 7: [(1, 2.5), b'\\x01z']}");
  EXPECT_EQ(d.find(int64_t(7))->size(), 2u);
  std::vector<char> bytes = torch_io::serialize(d);
  EXPECT_EQ(torch_io::load_bytes(bytes.data(), bytes.size()).repr(), d.repr());
  // Flattened names collide: an error, not a silent overwrite.
  Value c = Value::dict({{"a.b", Tensor(ones({1}))}, {"a", Value::dict({{"b", Tensor(zeros({1}))}})}});
  EXPECT_THROW(c.flatten_tensors(), ValueError);
  // int8 values that no longer fit are refused when saving.
  Value n = Value::tensor(tensor(std::vector<int32_t>{1, 300}, dtype(kInt32)), torch_io::StorageType::int8);
  EXPECT_THROW(torch_io::serialize(n), ValueError);
  // A value cannot contain itself (the pickler also refuses longer cycles).
  Value l = Value::list();
  EXPECT_THROW(l.append(l), ValueError);
  EXPECT_THROW(d.set("me", d), ValueError);
}

TEST(TorchFile, ModuleHelpers) {
  TempDir dir;
  auto a = small_model(), b = small_model();
  nn::save_torch_weights(*a, dir / "m.pt");
  nn::load_torch_weights(*b, dir / "m.pt");
  for (const auto& [k, t] : a->state_dict()) EXPECT_TRUE(equal(t, b->state_dict()[k])) << k;
}

// ---- hostile files --------------------------------------------------------------------------------

TEST(TorchFile, HostileFilesGiveClearErrors) {
  const fs::path dir = fs::path(NABLA_TESTS_DIR) / "hostile" / "torch";
  const char* marker = "/tmp/nabla_torch_hostile_ran";
  std::remove(marker);
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const fs::path file = entry.path();
    if (file.extension() != ".pt") continue;
    SCOPED_TRACE(file.string());
    std::ifstream ef(file.string() + ".expect");
    ASSERT_TRUE(ef) << "every hostile file needs FILE.expect";
    std::string first, line;
    std::getline(ef, first);
    std::vector<std::string> parts;
    while (std::getline(ef, line))
      if (!line.empty()) parts.push_back(line);
    std::vector<char> bytes = read_all(file.string());
    for (bool from_memory : {false, true}) {
      const std::string name = from_memory ? "'memory:" + file.filename().string() + "'" : file.string();
      // Loading, then naming the tensors as load_torch_weights does: a file of shared subtrees
      // loads (small), and is refused by flatten ("error ValueError", which cannot name the file).
      torch_io::Value v;
      try {
        v = from_memory ? torch_io::load_bytes(bytes.data(), bytes.size(), name) : torch_io::load(file.string());
        v.flatten_tensors();
        EXPECT_EQ(first, "loads");
      } catch (const IOError& e) {
        std::string msg = e.what();
        EXPECT_EQ(first, "error IOError") << msg;
        for (const auto& p : parts)
          EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
        EXPECT_NE(msg.find(name), std::string::npos) << "the message must name the file: " << msg;
      } catch (const ValueError& e) {
        std::string msg = e.what();
        EXPECT_EQ(first, "error ValueError") << msg;
        EXPECT_FALSE(v.is_none()) << "ValueError is for a file that loads and cannot be flattened: " << msg;
        for (const auto& p : parts)
          EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
      } catch (const std::exception& e) { ADD_FAILURE() << "not an IOError or ValueError: " << e.what(); }
    }
    ++checked;
  }
  EXPECT_GE(checked, 30);
  EXPECT_FALSE(fs::exists(marker)) << "a hostile file ran a command";
}

TEST(TorchFile, LimitsAreOptions) {
  // The resume fixture nests 4 levels: a depth limit of 3 refuses it, clearly.
  try {
    torch_io::load(kDir + "resume.pt", {.max_depth = 3});
    FAIL();
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("nested more than 3 levels deep"), std::string::npos) << e.what();
  }
  EXPECT_THROW(torch_io::load(kDir + "resume.pt", {.max_pickle_bytes = 100}), IOError);
  EXPECT_THROW(torch_io::load(kDir + "resume.pt", {.max_objects = 100}), IOError);
  EXPECT_THROW(torch_io::load(kDir + "resume.pt", {.max_memo = 10}), IOError);
  // Without the CRC check a flipped bit in a storage goes unnoticed (sizes and shapes are still checked).
  const std::string bad = std::string(NABLA_TESTS_DIR) + "/hostile/torch/bad_crc.pt";
  EXPECT_THROW(torch_io::load(bad), IOError);
  float first = torch_io::load(bad, {.check_crc = false})["w"].to_tensor().flatten()[0].item<float>();
  EXPECT_TRUE(first != 1.0f && std::fabs(first - 1.0f) < 1e-4) << first;  // 1.0f with bit 6 of its low byte set
}

// ---- zip ------------------------------------------------------------------------------------------

TEST(Zip, ReadsDeflatedAndStoredEntriesAndChecksThem) {
  // Python's zipfile writes the deflated entries of these hostile-but-valid-zip files.
  zip::Source src(std::string(NABLA_TESTS_DIR) + "/hostile/torch/deep_lists.pt");
  zip::Reader z(src);
  const zip::Entry* e = z.find("archive/data.pkl");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->method, 8);
  std::vector<char> pkl = z.read(*e, 10 << 20);
  EXPECT_EQ(pkl.size(), 2u + 2 * 1000000);
  EXPECT_EQ(pkl[2], ']');
  EXPECT_THROW(z.read(*e, 1000), IOError);
}

TEST(Zip, WriterAlignsAndReaderRoundTrips) {
  for (bool zip64 : {false, true}) {
    char* buf = nullptr;
    size_t len = 0;
    std::FILE* f = open_memstream(&buf, &len);
    {
      zip::Writer w(f, "mem", zip64);
      w.add("a/x", "hello", 5);
      w.add("a/y", {{"ab", 2}, {"cde", 3}}, 1);
      w.add("a/empty", nullptr, 0);
      w.finish();
    }
    std::fclose(f);
    std::vector<char> bytes(buf, buf + len);
    std::free(buf);
    zip::Source src(bytes.data(), bytes.size(), "mem");
    zip::Reader z(src);
    ASSERT_EQ(z.entries().size(), 3u);
    EXPECT_EQ(z.data_offset(*z.find("a/x")) % 64, 0u);
    std::vector<char> y = z.read(*z.find("a/y"), 100);
    EXPECT_EQ(std::string(y.begin(), y.end()), "abcde");
    EXPECT_EQ(z.read(*z.find("a/empty"), 0).size(), 0u);
  }
}

// ---- live: PyTorch -> nabla -> PyTorch ------------------------------------------------------------

// With NABLA_TEST_PYTHON pointing at a PyTorch 2.x (scripts/gpu-verify.sh), the same round trip runs
// against 2.x's torch.save and weights_only reader.
TEST(TorchFileLive, PythonNablaPythonRoundTrip) {
  const std::string python = nabla_test::test_python();
  NABLA_NEEDS_PYTHON_MODULES_IN(python, "torch, numpy");
  TempDir dir;
  const std::string script = kDir + "roundtrip.py";
  ASSERT_EQ(std::system((python + " " + script + " save " + dir.str()).c_str()), 0);
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir.str())) {
    std::string p = entry.path().string();
    if (p.size() < 3 || p.substr(p.size() - 3) != ".pt") continue;
    std::string stem = p.substr(0, p.size() - 3);
    torch_io::Value v = torch_io::load(p);
    torch_io::save(stem + ".nabla.pt", v);
    torch_io::save(stem + ".zip64.pt", v, {.force_zip64 = true});
    ++files;
  }
  EXPECT_EQ(files, 12);
  std::string cmd = python + " " + script + " check " + dir.str() + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  int rc = pclose(p);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("24 files match"), std::string::npos) << out;
  size_t line = out.find("roundtrip.py: ");
  if (line != std::string::npos) std::cout << out.substr(line, out.find('\n', line) - line) << "\n";
}
