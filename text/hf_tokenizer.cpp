// Hugging Face tokenizer.json: the added-token matcher, the pipeline and loading. The component
// families are in the other hf_*.cpp files (text/hf_internal.h). See text/hf_tokenizer.h for the
// pipeline and the differences from the references.
#include "text/hf_tokenizer.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "text/hf_internal.h"

namespace nabla::text {

namespace hf {

// ---------------------------------------------------------------------------------------------
// Added tokens: a byte trie with leftmost-longest, non-overlapping matches.

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

class Trie {
 public:
  void add(std::string_view s, int32_t value) {
    if (s.empty()) return;
    first_[uint8_t(s[0])] = 1;
    int32_t node = 0;
    for (unsigned char c : s) {
      auto& kids = nodes_[size_t(node)].kids;
      auto it = std::lower_bound(kids.begin(), kids.end(), c, [](const auto& k, uint8_t v) { return k.first < v; });
      if (it != kids.end() && it->first == c) {
        node = it->second;
      } else {
        const int32_t nn = int32_t(nodes_.size());
        kids.insert(it, {c, nn});
        nodes_.push_back({});
        node = nn;
      }
    }
    if (nodes_[size_t(node)].value < 0) nodes_[size_t(node)].value = value;
  }
  bool empty() const { return nodes_.size() == 1; }
  // The longest pattern starting at s[i]: (end, value) or (i, -1).
  std::pair<size_t, int32_t> longest(std::string_view s, size_t i) const {
    std::pair<size_t, int32_t> best{i, -1};
    if (!first_[uint8_t(s[i])]) return best;
    int32_t node = 0;
    for (size_t k = i; k < s.size(); ++k) {
      const auto& kids = nodes_[size_t(node)].kids;
      const uint8_t c = uint8_t(s[k]);
      auto it = std::lower_bound(kids.begin(), kids.end(), c, [](const auto& kk, uint8_t v) { return kk.first < v; });
      if (it == kids.end() || it->first != c) break;
      node = it->second;
      if (nodes_[size_t(node)].value >= 0) best = {k + 1, nodes_[size_t(node)].value};
    }
    return best;
  }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> kids;
    int32_t value = -1;
  };
  std::vector<Node> nodes_ = std::vector<Node>(1);
  std::array<uint8_t, 256> first_{};
};

}  // namespace hf

using namespace hf;

// ---------------------------------------------------------------------------------------------

struct HfTokenizer::Impl {
  std::string source;
  NormalizerPtr normalizer;
  PreTokenizerPtr pre_tokenizer;
  std::unique_ptr<Model> model;
  PostProcessorPtr post_processor;
  DecoderPtr decoder;
  std::vector<AddedToken> added;   // in file order
  TokenMap added_ids;              // content -> id
  Trie raw_trie, normalized_trie;  // values index `added`
  std::vector<std::string> id_to_token;
  std::vector<uint8_t> id_valid, id_special;

  void normalize(std::string& s) const {
    if (normalizer) normalizer->apply(s);
  }

  // Leftmost-longest matches of `trie` in `s`, as Rust's AddedVocabulary::find_matches: appends
  // (text, -1) sections and (content, added index) tokens to `out`.
  void split_added(const Trie& trie, std::string_view s, bool first,
                   std::vector<std::pair<Piece, int32_t>>& out) const {
    if (trie.empty()) {
      out.push_back({{std::string(s), first}, -1});
      return;
    }
    size_t start_offset = 0;
    size_t i = 0;
    while (i < s.size()) {
      auto [end, k] = trie.longest(s, i);
      if (k < 0) {
        ++i;
        continue;
      }
      const AddedToken& t = added[size_t(k)];
      size_t start = i, stop = end;
      i = end;  // the search resumes after the match, kept or not
      if (t.single_word) {
        bool before_word = false, after_word = false;
        if (start > 0) {
          size_t b = start - 1;
          while (b > 0 && (uint8_t(s[b]) & 0xC0) == 0x80) --b;
          size_t q = b;
          before_word = is_word(next_cp(s, q));
        }
        if (stop < s.size()) {
          size_t q = stop;
          after_word = is_word(next_cp(s, q));
        }
        if (before_word || after_word) continue;
      }
      if (t.lstrip) start = std::max(trailing_space_start(s.substr(0, start)), start_offset);
      if (t.rstrip) {
        stop += leading_space(s.substr(stop));
        i = stop;
      }
      if (start_offset < start)
        out.push_back({{std::string(s.substr(start_offset, start - start_offset)), first && start_offset == 0}, -1});
      out.push_back({{std::string(), false}, k});
      start_offset = stop;
    }
    if (start_offset < s.size()) out.push_back({{std::string(s.substr(start_offset)), first && start_offset == 0}, -1});
  }

