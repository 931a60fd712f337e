// The BPE and WordPiece models of tokenizer.json files (text/hf_internal.h).
#include "text/hf_internal.h"

#include <algorithm>
#include <string>
#include <vector>

#include "text/bpe_merge.h"

namespace nabla::text::hf {

// ---------------------------------------------------------------------------------------------
// Models.

// The pair map of BPE: (left id, right id) -> (rank, merged id).
struct MergeMap {
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> map;
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  const std::pair<int32_t, int32_t>* find(int32_t a, int32_t b) const {
    auto it = map.find(key(a, b));
    return it == map.end() ? nullptr : &it->second;
  }
};

using detail::kNoRank;

struct BpeModel final : Model {
  MergeMap merges;
  int32_t unk_id = -1;
  std::string prefix, suffix;  // continuing_subword_prefix, end_of_word_suffix
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  std::array<int32_t, 256> byte_ids{};  // "<0xAB>" ids for byte_fallback (-1 where missing)

  int32_t rank(int32_t a, int32_t b) const {
    const auto* r = merges.find(a, b);
    return r ? r->first : kNoRank;
  }

  void tokenize(std::string_view w, std::vector<int32_t>& out) const override {
    if (w.empty()) return;
    if (ignore_merges) {
      if (int32_t id = find_id(vocab, w); id >= 0) {
        out.push_back(id);
        return;
      }
    }
    // The symbols of the word: one per character (with the prefix / suffix), unknown ones as
    // byte-fallback tokens or unk (fused when fuse_unk), as Rust's BPE::merge_word.
    std::vector<int32_t> sym;
    sym.reserve(w.size());
    std::string buf;
    bool pending_unk = false;
    for (size_t i = 0; i < w.size();) {
      const size_t start = i;
      i += cp_len(uint8_t(w[i]));
      i = std::min(i, w.size());
      std::string_view ch = w.substr(start, i - start);
      int32_t id;
      if (prefix.empty() && suffix.empty()) {
        id = find_id(vocab, ch);
      } else {
        buf.clear();
        if (start > 0) buf += prefix;
        buf += ch;
        if (i == w.size()) buf += suffix;
        id = find_id(vocab, buf);
      }
      if (id >= 0) {
        if (pending_unk) sym.push_back(unk_id);
        pending_unk = false;
        sym.push_back(id);
        continue;
      }
      if (byte_fallback) {
        std::string_view s = (prefix.empty() && suffix.empty()) ? ch : std::string_view(buf);
        bool all = true;
        for (unsigned char c : s) all = all && byte_ids[c] >= 0;
        if (all) {
          // Rust keeps a pending unk across byte tokens and emits it later; keep that order.
          for (unsigned char c : s) sym.push_back(byte_ids[c]);
          continue;
        }
      }
      if (unk_id >= 0) {
        if (pending_unk && !fuse_unk) sym.push_back(unk_id);
        pending_unk = true;
      }
    }
    if (pending_unk) sym.push_back(unk_id);
    merge(sym);
    out.insert(out.end(), sym.begin(), sym.end());
  }

  // Repeatedly merges the adjacent pair of lowest rank (leftmost on ties): text/bpe_merge.h.
  void merge(std::vector<int32_t>& s) const {
    s.resize(detail::merge_pairs(
        s.data(), s.size(), [this](int32_t a, int32_t b) { return rank(a, b); },
        [this](int32_t, int32_t a, int32_t b) { return merges.find(a, b)->second; }));
  }
};

struct WordPieceModel final : Model {
  int32_t unk_id = -1;
  std::string unk_token = "[UNK]";
  std::string prefix = "##";
  int64_t max_chars = 100;

  int32_t unk() const {
    NABLA_CHECK(ValueError, unk_id >= 0, "HfTokenizer: WordPiece: the unk_token '", unk_token,
                "' is not in the vocabulary, and a word needs it");
    return unk_id;
  }

