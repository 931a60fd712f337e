// libFuzzer target: text/'s file readers on arbitrary bytes: Vocab::load, Vectors::load (GloVe and
// word2vec text) and the CSV reader behind TextClassificationDataset. Each either loads or throws a
// nabla::Error; a vocabulary that loads is saved and loads back equal.
#include "fuzz/fuzz_util.h"
#include "nabla.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nabla_fuzz::ScratchFile in("text-in.txt"), out("text-out.txt");
  using namespace nabla;
  const std::string& path = in.write(data, size);
  text::Vocab vocab;
  if (nabla_fuzz::expect_clean([&] { vocab = text::Vocab::load(path); }).empty()) {
    vocab.save(out.path());
    if (text::Vocab::load(out.path()).get_itos() != vocab.get_itos())
      nabla_fuzz::finding("vocab round trip", "load(save(vocab)) has other tokens");
  }
  nabla_fuzz::expect_clean([&] { (void)text::Vectors::load(path); });
  nabla_fuzz::expect_clean([&] { (void)text::TextClassificationDataset(path); });
  nabla_fuzz::expect_clean([&] { (void)text::TextClassificationDataset(path, {.delimiter = '\t', .header = true}); });
  return 0;
}
