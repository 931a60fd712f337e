// The example programs (examples/quickstart.cpp, csv_regression.cpp, char_lm.cpp, classify.cpp,
// finetune.cpp), end to end on small inputs the test writes: each trains, reaches a result that shows
// it learned, saves what it says it saves, and reports mistakes with a message and exit status 1 (bad
// input) or 2 (usage). classify gives torchvision's top 5 for torchvision's weights
// (tests/programs/classify_reference.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "examples/imagenet_classes.h"
#include "nabla.h"
#include "program_util.h"
#include "tests/common/python_torch.h"

#if !defined(NABLA_QUICKSTART_BIN) || !defined(NABLA_CSV_REGRESSION_BIN) || !defined(NABLA_CHAR_LM_BIN) || \
    !defined(NABLA_CLASSIFY_BIN) || !defined(NABLA_FINETUNE_BIN) || !defined(NABLA_GPT_BIN) ||             \
    !defined(NABLA_TESTS_DIR)
#error "the example programs' paths must be defined"
#endif

using namespace nabla;
using namespace nabla::program_test;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("nabla_examples_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Every number that follows `label` in the text, in order.
std::vector<double> numbers_after(const std::string& text, const std::string& label) {
  std::vector<double> v;
  std::regex re(label + R"(\s*([-+0-9.eE]+))");
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) v.push_back(std::stod((*it)[1]));
  return v;
}

TEST(Examples, QuickstartTrainsSavesForPyTorchAndPredicts) {
  fs::path dir = fresh_dir("quickstart");
  write_dataset(dir / "fashion", 640, 200);  // Fashion-MNIST's file names and format
  std::string model = (dir / "model.pth").string();
  Result r = run_program(NABLA_QUICKSTART_BIN, "--data " + (dir / "fashion").string() + " --epochs 3 --lr 0.1 --save " +
                                                   model + " --device cpu");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Shape of X [N, C, H, W]: [64, 1, 28, 28]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Shape of y: [64] int64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(linear_relu_stack): Sequential("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Epoch 3\n"), std::string::npos) << r.out;
  std::vector<double> acc = numbers_after(r.out, "Accuracy:");
  ASSERT_EQ(acc.size(), 3u) << r.out;
  EXPECT_GT(acc.back(), 90.0) << r.out;  // the bars are easy: a model that learns finds them
  EXPECT_NE(r.out.find("Done!"), std::string::npos);
  EXPECT_TRUE(std::regex_search(r.out, std::regex("Predicted: \"[^\"]+\", Actual: \"[^\"]+\""))) << r.out;
  // model.pth is PyTorch's format, holding the state dict by the Python module's names.
  nn::StateDict sd = torch_io::load(model).flatten_tensors();
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"linear_relu_stack.0.weight", "linear_relu_stack.0.bias",
                                                 "linear_relu_stack.2.weight", "linear_relu_stack.2.bias",
                                                 "linear_relu_stack.4.weight", "linear_relu_stack.4.bias"}));
  EXPECT_EQ(sd["linear_relu_stack.0.weight"].sizes(), (Shape{512, 784}));

  Result missing = run_program(NABLA_QUICKSTART_BIN, "--data " + (dir / "nowhere").string());
  EXPECT_EQ(missing.code, 1) << missing.out;
  EXPECT_NE(missing.out.find("dataset-fashion-mnist"), std::string::npos) << missing.out;
  Result bad = run_program(NABLA_QUICKSTART_BIN, "--epochs zero");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--epochs expects a whole number"), std::string::npos) << bad.out;
  fs::remove_all(dir);
}

TEST(Examples, CsvRegressionLearnsTheDemoAndResumes) {
  fs::path dir = fresh_dir("csv");
  std::string csv = (dir / "houses.csv").string();
  Result w = run_program(NABLA_CSV_REGRESSION_BIN, "--write-demo " + csv + " --rows 600");
  ASSERT_EQ(w.code, 0) << w.out;
  std::ifstream f(csv);
  std::string header;
  std::getline(f, header);
  EXPECT_EQ(header, "area_m2,rooms,age_years,distance_km,price_k");

  std::string args = csv + " --target price_k --epochs 30 --checkpoint " + (dir / "ck.safetensors").string() +
                     " --save " + (dir / "reg.safetensors").string();
  Result r = run_program(NABLA_CSV_REGRESSION_BIN, args);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("600 rows, 4 features -> price_k; 480 for training, 120 for validation"), std::string::npos)
      << r.out;
  std::vector<double> r2 = numbers_after(r.out, R"(R\^2)");
  ASSERT_EQ(r2.size(), 31u) << r.out;  // one line per epoch and the summary
  EXPECT_GT(r2.back(), 0.9) << r.out;  // the price is a smooth function of the columns, plus noise
  EXPECT_LT(r2.front(), r2.back());
  // The saved model holds the standardisation with the weights.
  auto saved = safetensors::load_file((dir / "reg.safetensors").string());
  EXPECT_TRUE(saved.tensors.contains("x_mean"));
  EXPECT_TRUE(saved.tensors.contains("body.4.weight"));
  // The same command again resumes from the checkpoint after the last epoch: nothing to train.
  Result again = run_program(NABLA_CSV_REGRESSION_BIN, args);
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("resumed from"), std::string::npos) << again.out;
  EXPECT_EQ(numbers_after(again.out, R"(R\^2)"), std::vector<double>{r2.back()});

  std::ofstream(dir / "bad.csv") << "a,b,y\n1,2,3\n4,abc,6\n";
  Result bad = run_program(NABLA_CSV_REGRESSION_BIN, (dir / "bad.csv").string());
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("bad.csv:3: column 'b' is not a finite number: 'abc'"), std::string::npos) << bad.out;
  std::ofstream(dir / "ragged.csv") << "a,b,y\n1,2,3\n4,5\n";
  Result ragged = run_program(NABLA_CSV_REGRESSION_BIN, (dir / "ragged.csv").string());
  EXPECT_EQ(ragged.code, 1) << ragged.out;
  EXPECT_NE(ragged.out.find("ragged.csv:3: 2 fields, but the header names 3 columns"), std::string::npos) << ragged.out;
  Result no_target = run_program(NABLA_CSV_REGRESSION_BIN, csv + " --target price");
  EXPECT_EQ(no_target.code, 1) << no_target.out;
  EXPECT_NE(no_target.out.find("--target 'price' is not a column"), std::string::npos) << no_target.out;
  Result no_file = run_program(NABLA_CSV_REGRESSION_BIN, "");
  EXPECT_EQ(no_file.code, 2) << no_file.out;
  fs::remove_all(dir);
}