  std::vector<int32_t> encode_sequence(std::string_view text) const {
    std::string fixed;
    if (make_valid_utf8(text, fixed)) text = fixed;
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    std::vector<std::pair<Piece, int32_t>> sections, subs;
    split_added(raw_trie, text, true, sections);
    std::vector<Piece> pieces;
    for (auto& [sec, k] : sections) {
      if (k >= 0) {
        ids.push_back(added[size_t(k)].id);
        continue;
      }
      normalize(sec.text);
      subs.clear();
      split_added(normalized_trie, sec.text, sec.first, subs);
      for (auto& [sub, kk] : subs) {
        if (kk >= 0) {
          ids.push_back(added[size_t(kk)].id);
          continue;
        }
        if (sub.text.empty()) continue;
        pieces.clear();
        pieces.push_back(std::move(sub));
        if (pre_tokenizer) pre_tokenizer->split(pieces);
        for (const Piece& p : pieces) model->tokenize(p.text, ids);
      }
    }
    return ids;
  }

  Encoding finish(Seq s) const {
    Encoding e;
    e.ids = std::move(s.ids);
    e.type_ids = std::move(s.type_ids);
    e.special_mask = std::move(s.special);
    e.tokens.reserve(e.ids.size());
    for (int32_t id : e.ids) e.tokens.push_back(id_to_token[size_t(id)]);
    return e;
  }
};

HfTokenizer::HfTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HfTokenizer::HfTokenizer(HfTokenizer&&) noexcept = default;
HfTokenizer& HfTokenizer::operator=(HfTokenizer&&) noexcept = default;
HfTokenizer::~HfTokenizer() = default;

HfTokenizer HfTokenizer::from_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  NABLA_CHECK(IOError, f.good(), "HfTokenizer: cannot open '", path, "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  NABLA_CHECK(IOError, !f.bad(), "HfTokenizer: error reading '", path, "'");
  return from_string(ss.str(), path);
}

HfTokenizer HfTokenizer::from_string(std::string_view text, const std::string& source) {
  Loader L{source};
  const int depth = json_depth(text);
  L.require(depth <= kMaxJsonDepth, "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) { L.fail(std::string("invalid JSON: ") + e.what()); }
  auto impl = std::make_unique<Impl>();
  impl->source = source;
  try {
    L.require(root.is_object(), "the top level must be an object");
    auto get = [&](const char* key) -> const json& {
      static const json null_value;
      auto it = root.find(key);
      return it == root.end() ? null_value : *it;
    };
    const json& added = get("added_tokens");
    L.require(added.is_null() || added.is_array(), "\"added_tokens\" must be an array");
    impl->normalizer = parse_normalizer(L, get("normalizer"), 0);
    impl->pre_tokenizer = parse_pre_tokenizer(L, get("pre_tokenizer"), 0);
    L.require(!get("model").is_null(), "no \"model\"");
    impl->model = parse_model(L, get("model"), {impl->id_to_token, impl->id_valid, impl->id_special},
                              added.is_array() ? added.size() : 0);
    impl->decoder = parse_decoder(L, get("decoder"), 0);

    // Added tokens: ids consistent with the model's vocabulary, then the two tries.
    if (added.is_array()) {
      for (const json& a : added) {
        const std::string where = "added token";
        L.require(a.is_object(), "each of \"added_tokens\" must be an object");
        AddedToken t;
        t.content = L.str(a, "content", where);
        const int64_t limit = int64_t(impl->id_to_token.size());
        t.id = int32_t(L.integer(a, "id", "added token \"" + t.content + "\"", -1, 0, limit - 1));
        L.require(t.id >= 0, "added token \"" + t.content + "\" has no \"id\"");
        t.single_word = L.boolean(a, "single_word", where, false);
        t.lstrip = L.boolean(a, "lstrip", where, false);
        t.rstrip = L.boolean(a, "rstrip", where, false);
        t.special = L.boolean(a, "special", where, false);
        t.normalized = L.boolean(a, "normalized", where, !t.special);
        const int32_t in_vocab = find_id(impl->model->vocab, t.content);
        L.require(in_vocab < 0 || in_vocab == t.id, "added token \"" + t.content + "\" has id " + std::to_string(t.id) +
                                                        " but the vocabulary gives it " + std::to_string(in_vocab));
        const size_t id = size_t(t.id);
        L.require(!impl->id_valid[id] || impl->id_to_token[id] == t.content,
                  "added token \"" + t.content + "\" has id " + std::to_string(t.id) + ", which is already \"" +
                      impl->id_to_token[id] + "\"");
        if (impl->added_ids.count(t.content)) continue;  // a repeated token: the first one counts
        impl->id_to_token[id] = t.content;
        impl->id_valid[id] = 1;
        impl->id_special[id] = t.special;
        impl->added_ids.emplace(t.content, t.id);
        impl->added.push_back(std::move(t));
      }
    }
    // The highest id is now known: trim the id table to it.
    size_t top = impl->id_valid.size();
    while (top > 0 && !impl->id_valid[top - 1]) --top;
    impl->id_to_token.resize(top);
    impl->id_valid.resize(top);
    impl->id_special.resize(top);
    for (size_t k = 0; k < impl->added.size(); ++k) {
      const AddedToken& t = impl->added[k];
      if (t.normalized) {
        std::string c = t.content;
        impl->normalize(c);
        impl->normalized_trie.add(c, int32_t(k));
      } else {
        impl->raw_trie.add(t.content, int32_t(k));
      }
    }

    // The post-processor last: its special tokens must have ids.
    impl->post_processor = parse_post_processor(L, get("post_processor"), impl->id_valid);
  } catch (const json::exception& e) { L.fail(std::string("unexpected JSON structure: ") + e.what()); }
  return HfTokenizer(std::move(impl));
}

HfTokenizer::Encoding HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> a = impl_->encode_sequence(text);
  Seq s = impl_->post_processor ? impl_->post_processor->process(a, nullptr, add_special_tokens)
                                : default_process(a, nullptr);
  return impl_->finish(std::move(s));
}