  void tokenize(std::string_view w, std::vector<int32_t>& out) const override {
    if (w.empty()) return;
    size_t chars = 0;
    for (unsigned char c : w) chars += (c & 0xC0) != 0x80;
    if (int64_t(chars) > max_chars) {
      out.push_back(unk());
      return;
    }
    const size_t mark = out.size();
    std::string buf;
    size_t start = 0;
    while (start < w.size()) {
      size_t end = w.size();
      int32_t found = -1;
      while (start < end) {
        std::string_view sub = w.substr(start, end - start);
        if (start > 0) {
          buf.assign(prefix);
          buf += sub;
          found = find_id(vocab, buf);
        } else {
          found = find_id(vocab, sub);
        }
        if (found >= 0) break;
        --end;
        while (end > start && (uint8_t(w[end]) & 0xC0) == 0x80) --end;  // back one character
      }
      if (found < 0) {
        out.resize(mark);
        out.push_back(unk());
        return;
      }
      out.push_back(found);
      start = end;
    }
  }
};

std::unique_ptr<Model> parse_model(const Loader& L, const json& j, IdTable impl, size_t n_added) {
  std::string type = L.type_of(j, "model");
  if (type.empty() && j.contains("merges")) type = "BPE";  // old files have no type
  if (type.empty() && j.contains("vocab") && j.contains("continuing_subword_prefix")) type = "WordPiece";
  const std::string where = "model " + type;
  std::unique_ptr<Model> model;
  if (type == "BPE") {
    model = std::make_unique<BpeModel>();
  } else if (type == "WordPiece") {
    model = std::make_unique<WordPieceModel>();
  } else {
    L.unsupported("model", type, "BPE, WordPiece");
  }
  const json& vocab = L.field(j, "vocab", where);
  L.require(vocab.is_object(), where + ": \"vocab\" must be an object of token -> id");
  // Ids must be dense enough that the id table stays proportional to the file.
  const int64_t limit = 2 * int64_t(vocab.size() + n_added) + 65536;
  impl.id_to_token.assign(size_t(limit), std::string());
  impl.id_valid.assign(size_t(limit), 0);
  impl.id_special.assign(size_t(limit), 0);
  model->vocab.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    L.require(it->is_number_integer(), where + ": the id of \"" + it.key() + "\" must be an integer");
    const int64_t id = it->get<int64_t>();
    L.require(id >= 0 && id < limit, where + ": token \"" + it.key() + "\" has id " + std::to_string(id) +
                                         ", outside [0, " + std::to_string(limit) + ") for a vocabulary of " +
                                         std::to_string(vocab.size()) + " tokens");
    L.require(!impl.id_valid[size_t(id)], where + ": id " + std::to_string(id) + " is given to both \"" +
                                              impl.id_to_token[size_t(id)] + "\" and \"" + it.key() + "\"");
    impl.id_to_token[size_t(id)] = it.key();
    impl.id_valid[size_t(id)] = 1;
    model->vocab.emplace(it.key(), int32_t(id));
  }
  if (type == "WordPiece") {
    auto* wp = static_cast<WordPieceModel*>(model.get());
    wp->unk_token = L.str(j, "unk_token", where, "[UNK]");
    wp->unk_id = find_id(wp->vocab, wp->unk_token);
    wp->prefix = L.str(j, "continuing_subword_prefix", where, "##");
    wp->max_chars = L.integer(j, "max_input_chars_per_word", where, 100, 0, std::numeric_limits<int64_t>::max());
    return model;
  }
  auto* bpe = static_cast<BpeModel*>(model.get());
  const std::string unk = L.str(j, "unk_token", where, "");
  if (!unk.empty()) {
    bpe->unk_id = find_id(bpe->vocab, unk);
    L.require(bpe->unk_id >= 0, where + ": unk_token \"" + unk + "\" is not in the vocabulary");
  }
  bpe->prefix = L.str(j, "continuing_subword_prefix", where, "");
  bpe->suffix = L.str(j, "end_of_word_suffix", where, "");
  bpe->fuse_unk = L.boolean(j, "fuse_unk", where, false);
  bpe->byte_fallback = L.boolean(j, "byte_fallback", where, false);
  bpe->ignore_merges = L.boolean(j, "ignore_merges", where, false);
  if (auto d = j.find("dropout"); d != j.end() && !d->is_null()) {
    L.require(d->is_number() && d->get<double>() == 0.0, where + ": dropout is not supported (it must be null or 0)");
  }
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char name[7] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>', 0};
    bpe->byte_ids[size_t(b)] = find_id(bpe->vocab, name);
  }
  const json& merges = L.field(j, "merges", where);
  L.require(merges.is_array(), where + ": \"merges\" must be an array");
  bpe->merges.map.reserve(merges.size());
  std::string merged;
  for (size_t r = 0; r < merges.size(); ++r) {
    const json& m = merges[r];
    std::string a, b;
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      L.require(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos,
                where + ": merge " + std::to_string(r) + " \"" + s + "\" is not two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {
      L.require(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                where + ": merge " + std::to_string(r) + " must be \"a b\" or [\"a\", \"b\"]");
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    }
    const int32_t ia = find_id(bpe->vocab, a), ib = find_id(bpe->vocab, b);
    L.require(ia >= 0, where + ": merge " + std::to_string(r) + " names \"" + a + "\", which is not in the vocabulary");
    L.require(ib >= 0, where + ": merge " + std::to_string(r) + " names \"" + b + "\", which is not in the vocabulary");
    merged = a;
    merged += std::string_view(b).substr(
        !bpe->prefix.empty() && std::string_view(b).starts_with(bpe->prefix) ? bpe->prefix.size() : 0);
    const int32_t im = find_id(bpe->vocab, merged);
    L.require(im >= 0,
              where + ": merge " + std::to_string(r) + " makes \"" + merged + "\", which is not in the vocabulary");
    bpe->merges.map[MergeMap::key(ia, ib)] = {int32_t(r), im};  // a repeated pair keeps its last rank
  }
  return model;
}

}  // namespace nabla::text::hf