// Values float32 cannot hold are refused by name, a long bad field is quoted
// only in part, a header of too many columns is refused before it is split, and a loss that stops
// being finite ends the run with an error and no model saved.
TEST(Examples, CsvRegressionRefusesWhatItCannotTrainOn) {
  fs::path dir = fresh_dir("csv_hostile");
  const std::string model = (dir / "m.safetensors").string();
  std::ofstream(dir / "big.csv") << "a,b,y\n1,2,3\n4,1e39,6\n7,8,9\n";
  Result big = run_program(NABLA_CSV_REGRESSION_BIN, (dir / "big.csv").string() + " --save " + model);
  EXPECT_EQ(big.code, 1) << big.out;
  EXPECT_NE(big.out.find("big.csv:3: column 'b': '1e39' is beyond float32's range"), std::string::npos) << big.out;
  std::ofstream(dir / "huge.csv") << "a,b,y\n1,2,3\n4,1e400,6\n";
  Result huge = run_program(NABLA_CSV_REGRESSION_BIN, (dir / "huge.csv").string() + " --save " + model);
  EXPECT_NE(huge.out.find("'1e400' is beyond float32's range"), std::string::npos) << huge.out;

  std::ofstream(dir / "long.csv") << "a,b,y\n1,2,3\n4," << std::string(300000, 'x') << ",6\n";
  Result lng = run_program(NABLA_CSV_REGRESSION_BIN, (dir / "long.csv").string() + " --save " + model);
  EXPECT_EQ(lng.code, 1) << lng.out.substr(0, 2000);
  EXPECT_NE(lng.out.find("is not a finite number: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...' (300000 bytes)"),
            std::string::npos)
      << lng.out.substr(0, 2000);
  EXPECT_LT(lng.out.size(), 1000u);

  {
    std::ofstream wide(dir / "wide.csv");
    for (int c = 0; c < 20000; ++c) wide << "c" << c << ",";
    wide << "y\n";
  }
  Result wide = run_program(NABLA_CSV_REGRESSION_BIN, (dir / "wide.csv").string() + " --save " + model);
  EXPECT_EQ(wide.code, 1) << wide.out;
  EXPECT_NE(wide.out.find("wide.csv:1: the header names 20001 columns, more than --max-columns 10000"),
            std::string::npos)
      << wide.out;

  // In float32's range, but a - mean overflows: -3.4e38 - 1.1e38 is beyond it, so the standardised
  // input is infinite and so is the loss.
  {
    std::ofstream edge(dir / "edge.csv");
    edge << "a,y\n";
    for (int i = 0; i < 30; ++i) edge << (i % 3 == 0 ? "3.4e38" : "-3.4e38") << "," << i << "\n";
  }
  Result edge = run_program(NABLA_CSV_REGRESSION_BIN, (dir / "edge.csv").string() + " --epochs 2 --save " + model +
                                                          " --checkpoint " + (dir / "ck.safetensors").string());
  EXPECT_EQ(edge.code, 1) << edge.out;
  EXPECT_NE(edge.out.find("training diverged: the loss is"), std::string::npos) << edge.out;
  EXPECT_NE(edge.out.find("nothing was saved"), std::string::npos) << edge.out;
  EXPECT_FALSE(fs::exists(model));
  EXPECT_FALSE(fs::exists(dir / "ck.safetensors"));
  fs::remove_all(dir);
}

