// Every op of the registry (tests/opinfo_*.cpp) exported as its schema row says (core/op_schema.h):
// an op whose row says to_onnx() or parts() exports from at least one of the entries that exercise
// it (some entries run it in ways a graph cannot hold: training-mode statistics, in-place updates),
// and ONNX Runtime computes what nabla computed in the traced forward; an entry whose ops all say
// no_onnx(...) is refused on every sample with a NotImplemented or ValueError. A sample's first input
// is the graph input, the others become initializers; the first output is compared. Samples with an
// empty first input are left out (the export of an empty tensor's op tells nothing).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nabla.h"
#include "onnx/export.h"
#include "tests/onnx/ort.h"
#include "tests/ops/op_module.h"
#include "tests/ops/opinfo.h"

namespace nabla::testing {
namespace {

namespace fs = std::filesystem;

enum class Expect { exports, refuses, skip };
Expect expectation(const OpInfo& op) {
  if (op.ops.empty()) return Expect::skip;
  bool all_out = true, all_none = true;
  for (OpId id : op.ops) {
    const auto kind = op_row(id).onnx.kind;
    all_out = all_out && (kind == OnnxRule::lowered || kind == OnnxRule::parts);
    all_none = all_none && kind == OnnxRule::none;
  }
  return all_out ? Expect::exports : all_none ? Expect::refuses : Expect::skip;
}

struct Exported {
  std::string name, file, input_file, output_file;
  Tensor input, expected;
};

Tensor read_output(const std::string& file, const Tensor& like) {
  std::ifstream f(file, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() != like.nbytes()) return Tensor();
  Tensor got = empty(like.sizes(), dtype(like.dtype()));
  std::memcpy(got.data_ptr(), bytes.data(), bytes.size());
  return got;
}

TEST(OnnxRegistry, OpsExportAsTheirSchemaRowsSay) {
  NABLA_NEEDS_ORT();
  fs::path dir = fs::temp_directory_path() / ("nabla_onnx_registry_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct RemoveDir {
    fs::path p;
    ~RemoveDir() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } remove_dir{dir};

  std::vector<Exported> exported;
  std::vector<std::string> why(kOpCount);  // per op: the refusals of its entries' samples
  std::vector<bool> exports(kOpCount, false);
  std::string not_refused;
  int refused = 0;
  for (const OpInfo& op : registry()) {
    const Expect want = expectation(op);
    if (want == Expect::skip) continue;
    bool exported_one = false, refused_all = true;
    std::string refusals, first_exported;
    for (size_t s = 0; s < op.samples.size() && !exported_one; ++s) {
      Inputs in = make_inputs(op.samples[s], kFloat32, kCPU, false, s + 1);
      if (in.empty() || !in[0].defined() || in[0].numel() == 0) continue;
      auto m = std::make_shared<OpModule>(op, in);
      Exported e{op.name + "_" + std::to_string(s),
                 (dir / (op.name + std::to_string(s) + ".onnx")).string(),
                 "",
                 "",
                 in[0],
                 {}};
      try {
        onnx::export_model(*m, {in[0]}, e.file);
      } catch (const NotImplemented& ex) {
        refusals += std::string("\n    ") + op.name + ": " + ex.what();
        continue;
      } catch (const ValueError& ex) {  // in-place updates of traced tensors
        refusals += std::string("\n    ") + op.name + ": " + ex.what();
        continue;
      }
      e.expected = m->last_output;
      if (!e.expected.defined() || e.expected.numel() == 0) continue;  // an empty result tells nothing
      refused_all = false;
      first_exported = op.samples[s].desc;
      if (want == Expect::refuses) break;
      exported.push_back(e);
      exported_one = true;
    }
    for (OpId id : op.ops) {
      exports[static_cast<size_t>(id)] = exports[static_cast<size_t>(id)] || exported_one;
      why[static_cast<size_t>(id)] += refusals;
    }
    if (want == Expect::refuses) {
      if (refused_all) ++refused;
      else not_refused += " " + op.name + " (sample " + first_exported + ")";
    }
  }
  std::string never_exported;
  std::vector<bool> in_registry(kOpCount, false);
  for (const OpInfo& op : registry())
    if (expectation(op) == Expect::exports)
      for (OpId id : op.ops) in_registry[static_cast<size_t>(id)] = true;
  for (size_t i = 0; i < kOpCount; ++i)
    if (in_registry[i] && !exports[i])
      never_exported += std::string("\n  ") + op_name(static_cast<OpId>(i)) + ":" + why[i];
  EXPECT_TRUE(never_exported.empty()) << "ops whose schema row says they export, but no sample of theirs did:"
                                      << never_exported;
  EXPECT_TRUE(not_refused.empty()) << "entries whose ops' schema rows say no_onnx, but which exported:" << not_refused;

  // One ONNX Runtime process runs them all; a model it cannot load is an error of its own.
  std::ostringstream jobs;
  jobs << "[";
  for (size_t i = 0; i < exported.size(); ++i) {
    Exported& e = exported[i];
    e.input_file = (dir / (e.name + "_in.bin")).string();
    e.output_file = (dir / (e.name + "_out.bin")).string();
    jobs << (i ? "," : "") << "{\"model\":\"" << e.file << "\",\"keep_going\":true,\"runs\":[{\"inputs\":["
         << ort_input("input", e.input, e.input_file) << "],\"output\":\"" << e.output_file << "\"}]}";
  }
  jobs << "]";
  const std::string jobs_file = (dir / "jobs.json").string();
  std::ofstream(jobs_file) << jobs.str();
  ASSERT_EQ(std::system(run_ort_command(jobs_file).c_str()), 0);

  std::string mismatched;
  for (const Exported& e : exported) {
    if (fs::exists(e.output_file + ".error")) {
      std::ifstream f(e.output_file + ".error");
      mismatched += "\n  " + e.name + ": ONNX Runtime: " + std::string(std::istreambuf_iterator<char>(f), {});
      continue;
    }
    Tensor got = read_output(e.output_file, e.expected);
    if (!got.defined()) {
      mismatched += "\n  " + e.name + ": ONNX Runtime's output has another size than nabla's " +
                    internal::str(e.expected.sizes());
      continue;
    }
    Tensor g = got.to(kFloat64), w = e.expected.to(kFloat64);
    // Equal NaN positions, equal infinities, and |ort - nabla| <= 1e-4 |nabla| + 1e-5 elsewhere.
    Tensor finite = isfinite(w);
    bool ok = equal(isnan(g), isnan(w)) && equal(where(finite, zeros_like(w), w.nan_to_num(0.0, 1.0, -1.0)),
                                                 where(finite, zeros_like(g), g.nan_to_num(0.0, 1.0, -1.0)));
    Tensor err = where(finite, (g - w).abs(), zeros_like(w));
    ok = ok && (err <= w.abs().nan_to_num(0.0, 0.0, 0.0) * 1e-4 + 1e-5).all().item<bool>();
    if (!ok)
      mismatched += "\n  " + e.name + ": max |ort - nabla| = " + std::to_string(err.max().item<double>()) + " (ORT " +
                    internal::str(got.flatten().slice(0, 0, 4)) + ", nabla " +
                    internal::str(e.expected.flatten().slice(0, 0, 4)) + ")";
  }
  EXPECT_TRUE(mismatched.empty()) << "exported ops that ONNX Runtime computes otherwise:" << mismatched;
  std::printf("OnnxRegistry: %zu registry entries exported and checked in ONNX Runtime, %d refused as their rows say\n",
              exported.size(), refused);
}

}  // namespace
}  // namespace nabla::testing