HfTokenizer::Encoding HfTokenizer::encode_pair(std::string_view a, std::string_view b, bool add_special_tokens) const {
  std::vector<int32_t> ia = impl_->encode_sequence(a), ib = impl_->encode_sequence(b);
  Seq s =
      impl_->post_processor ? impl_->post_processor->process(ia, &ib, add_special_tokens) : default_process(ia, &ib);
  return impl_->finish(std::move(s));
}

std::string HfTokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  const size_t n = impl_->id_valid.size();
  for (int32_t id : ids) {
    NABLA_CHECK(IndexError, id >= 0 && size_t(id) < n && impl_->id_valid[size_t(id)], "HfTokenizer::decode: id ", id,
                " is not in the vocabulary (vocabulary size ", n, ")");
    if (skip_special_tokens && impl_->id_special[size_t(id)]) continue;
    tokens.push_back(impl_->id_to_token[size_t(id)]);
  }
  if (!impl_->decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  impl_->decoder->decode_chain(tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::string HfTokenizer::normalize(std::string_view text) const {
  std::string s;
  if (!make_valid_utf8(text, s)) s = std::string(text);
  impl_->normalize(s);
  return s;
}

std::vector<std::string> HfTokenizer::pre_tokenize(std::string_view text) const {
  std::string s;
  if (!make_valid_utf8(text, s)) s = std::string(text);
  std::vector<Piece> pieces;
  if (!s.empty()) pieces.push_back({std::move(s), true});
  if (impl_->pre_tokenizer) impl_->pre_tokenizer->split(pieces);
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (Piece& p : pieces) out.push_back(std::move(p.text));
  return out;
}

int32_t HfTokenizer::token_to_id(std::string_view token) const {
  if (int32_t id = find_id(impl_->added_ids, token); id >= 0) return id;
  return find_id(impl_->model->vocab, token);
}

const std::string& HfTokenizer::id_to_token(int32_t id) const {
  const size_t n = impl_->id_valid.size();
  NABLA_CHECK(IndexError, id >= 0 && size_t(id) < n && impl_->id_valid[size_t(id)], "HfTokenizer::id_to_token: id ", id,
              " is not in the vocabulary (vocabulary size ", n, ")");
  return impl_->id_to_token[size_t(id)];
}

int32_t HfTokenizer::vocab_size() const { return int32_t(impl_->id_valid.size()); }

}  // namespace nabla::text