TEST(Examples, CharLmLearnsATextAndSamplesFromIt) {
  fs::path dir = fresh_dir("char_lm");
  std::string text;
  for (int i = 0; i < 60; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  std::ofstream(dir / "fox.txt") << text;
  std::string model = (dir / "lm.safetensors").string();
  Result r = run_program(NABLA_CHAR_LM_BIN, "--text " + (dir / "fox.txt").string() +
                                                " --steps 200 --hidden 48 --layers 1 --seq-len 24 --batch-size 16 "
                                                "--sample 60 --prompt 'the ' --save " +
                                                model);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("an alphabet of 28"), std::string::npos) << r.out;  // 26 letters, space, full stop
  std::vector<double> valid = numbers_after(r.out, "validation");
  ASSERT_GE(valid.size(), 3u) << r.out;
  // A uniform guess over 28 characters costs log2(28) = 4.8 bits; this text is nearly periodic.
  EXPECT_GT(valid.front(), 4.0) << r.out;
  EXPECT_LT(valid.back(), 1.5) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(sample \(temperature 0.8\):\n(the [^\n]*))"))) << r.out;
  EXPECT_EQ(m[1].str().size(), 4u + 60u);

  // Sampling only, from the saved model.
  Result s = run_program(NABLA_CHAR_LM_BIN, "--text " + (dir / "fox.txt").string() +
                                                " --steps 0 --hidden 48 --layers 1 --sample 30 --load " + model);
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("sample (temperature 0.8):\nThis License"), std::string::npos) << s.out;
  // A model trained on another alphabet is refused by name.
  std::ofstream(dir / "other.txt") << std::string(300, 'x') + "yz";
  Result other = run_program(NABLA_CHAR_LM_BIN, "--text " + (dir / "other.txt").string() +
                                                    " --steps 0 --hidden 48 --layers 1 --load " + model);
  EXPECT_EQ(other.code, 1) << other.out;
  Result tiny = run_program(NABLA_CHAR_LM_BIN, "--text " + (dir / "nothing.txt").string());
  EXPECT_EQ(tiny.code, 1) << tiny.out;
  EXPECT_NE(tiny.out.find("cannot read"), std::string::npos) << tiny.out;
  fs::remove_all(dir);
}

// gpt: a small GPT learns the nearly periodic text (a uniform guess over its 28 characters costs
// ln 28 = 3.3 nats), the run resumes from its checkpoint, and sampling with the KV cache continues a
// prompt in the text's alphabet, the same for the same seed.
TEST(Examples, GptTrainsResumesAndSamples) {
  fs::path dir = fresh_dir("gpt");
  std::string text;
  for (int i = 0; i < 60; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  std::ofstream(dir / "fox.txt") << text;
  const std::string run = (dir / "run").string(), data = (dir / "fox.txt").string();
  Result r = run_program(NABLA_GPT_BIN, "train --data " + data + " --out " + run +
                                            " --layers 2 --heads 2 --width 32 --context 32 --batch-size 8 --steps 150 "
                                            "--warmup 20 --lr 0.005 --min-lr 0.0005 --eval-every 50");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("char, vocabulary 28"), std::string::npos) << r.out;
  std::vector<double> valid = numbers_after(r.out, "validation loss");
  ASSERT_EQ(valid.size(), 3u) << r.out;
  EXPECT_LT(valid.back(), 0.5) << r.out;
  EXPECT_LT(valid.back(), valid.front()) << r.out;
  std::printf("[gpt] validation loss %.3f -> %.3f nats/char\n", valid.front(), valid.back());

  Result more = run_program(NABLA_GPT_BIN, "train --resume --out " + run + " --steps 200");
  ASSERT_EQ(more.code, 0) << more.out;
  EXPECT_NE(more.out.find("resuming " + run + " at step 150"), std::string::npos) << more.out;
  EXPECT_NE(more.out.find("step    200"), std::string::npos) << more.out;

  Result s1 = run_program(NABLA_GPT_BIN, "sample --out " + run + " --prompt 'the ' --tokens 40 --seed 2");
  Result s2 = run_program(NABLA_GPT_BIN, "sample --out " + run + " --prompt 'the ' --tokens 40 --seed 2");
  ASSERT_EQ(s1.code, 0) << s1.out;
  EXPECT_EQ(s1.out, s2.out);
  ASSERT_GE(s1.out.size(), 44u) << s1.out;
  EXPECT_EQ(s1.out.substr(0, 4), "the ");
  for (char ch : s1.out.substr(0, 44))
    EXPECT_NE(std::string("abcdefghijklmnopqrstuvwxyz .").find(ch), std::string::npos) << s1.out;

  Result missing = run_program(NABLA_GPT_BIN, "train --data " + (dir / "none.txt").string() + " --out " + run);
  EXPECT_EQ(missing.code, 1) << missing.out;
  EXPECT_NE(missing.out.find("cannot read"), std::string::npos) << missing.out;
  Result no_run = run_program(NABLA_GPT_BIN, "sample --out " + (dir / "nowhere").string());
  EXPECT_EQ(no_run.code, 1) << no_run.out;
  EXPECT_NE(no_run.out.find("run.json"), std::string::npos) << no_run.out;
  Result bad = run_program(NABLA_GPT_BIN, "train --data " + data + " --tokenizer words");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--tokenizer is char or gpt2"), std::string::npos) << bad.out;
  fs::remove_all(dir);
}

