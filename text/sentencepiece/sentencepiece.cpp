#include "text/sentencepiece/sentencepiece.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "io/file.h"

namespace nabla::text {

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
  std::string source;

  void check_id(int32_t id, const char* op) const {
    if (id < 0 || id >= sp.GetPieceSize())
      throw IndexError(internal::str("SentencePieceTokenizer::", op, ": id ", id, " is outside the vocabulary of ",
                                     sp.GetPieceSize(), " pieces (", source, ")"));
  }
};

namespace {

void check(const sentencepiece::util::Status& status, const std::string& what) {
  if (!status.ok()) throw ValueError(what + ": " + status.ToString());
}

// bos/eos/reverse applied to a plain encoding, as the library's extra options do (reverse first,
// then bos in front and eos at the end), so that encode needs no per-call processor state.
template <class T>
void apply(std::vector<T>& out, const SentencePieceEncodeOptions& o, const T& bos, const T& eos, bool has_bos,
           bool has_eos) {
  if (o.reverse) std::reverse(out.begin(), out.end());
  if (o.add_bos && has_bos) out.insert(out.begin(), bos);
  if (o.add_eos && has_eos) out.push_back(eos);
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SentencePieceTokenizer::SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer& SentencePieceTokenizer::operator=(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

SentencePieceTokenizer SentencePieceTokenizer::from_serialized(std::string_view model_proto,
                                                               const std::string& source) {
  auto impl = std::make_unique<Impl>();
  impl->source = source;
  const auto status = impl->sp.LoadFromSerializedProto(model_proto);
  if (!status.ok())
    throw IOError(internal::str("cannot load the SentencePiece model '", source, "' (", model_proto.size(),
                                " bytes): ", status.ToString()));
  return SentencePieceTokenizer(std::move(impl));
}

SentencePieceTokenizer SentencePieceTokenizer::from_file(const std::string& path) {
  // A model is a few MB; 1 GB bounds what a hostile path can make us read.
  const std::vector<char> bytes = io::read_file(path, uint64_t(1) << 30);
  return from_serialized(std::string_view(bytes.data(), bytes.size()), path);
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text, const SentencePieceEncodeOptions& o) const {
  std::vector<int> ids;
  check(impl_->sp.Encode(text, &ids), "SentencePieceTokenizer::encode");
  std::vector<int32_t> out(ids.begin(), ids.end());
  apply<int32_t>(out, o, bos_id(), eos_id(), bos_id() >= 0, eos_id() >= 0);
  return out;
}

std::vector<std::string> SentencePieceTokenizer::encode_pieces(std::string_view text,
                                                               const SentencePieceEncodeOptions& o) const {
  std::vector<std::string> pieces;
  check(impl_->sp.Encode(text, &pieces), "SentencePieceTokenizer::encode_pieces");
  // The special pieces' strings only when they are asked for.
  const bool bos = o.add_bos && bos_id() >= 0, eos = o.add_eos && eos_id() >= 0;
  apply<std::string>(pieces, o, bos ? id_to_piece(bos_id()) : "", eos ? id_to_piece(eos_id()) : "", bos, eos);
  return pieces;
}

std::vector<int32_t> SentencePieceTokenizer::sample_encode(std::string_view text, int nbest_size, float alpha,
                                                           const SentencePieceEncodeOptions& o) const {
  std::vector<int> ids;
  check(impl_->sp.SampleEncode(text, nbest_size, alpha, &ids), "SentencePieceTokenizer::sample_encode");
  std::vector<int32_t> out(ids.begin(), ids.end());
  apply<int32_t>(out, o, bos_id(), eos_id(), bos_id() >= 0, eos_id() >= 0);
  return out;
}

std::vector<std::vector<int32_t>> SentencePieceTokenizer::nbest_encode(std::string_view text, int nbest_size) const {
  if (nbest_size < 1)
    throw ValueError(
        internal::str("SentencePieceTokenizer::nbest_encode: nbest_size must be at least 1, got ", nbest_size));
  std::vector<std::vector<int>> all;
  check(impl_->sp.NBestEncode(text, nbest_size, &all), "SentencePieceTokenizer::nbest_encode");
  std::vector<std::vector<int32_t>> out;
  for (const auto& ids : all) out.emplace_back(ids.begin(), ids.end());
  return out;
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids) const {
  for (int32_t id : ids) impl_->check_id(id, "decode");
  std::string text;
  check(impl_->sp.Decode(std::vector<int>(ids.begin(), ids.end()), &text), "SentencePieceTokenizer::decode");
  return text;
}

std::string SentencePieceTokenizer::decode_pieces(const std::vector<std::string>& pieces) const {
  std::string text;
  check(impl_->sp.Decode(pieces, &text), "SentencePieceTokenizer::decode_pieces");
  return text;
}

int32_t SentencePieceTokenizer::vocab_size() const { return impl_->sp.GetPieceSize(); }
int32_t SentencePieceTokenizer::piece_to_id(std::string_view piece) const { return impl_->sp.PieceToId(piece); }
const std::string& SentencePieceTokenizer::id_to_piece(int32_t id) const {
  impl_->check_id(id, "id_to_piece");
  return impl_->sp.IdToPiece(id);
}
float SentencePieceTokenizer::score(int32_t id) const {
  impl_->check_id(id, "score");
  return impl_->sp.GetScore(id);
}
bool SentencePieceTokenizer::is_control(int32_t id) const {
  impl_->check_id(id, "is_control");
  return impl_->sp.IsControl(id);
}
bool SentencePieceTokenizer::is_unknown(int32_t id) const {
  impl_->check_id(id, "is_unknown");
  return impl_->sp.IsUnknown(id);
}
bool SentencePieceTokenizer::is_byte(int32_t id) const {
  impl_->check_id(id, "is_byte");
  return impl_->sp.IsByte(id);
}
int32_t SentencePieceTokenizer::unk_id() const { return impl_->sp.unk_id(); }
int32_t SentencePieceTokenizer::bos_id() const { return impl_->sp.bos_id(); }
int32_t SentencePieceTokenizer::eos_id() const { return impl_->sp.eos_id(); }
int32_t SentencePieceTokenizer::pad_id() const { return impl_->sp.pad_id(); }

std::string SentencePieceTokenizer::serialized_model() const { return std::string(impl_->sp.serialized_model_proto()); }

void SentencePieceTokenizer::save(const std::string& path) const {
  const std::string bytes = serialized_model();
  io::atomic_write(path, [&](std::FILE* f) { io::write_all(f, bytes.data(), bytes.size(), path); });
}

namespace {

// The sentences, handed to the trainer one by one.
class SpanIterator : public sentencepiece::SentenceIterator {
 public:
  explicit SpanIterator(std::span<const std::string> s) : s_(s) {}
  bool done() const override { return i_ >= s_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return s_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::span<const std::string> s_;
  size_t i_ = 0;
};

}  // namespace

SentencePieceTokenizer train_sentencepiece(std::span<const std::string> sentences, const SentencePieceTrainOptions& o) {
  if (sentences.empty()) throw ValueError("train_sentencepiece: no sentences to train on");
  if (o.model_type != "unigram" && o.model_type != "bpe" && o.model_type != "char" && o.model_type != "word")
    throw ValueError("train_sentencepiece: model_type is unigram, bpe, char or word, got '" + o.model_type + "'");
  std::string symbols;
  for (const std::string& s : o.user_defined_symbols) {
    if (s.empty() || s.find(',') != std::string::npos)
      throw ValueError("train_sentencepiece: a user-defined symbol must be non-empty and without commas, got '" + s +
                       "'");
    symbols += (symbols.empty() ? "" : ",") + s;
  }
  std::unordered_map<std::string, std::string> kwargs = {
      {"vocab_size", std::to_string(o.vocab_size)},
      {"model_type", o.model_type},
      {"character_coverage", std::to_string(o.character_coverage)},
      {"byte_fallback", o.byte_fallback ? "true" : "false"},
      {"split_digits", o.split_digits ? "true" : "false"},
      {"unk_id", std::to_string(o.unk_id)},
      {"bos_id", std::to_string(o.bos_id)},
      {"eos_id", std::to_string(o.eos_id)},
      {"pad_id", std::to_string(o.pad_id)},
      {"normalization_rule_name", o.normalization_rule_name},
      {"num_threads", std::to_string(o.num_threads)},
      {"max_sentence_length", std::to_string(o.max_sentence_length)},
      {"minloglevel", "1"},  // no progress lines on stderr
  };
  if (!symbols.empty()) kwargs["user_defined_symbols"] = symbols;
  SpanIterator it(sentences);
  std::string proto;
  const auto status = sentencepiece::SentencePieceTrainer::Train(kwargs, &it, &proto);
  if (!status.ok()) throw ValueError("train_sentencepiece: " + status.ToString());
  return SentencePieceTokenizer::from_serialized(proto, "<trained>");
}

void set_sentencepiece_seed(uint32_t seed) { sentencepiece::SetRandomGeneratorSeed(seed); }

}  // namespace nabla::text