// gpt prepare writes nanoGPT's uint16 token files, and training on them (memory-mapped) is training
// on the text; two processes under nabla-run with batch 4 draw the windows of one with batch 8 and
// give its losses (as does --accumulate 2); --tensorboard writes an event file.
TEST(Examples, GptTrainsOnTokenFilesAndDataParallel) {
  fs::path dir = fresh_dir("gpt_tokens");
  std::string text;
  for (int i = 0; i < 60; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  std::ofstream(dir / "fox.txt") << text;
  const std::string tok = (dir / "tok").string();
  Result p = run_program(NABLA_GPT_BIN, "prepare --data " + (dir / "fox.txt").string() + " --out " + tok);
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_NE(p.out.find("2430 training and 270 held-out tokens (char, vocabulary 28)"), std::string::npos) << p.out;
  EXPECT_EQ(fs::file_size(dir / "tok" / "train.bin"), 2430u * 2);
  EXPECT_EQ(fs::file_size(dir / "tok" / "val.bin"), 270u * 2);

  const std::string model =
      " --layers 2 --heads 2 --width 32 --context 32 --steps 40 --warmup 10 --lr 0.005 "
      "--eval-every 20";
  auto losses = [](const Result& r) {
    std::vector<double> v = numbers_after(r.out, "train loss "), w = numbers_after(r.out, "validation loss ");
    v.insert(v.end(), w.begin(), w.end());
    return v;
  };
  Result text_run = run_program(NABLA_GPT_BIN, "train --data " + (dir / "fox.txt").string() + " --out " +
                                                   (dir / "a").string() + " --batch-size 8" + model);
  Result mapped = run_program(NABLA_GPT_BIN, "train --tokens " + tok + " --out " + (dir / "b").string() +
                                                 " --batch-size 8 --tensorboard " + (dir / "tb").string() + model);
  Result accumulated = run_program(NABLA_GPT_BIN, "train --tokens " + tok + " --out " + (dir / "c").string() +
                                                      " --batch-size 4 --accumulate 2" + model);
  for (const Result* r : {&text_run, &mapped, &accumulated}) ASSERT_EQ(r->code, 0) << r->out;
  ASSERT_EQ(losses(text_run).size(), 4u) << text_run.out;
  EXPECT_EQ(losses(mapped), losses(text_run)) << mapped.out << text_run.out;
  const std::vector<double> want = losses(text_run), acc = losses(accumulated);
  ASSERT_EQ(acc.size(), want.size()) << accumulated.out;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(acc[i], want[i], 2e-4) << accumulated.out;
  ASSERT_TRUE(fs::exists(dir / "tb"));
  EXPECT_FALSE(fs::is_empty(dir / "tb"));
  // gpt export: the run as a GGUF file for llama.cpp (tests/nn/test_gguf.cpp runs one there).
  Result ex =
      run_program(NABLA_GPT_BIN, "export --out " + (dir / "b").string() + " --gguf " + (dir / "b.gguf").string());
  ASSERT_EQ(ex.code, 0) << ex.out;
  EXPECT_NE(ex.out.find("2 blocks, width 32, vocabulary 28"), std::string::npos) << ex.out;
  std::ifstream gguf(dir / "b.gguf", std::ios::binary);
  std::string magic(4, '\0');
  gguf.read(magic.data(), 4);
  EXPECT_EQ(magic, "GGUF");
  Result no_file = run_program(NABLA_GPT_BIN, "export --out " + (dir / "b").string());
  EXPECT_EQ(no_file.code, 2) << no_file.out;
#ifdef NABLA_RUN_BIN
  const std::string port = std::to_string(20000 + (::getpid() + 7) % 20000);
  Result ddp =
      run_program(NABLA_RUN_BIN, "--nproc-per-node 2 --master-port " + port + " " + NABLA_GPT_BIN + " train --tokens " +
                                     tok + " --out " + (dir / "d").string() + " --batch-size 4" + model);
  ASSERT_EQ(ddp.code, 0) << ddp.out;
  EXPECT_NE(ddp.out.find("data-parallel: 2 processes (gloo, DistributedDataParallel), batch 4 per process, 8 in all"),
            std::string::npos)
      << ddp.out;
  const std::vector<double> got = losses(ddp);
  ASSERT_EQ(got.size(), want.size()) << ddp.out;  // rank 1 prints nothing
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-4) << ddp.out;
  // --shard zero1: each process holds half of AdamW's state; the same losses, and the checkpoint's
  // whole state matches the plain data-parallel run's.
  Result zero =
      run_program(NABLA_RUN_BIN, "--nproc-per-node 2 --master-port " + port + " " + NABLA_GPT_BIN + " train --tokens " +
                                     tok + " --out " + (dir / "z").string() + " --batch-size 4 --shard zero1" + model);
  ASSERT_EQ(zero.code, 0) << zero.out;
  EXPECT_NE(zero.out.find("AdamW's state sharded: ZeroRedundancyOptimizer"), std::string::npos) << zero.out;
  const std::vector<double> zl = losses(zero);
  ASSERT_EQ(zl.size(), want.size()) << zero.out;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(zl[i], got[i], 2e-4) << zero.out;
  auto dck = nabla::safetensors::load_file((dir / "d" / "checkpoint.safetensors").string());
  auto zck = nabla::safetensors::load_file((dir / "z" / "checkpoint.safetensors").string());
  EXPECT_EQ(dck.tensors.size(), zck.tensors.size());
  for (const auto& [name, w] : dck.tensors) {
    const nabla::Tensor* u = zck.tensors.find(name);
    ASSERT_NE(u, nullptr) << name;
    EXPECT_TRUE(nabla::allclose(w.to(nabla::kFloat64), u->to(nabla::kFloat64), 1e-3, 1e-5)) << name;
  }
  // --shard fsdp: the weights, gradients and AdamW's state sharded (each block a unit): the same
  // losses; resumed from its shards it goes on as the DDP run resumed from its checkpoint.
  const std::string launch = std::string("--nproc-per-node 2 --master-port ") + port + " " + NABLA_GPT_BIN;
  Result fsdp = run_program(NABLA_RUN_BIN, launch + " train --tokens " + tok + " --out " + (dir / "f").string() +
                                               " --batch-size 4 --shard fsdp" + model);
  ASSERT_EQ(fsdp.code, 0) << fsdp.out;
  EXPECT_NE(fsdp.out.find("FullyShardedDataParallel: each block a unit"), std::string::npos) << fsdp.out;
  const std::vector<double> fl = losses(fsdp);
  ASSERT_EQ(fl.size(), want.size()) << fsdp.out;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(fl[i], got[i], 2e-4) << fsdp.out;
  EXPECT_TRUE(fs::exists(dir / "f" / "shards" / "index.json"));
  Result fsdp_more =
      run_program(NABLA_RUN_BIN, launch + " train --resume --shard fsdp --out " + (dir / "f").string() + " --steps 60");
  Result ddp_more =
      run_program(NABLA_RUN_BIN, launch + " train --resume --out " + (dir / "d").string() + " --steps 60");
  ASSERT_EQ(fsdp_more.code, 0) << fsdp_more.out;
  ASSERT_EQ(ddp_more.code, 0) << ddp_more.out;
  const std::vector<double> a = losses(fsdp_more), b = losses(ddp_more);
  ASSERT_EQ(a.size(), b.size()) << fsdp_more.out << ddp_more.out;
  ASSERT_FALSE(a.empty()) << fsdp_more.out;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 5e-4) << fsdp_more.out << ddp_more.out;
  // Resuming a sharded run without its --shard is refused, naming what to do.
  Result wrong = run_program(NABLA_RUN_BIN, launch + " train --resume --out " + (dir / "f").string() + " --steps 60");
  EXPECT_NE(wrong.code, 0) << wrong.out;
  EXPECT_NE(wrong.out.find("was trained with --shard fsdp"), std::string::npos) << wrong.out;
#endif
  // Damaged token files are refused by name.
  std::ofstream(dir / "tok" / "val.bin", std::ios::binary) << std::string("\x05\x00\x30", 3);
  Result odd = run_program(NABLA_GPT_BIN, "train --tokens " + tok + " --out " + (dir / "e").string() + model);
  EXPECT_EQ(odd.code, 1) << odd.out;
  EXPECT_NE(odd.out.find("val.bin' has an odd number of bytes"), std::string::npos) << odd.out;
  std::ofstream(dir / "tok" / "val.bin", std::ios::binary) << std::string("\x05\x00\x30\x00", 4);
  Result big = run_program(NABLA_GPT_BIN, "train --tokens " + tok + " --out " + (dir / "e").string() + model);
  EXPECT_EQ(big.code, 1) << big.out;
  EXPECT_NE(big.out.find("holds token 48, but"), std::string::npos) << big.out;
  Result none = run_program(NABLA_GPT_BIN, "train --tokens " + (dir / "nowhere").string());
  EXPECT_EQ(none.code, 1) << none.out;
  EXPECT_NE(none.out.find("gpt prepare"), std::string::npos) << none.out;
  fs::remove_all(dir);
}

// gpt sample --hf DIR: a Hugging Face GPT-2 folder (config.json, model.safetensors, vocab.json,
// merges.txt) samples greedily what its model's logits say, token by token.
TEST(Examples, GptSamplesFromHuggingFaceFolder) {
  fs::path dir = fresh_dir("gpt_hf");
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the quick brown fox jumps over the lazy dog " + std::to_string(i) + ". ";
  auto tok = nabla::text::train_bpe(text, 300, {.special_tokens = {"<|endoftext|>"}});
  tok.save((dir / "vocab.json").string(), (dir / "merges.txt").string());
  nabla::nn::GPT2Config c{.vocab_size = tok.vocab_size(), .n_positions = 64, .n_embd = 32, .n_layer = 2, .n_head = 4};
  nabla::manual_seed(3);
  nabla::nn::GPT2LMHeadModel gpt(c);
  nabla::nn::save_weights(gpt, (dir / "model.safetensors").string());
  std::ofstream(dir / "config.json") << nlohmann::json{
      {"vocab_size", c.vocab_size}, {"n_positions", 64}, {"n_embd", 32}, {"n_layer", 2}, {"n_head", 4},
      {"model_type", "gpt2"}}.dump();
  // The greedy continuation, one full forward per token.
  std::vector<int32_t> ids = tok.encode("the quick");
  std::vector<int32_t> all = ids;
  {
    nabla::NoGradGuard no_grad;
    gpt.eval();
    for (int i = 0; i < 12; ++i) {
      std::vector<int64_t> x(all.begin(), all.end());
      nabla::Tensor logits = gpt.forward(nabla::tensor(x, nabla::kInt64).unsqueeze(0));
      all.push_back(static_cast<int32_t>(logits.select(1, logits.size(1) - 1).argmax(-1).item<int64_t>()));
    }
  }
  Result r = run_program(NABLA_GPT_BIN, "sample --hf " + dir.string() + " --prompt 'the quick' --tokens 12 --greedy");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, tok.decode_text(all) + "\n");
  Result missing = run_program(NABLA_GPT_BIN, "sample --hf " + (dir / "nowhere").string());
  EXPECT_EQ(missing.code, 1) << missing.out;
  EXPECT_NE(missing.out.find("config.json"), std::string::npos) << missing.out;
  fs::remove_all(dir);
}

// char_lm --amp: the LSTM trains under bfloat16 autocast, and under float16 with a GradScaler that
// unscales the gradients before they are clipped; both learn the nearly periodic text.
TEST(Examples, CharLmTrainsUnderAmp) {
  fs::path dir = fresh_dir("char_lm_amp");
  std::string text;
  for (int i = 0; i < 60; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  std::ofstream(dir / "fox.txt") << text;
  for (std::string amp : {"bf16", "fp16"}) {
    Result r = run_program(NABLA_CHAR_LM_BIN, "--text " + (dir / "fox.txt").string() +
                                                  " --steps 200 --hidden 48 --layers 1 --seq-len 24 --batch-size 16 "
                                                  "--sample 0 --amp " +
                                                  amp + " --save " + (dir / (amp + ".safetensors")).string());
    ASSERT_EQ(r.code, 0) << r.out;
    const std::string header = amp == "bf16" ? "forward under autocast to bfloat16, float32 weights\n"
                                             : "forward under autocast to float16, float32 weights, loss scaled by a "
                                               "GradScaler\n";
    EXPECT_NE(r.out.find("mixed precision: " + header), std::string::npos) << r.out;
    std::vector<double> valid = numbers_after(r.out, "validation");
    ASSERT_GE(valid.size(), 3u) << r.out;
    EXPECT_GT(valid.front(), 4.0) << r.out;
    EXPECT_LT(valid.back(), 1.5) << amp << "\n" << r.out;
    std::printf("[char_lm --amp %s] validation %.3f -> %.3f bits/char\n", amp.c_str(), valid.front(), valid.back());
  }
  Result bad = run_program(NABLA_CHAR_LM_BIN, "--text " + (dir / "fox.txt").string() + " --amp fp32");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--amp is off, bf16 or fp16, got 'fp32'"), std::string::npos) << bad.out;
  fs::remove_all(dir);
}

// classify on weights torchvision saved (a random resnet18 on ImageNet's 1000 classes and an
// efficientnet_b0 with a 10-class head, BatchNorm statistics measured on the images), on a JPEG and
// a PNG in one batch: the top 5 are torchvision's, in order, with its probabilities, both with the
// default antialiased resize and with --no-antialias against torchvision 0.14's weights.transforms().
TEST(Examples, ClassifyGivesTorchvisionsTop5) {
  NABLA_NEEDS_PYTHON_MODULES("torch, torchvision");
  fs::path dir = fresh_dir("classify");
  std::string cmd =
      "/usr/bin/python3 " + std::string(NABLA_TESTS_DIR) + "/programs/classify_reference.py --out " + dir.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  nlohmann::json expected = nlohmann::json::parse(std::ifstream(dir / "expected.json"));
  const std::vector<std::string> images = {"photo.jpg", "tall.png"};
  for (const auto& [model, ref] : expected.items()) {
    for (bool aa : {true, false}) {
      std::string args = "--model " + model + " --weights " + (dir / (model + ".pth")).string() + " --json " +
                         (dir / images[0]).string() + " " + (dir / images[1]).string() + (aa ? "" : " --no-antialias");
      if (ref["classes"] == 10) args += " --labels " + (dir / "labels10.txt").string();
      Result r = run_program(NABLA_CLASSIFY_BIN, args);
      ASSERT_EQ(r.code, 0) << r.out;
      nlohmann::json got = nlohmann::json::parse(r.out);
      ASSERT_EQ(got.size(), images.size()) << r.out;
      for (size_t i = 0; i < images.size(); ++i) {
        SCOPED_TRACE(model + " " + images[i] + (aa ? " antialias" : " --no-antialias"));
        const auto& want = ref[aa ? "antialias" : "tv014"][images[i]];
        const auto& top = got[i]["top"];
        EXPECT_EQ(got[i]["file"], (dir / images[i]).string());
        ASSERT_EQ(top.size(), 5u) << r.out;
        double worst = 0;
        for (size_t k = 0; k < 5; ++k) {
          EXPECT_EQ(top[k]["index"].get<int64_t>(), want[k][0].get<int64_t>()) << "rank " << k + 1 << "\n" << r.out;
          double p = top[k]["probability"].get<double>(), q = want[k][1].get<double>();
          worst = std::max(worst, std::abs(p - q) / q);
        }
        EXPECT_LT(worst, 2e-3) << r.out;
        std::printf("[classify] %s %s%s: top 5 as torchvision's, probabilities within %.1e relative\n", model.c_str(),
                    images[i].c_str(), aa ? "" : " --no-antialias", worst);
      }
    }
  }
  // The text output, for a person: rank, probability, the class name and its index.
  Result text = run_program(NABLA_CLASSIFY_BIN, "--model resnet18 --weights " + (dir / "resnet18.pth").string() + " " +
                                                    (dir / "photo.jpg").string() + " --topk 3");
  ASSERT_EQ(text.code, 0) << text.out;
  std::printf("%s", text.out.c_str());
  int64_t first = expected["resnet18"]["antialias"]["photo.jpg"][0][0].get<int64_t>();
  EXPECT_TRUE(
      std::regex_search(text.out, std::regex(R"(\n  1\.  +[0-9.]+%  [^\n]+ \()" + std::to_string(first) + R"(\)\n)")))
      << text.out;
  EXPECT_EQ(std::count(text.out.begin(), text.out.end(), '\n'), 4) << text.out;
  fs::remove_all(dir);
}

// Without Python: weights nabla saves itself (safetensors) give the answer the library computes, and
// each mistake gets a message and exit status 1 (bad input) or 2 (usage).
TEST(Examples, ClassifyRunsAndExplainsMistakes) {
  fs::path dir = fresh_dir("classify_errors");
  manual_seed(3);
  auto model = vision::create_model("mobilenet_v3_small");
  std::string weights = (dir / "mnv3.safetensors").string();
  nn::save_weights(*model, weights);
  std::string image = (dir / "noise.png").string();
  data::save_image(image, (rand({40, 60, 3}) * 255).to(kUInt8));
  Result r = run_program(NABLA_CLASSIFY_BIN,
                         "--model mobilenet_v3_small --weights " + weights + " --json " + image + " --topk 2");
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json got = nlohmann::json::parse(r.out);
  model->eval();
  Tensor probs;
  {
    autograd::NoGradGuard no_grad;
    probs = softmax((*model)(vision::weights_transforms("mobilenet_v3_small").load(image).unsqueeze(0)), -1)[0];
  }
  auto [p, idx] = probs.topk(2);
  ASSERT_EQ(got[0]["top"].size(), 2u) << r.out;
  for (int64_t k = 0; k < 2; ++k) {
    EXPECT_EQ(got[0]["top"][k]["index"].get<int64_t>(), idx[k].item<int64_t>());
    EXPECT_NEAR(got[0]["top"][k]["probability"].get<double>(), p[k].item<double>(), 1e-6);
  }
  EXPECT_EQ(got[0]["top"][0]["label"], examples::kImageNetClasses[static_cast<size_t>(idx[0].item<int64_t>())]);
  // --amp bf16: the forward under bfloat16 autocast gives the float32 answer within bfloat16's
  // accuracy (the top class's probability within 10%), and the text output says the mode.
  Result amp = run_program(NABLA_CLASSIFY_BIN, "--model mobilenet_v3_small --weights " + weights + " --json " + image +
                                                   " --topk 1 --amp bf16");
  ASSERT_EQ(amp.code, 0) << amp.out;
  nlohmann::json amp_top = nlohmann::json::parse(amp.out)[0]["top"][0];
  const double amp_p = amp_top["probability"].get<double>();
  const double f32_p = probs[amp_top["index"].get<int64_t>()].item<double>();
  EXPECT_NEAR(amp_p, f32_p, 0.1 * f32_p) << amp.out;
  Result amp_text = run_program(
      NABLA_CLASSIFY_BIN, "--model mobilenet_v3_small --weights " + weights + " " + image + " --topk 1 --amp fp16");
  ASSERT_EQ(amp_text.code, 0) << amp_text.out;
  EXPECT_EQ(amp_text.out.rfind("(mixed precision: forward under autocast to float16, float32 weights)\n", 0), 0u)
      << amp_text.out;
  EXPECT_STREQ(examples::kImageNetClasses[0], "tench");  // torchvision's order
  EXPECT_STREQ(examples::kImageNetClasses[999], "toilet tissue");

  Result help = run_program(NABLA_CLASSIFY_BIN, "--help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("usage: classify --model NAME --weights FILE IMAGE"), std::string::npos) << help.out;
  Result list = run_program(NABLA_CLASSIFY_BIN, "--list-models");
  EXPECT_EQ(list.code, 0) << list.out;
  EXPECT_NE(list.out.find("resnet50-11ad3fa6.pth"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("resize 256 bicubic"), std::string::npos) << list.out;  // efficientnet_b0

  Result unknown = run_program(NABLA_CLASSIFY_BIN, "--model resnet5O --weights " + weights + " " + image);
  EXPECT_EQ(unknown.code, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("unknown model 'resnet5O'; the models are: "), std::string::npos) << unknown.out;
  EXPECT_NE(unknown.out.find("resnet50"), std::string::npos) << unknown.out;
  Result no_image = run_program(
      NABLA_CLASSIFY_BIN, "--model mobilenet_v3_small --weights " + weights + " " + (dir / "missing.jpg").string());
  EXPECT_EQ(no_image.code, 1) << no_image.out;
  EXPECT_NE(no_image.out.find("cannot open the image '" + (dir / "missing.jpg").string() + "': no such file"),
            std::string::npos)
      << no_image.out;
  Result no_weights =
      run_program(NABLA_CLASSIFY_BIN, "--model mobilenet_v3_small --weights " + (dir / "w.pth").string() + " " + image);
  EXPECT_EQ(no_weights.code, 1) << no_weights.out;
  EXPECT_NE(no_weights.out.find("cannot open the weights file"), std::string::npos) << no_weights.out;
  Result wrong = run_program(NABLA_CLASSIFY_BIN, "--model resnet18 --weights " + weights + " " + image);
  EXPECT_EQ(wrong.code, 1) << wrong.out;
  EXPECT_NE(wrong.out.find("does not hold resnet18's weights"), std::string::npos) << wrong.out;
  EXPECT_NE(wrong.out.find("is --model the architecture these weights were saved from?"), std::string::npos)
      << wrong.out;
  std::ofstream(dir / "three.txt") << "cat\ndog\nbird\n";
  Result labels = run_program(NABLA_CLASSIFY_BIN, "--model mobilenet_v3_small --weights " + weights + " " + image +
                                                      " --labels " + (dir / "three.txt").string());
  EXPECT_EQ(labels.code, 1) << labels.out;
  EXPECT_NE(labels.out.find("--labels names 3 classes; the file's classifier has 1000 outputs"), std::string::npos)
      << labels.out;
  Result not_image = run_program(
      NABLA_CLASSIFY_BIN, "--model mobilenet_v3_small --weights " + weights + " " + (dir / "three.txt").string());
  EXPECT_EQ(not_image.code, 1) << not_image.out;
  EXPECT_NE(not_image.out.find("three.txt"), std::string::npos) << not_image.out;
  fs::remove_all(dir);
}

// finetune on the demo ImageFolder it writes (3 classes of shapes with their own colours, 64x64):
// resnet18 with random weights nabla saved as the "pretrained" backbone (no download here). Frozen, only the new head trains (the backbone's
// weights come out as they went in) and still learns the shapes well above chance (33%); unfrozen,
// the backbone changes too. The saved file is a resnet18 state dict with a 3-class head, which
// torchvision loads strictly.
TEST(Examples, FinetuneTrainsANewHead) {
  fs::path dir = fresh_dir("finetune");
  Result demo = run_program(NABLA_FINETUNE_BIN, "--make-demo " + (dir / "shapes").string() + " --demo-size 24");
  ASSERT_EQ(demo.code, 0) << demo.out;
  EXPECT_TRUE(fs::exists(dir / "shapes" / "train" / "circles" / "0.png"));
  EXPECT_TRUE(fs::exists(dir / "shapes" / "val" / "stripes" / "5.jpg"));
  manual_seed(5);
  auto backbone = vision::create_model("resnet18");
  std::string weights = (dir / "resnet18.pth").string();
  nn::save_torch_weights(*backbone, weights);
  nn::StateDict before = backbone->state_dict();

  std::string common = "--model resnet18 --weights " + weights + " --data " + (dir / "shapes").string() +
                       " --image-size 64 --batch-size 8 --seed 1";
  std::string frozen = (dir / "frozen.pth").string();
  Result r = run_program(NABLA_FINETUNE_BIN, common + " --epochs 10 --lr 0.01 --freeze-backbone --save " + frozen);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("3 classes: circles squares stripes; 72 training and 18 validation images"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("new head: fc.weight [1000, 512] -> [3, 512]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("training 1539 of 11178051 parameters (the backbone is frozen)"), std::string::npos) << r.out;
  std::vector<double> val_loss = numbers_after(r.out, "val loss"), val_acc = numbers_after(r.out, "best val accuracy");
  ASSERT_EQ(val_loss.size(), 10u) << r.out;
  ASSERT_EQ(val_acc.size(), 1u) << r.out;
  std::printf("[finetune] frozen backbone, 10 epochs: val loss %.3f -> %.3f, best val accuracy %.1f%%\n",
              val_loss.front(), val_loss.back(), val_acc[0]);
  EXPECT_LT(val_loss.back(), 0.6 * val_loss.front()) << r.out;
  EXPECT_GE(val_acc[0], 75.0) << r.out;  // chance is 33%; measured 94% with torchvision's random resnet18
  nn::StateDict after = torch_io::load(frozen).flatten_tensors();
  auto fresh = vision::create_model("resnet18", {.num_classes = 3});
  EXPECT_EQ(after.keys(), fresh->state_dict().keys());
  EXPECT_EQ(after["fc.weight"].sizes(), (Shape{3, 512}));
  EXPECT_TRUE(equal(after["conv1.weight"], before["conv1.weight"]));  // frozen
  EXPECT_TRUE(equal(after["layer4.1.conv2.weight"], before["layer4.1.conv2.weight"]));
  if (nabla_test::python_has("torch, torchvision")) {
    std::string cmd =
        "/usr/bin/python3 -c \"import torch, torchvision; "
        "torchvision.models.resnet18(num_classes=3).load_state_dict(torch.load('" +
        frozen + "'))\"";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }

  // The whole network trains without --freeze-backbone, here under bfloat16 autocast (--amp bf16:
  // the convolutions in bfloat16, the weights and the saved file float32).
  std::string full = (dir / "full.pth").string();
  Result f = run_program(NABLA_FINETUNE_BIN, common + " --epochs 1 --amp bf16 --save " + full);
  ASSERT_EQ(f.code, 0) << f.out;
  EXPECT_NE(f.out.find("training 11178051 of 11178051 parameters\n"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("mixed precision: forward under autocast to bfloat16, float32 weights\n"), std::string::npos)
      << f.out;
  EXPECT_EQ(torch_io::load(full).flatten_tensors()["conv1.weight"].dtype(), kFloat32);
  EXPECT_FALSE(equal(torch_io::load(full).flatten_tensors()["conv1.weight"], before["conv1.weight"]));

  // Mistakes.
  Result no_data = run_program(NABLA_FINETUNE_BIN,
                               "--model resnet18 --weights " + weights + " --data " + (dir / "nothing").string());
  EXPECT_EQ(no_data.code, 1) << no_data.out;
  EXPECT_NE(no_data.out.find("is not a folder: --data needs train/<class>/ and val/<class>/"), std::string::npos)
      << no_data.out;
  Result unknown =
      run_program(NABLA_FINETUNE_BIN, "--model resnet17 --weights " + weights + " --data " + (dir / "shapes").string());
  EXPECT_EQ(unknown.code, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("unknown model 'resnet17'"), std::string::npos) << unknown.out;
  Result wrong =
      run_program(NABLA_FINETUNE_BIN, "--model resnet34 --weights " + weights + " --data " + (dir / "shapes").string());
  EXPECT_EQ(wrong.code, 1) << wrong.out;
  EXPECT_NE(
      wrong.out.find("does not hold resnet34's ImageNet weights; is --model the architecture they were saved from?"),
      std::string::npos)
      << wrong.out;
  EXPECT_LT(wrong.out.size(), 600u) << wrong.out;
  fs::remove_all(dir);
}

}  // namespace
