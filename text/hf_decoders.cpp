// The post-processors and decoders of tokenizer.json files (text/hf_internal.h).
#include "text/hf_internal.h"

#include <algorithm>
#include <string>
#include <vector>

namespace nabla::text::hf {

// ---------------------------------------------------------------------------------------------
// Post-processors: they wrap the sequences' ids with special tokens and set the type ids.

Seq default_process(const std::vector<int32_t>& a, const std::vector<int32_t>* b) {
  Seq s;
  s.add(a, 0, 0);
  if (b) s.add(*b, 1, 0);
  return s;
}

struct TemplateProcessor final : PostProcessor {
  struct Item {
    bool is_sequence;
    int which;                 // 0 for $A, 1 for $B
    std::vector<int32_t> ids;  // the special token's ids
    int32_t type_id;
  };
  std::vector<Item> single, pair;
  Seq process(const std::vector<int32_t>& a, const std::vector<int32_t>* b, bool add_special) const override {
    NABLA_CHECK(ValueError, !b || !pair.empty(), "HfTokenizer::encode_pair: the TemplateProcessing post-processor ",
                "has no pair template");
    Seq s;
    for (const Item& it : b ? pair : single) {
      if (it.is_sequence) {
        s.add(it.which == 0 ? a : *b, it.type_id, 0);
      } else if (add_special) {
        s.add(it.ids, it.type_id, 1);
      }
    }
    return s;
  }
};

struct BertProcessor final : PostProcessor {
  int32_t cls = -1, sep = -1;
  bool roberta = false;
  Seq process(const std::vector<int32_t>& a, const std::vector<int32_t>* b, bool add_special) const override {
    const int32_t pair_type = roberta ? 0 : 1;  // RoBERTa: every type id is 0
    Seq s;
    if (!add_special) {
      s.add(a, 0, 0);
      if (b) s.add(*b, pair_type, 0);
      return s;
    }
    s.add({cls}, 0, 1);
    s.add(a, 0, 0);
    s.add({sep}, 0, 1);
    if (b) {
      if (roberta) s.add({sep}, 0, 1);
      s.add(*b, pair_type, 0);
      s.add({sep}, pair_type, 1);
    }
    return s;
  }
};

// ---------------------------------------------------------------------------------------------
// Decoders: each maps the list of token strings to a new list; decode concatenates the last one.

std::string lossy_utf8(std::string s) {
  std::string fixed;
  return make_valid_utf8(s, fixed) ? fixed : s;
}

struct ByteLevelDecoder final : Decoder {
  void decode_chain(std::vector<std::string>& tokens) const override {
    static const std::unordered_map<uint32_t, uint8_t> to_byte = [] {
      std::unordered_map<uint32_t, uint8_t> m;
      for (int b = 0; b < 256; ++b) {
        size_t i = 0;
        m[next_cp(byte_chars()[size_t(b)], i)] = uint8_t(b);
      }
      return m;
    }();
    std::string bytes, tok;
    for (const std::string& t : tokens) {
      tok.clear();
      bool all = true;
      for (size_t i = 0; i < t.size() && all;) {
        auto it = to_byte.find(next_cp(t, i));
        if (it == to_byte.end()) {
          all = false;
        } else {
          tok += char(it->second);
        }
      }
      bytes += all ? tok : t;
    }
    tokens.assign(1, lossy_utf8(std::move(bytes)));
  }
};

std::string cleanup_tokenization(std::string s) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},   {" ?", "?"},           {" !", "!"},   {" ,", ","},     {" ' ", "'"},   {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : kRules) replace_all(s, from, to);
  return s;
}

struct WordPieceDecoder final : Decoder {
  std::string prefix = "##";
  bool cleanup = true;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (t.starts_with(prefix)) {
          t.erase(0, prefix.size());
        } else {
          t.insert(0, 1, ' ');
        }
      }
      if (cleanup) t = cleanup_tokenization(std::move(t));
    }
  }
};

struct MetaspaceDecoder final : Decoder {
  std::string replacement = "\xe2\x96\x81";
  Prepend prepend = Prepend::kAlways;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i)
      replace_all(tokens[i], replacement, i == 0 && prepend != Prepend::kNever ? "" : " ");
  }
};

struct BpeDecoder final : Decoder {
  std::string suffix = "</w>";
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) replace_all(tokens[i], suffix, i + 1 == tokens.size() ? "" : " ");
  }
};

struct ReplaceDecoder final : Decoder {
  std::string pattern, content;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) replace_all(t, pattern, content);
  }
};

struct StripDecoder final : Decoder {
  uint32_t content = ' ';
  size_t start = 0, stop = 0;
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<uint32_t> cps;
    for (std::string& t : tokens) {
      cps.clear();
      for (size_t i = 0; i < t.size();) cps.push_back(next_cp(t, i));
      size_t b = 0, e = cps.size();
      for (size_t i = 0; i < start && i < cps.size() && cps[i] == content; ++i) b = i + 1;
      for (size_t i = 0; i < stop && i < cps.size(); ++i) {
        const size_t at = cps.size() - i - 1;
        if (cps[at] != content) break;
        e = at;
      }
      std::string out;
      for (size_t i = b; i < e; ++i) append_utf8(out, cps[i]);
      t.swap(out);
    }
  }
};

struct FuseDecoder final : Decoder {
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

struct ByteFallbackDecoder final : Decoder {
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty()) return;
      std::string fixed;
      if (make_valid_utf8(bytes, fixed)) {
        for (size_t k = 0; k < bytes.size(); ++k) out.emplace_back("\xef\xbf\xbd");  // one U+FFFD per byte
      } else {
        out.push_back(bytes);
      }
      bytes.clear();
    };
    for (std::string& t : tokens) {
      if (t.size() == 6 && t.starts_with("<0x") && t.back() == '>' && hex(t[3]) >= 0 && hex(t[4]) >= 0) {
        bytes += char(hex(t[3]) * 16 + hex(t[4]));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens.swap(out);
  }
};

struct SequenceDecoder final : Decoder {
  std::vector<DecoderPtr> parts;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : parts) d->decode_chain(tokens);
  }
};

DecoderPtr parse_decoder(const Loader& L, const json& j, int depth) {
  if (j.is_null()) return nullptr;
  const std::string where = "decoder";
  L.require(depth <= kMaxComponentDepth,
            "decoder Sequence nested deeper than " + std::to_string(kMaxComponentDepth) + " levels");
  const std::string type = L.type_of(j, where);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "WordPiece") {
    auto d = std::make_unique<WordPieceDecoder>();
    d->prefix = L.str(j, "prefix", where, "##");
    d->cleanup = L.boolean(j, "cleanup", where, true);
    return d;
  }
  if (type == "Metaspace") {
    auto d = std::make_unique<MetaspaceDecoder>();
    d->replacement = L.str(j, "replacement", where, d->replacement);
    single_char(L, d->replacement, "decoder Metaspace: \"replacement\"");
    d->prepend = parse_prepend(L, j, "decoder Metaspace");
    return d;
  }
  if (type == "BPEDecoder") {
    auto d = std::make_unique<BpeDecoder>();
    d->suffix = L.str(j, "suffix", where, "</w>");
    return d;
  }
  if (type == "Replace") {
    auto d = std::make_unique<ReplaceDecoder>();
    d->pattern = string_pattern(L, L.field(j, "pattern", where), "decoder Replace");
    L.require(!d->pattern.empty(), "decoder Replace: empty pattern");
    d->content = L.str(j, "content", where);
    return d;
  }
  if (type == "Strip") {
    auto d = std::make_unique<StripDecoder>();
    d->content = single_char(L, L.str(j, "content", where, " "), "decoder Strip: \"content\"");
    d->start = size_t(L.integer(j, "start", where, 0, 0, 1 << 20));
    d->stop = size_t(L.integer(j, "stop", where, 0, 0, 1 << 20));
    return d;
  }
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Sequence") {
    auto d = std::make_unique<SequenceDecoder>();
    const json& list = L.field(j, "decoders", where);
    L.require(list.is_array(), "decoder Sequence: \"decoders\" must be an array");
    for (const json& x : list)
      if (auto q = parse_decoder(L, x, depth + 1)) d->parts.push_back(std::move(q));
    return d;
  }
  L.unsupported(where, type,
                "ByteLevel, WordPiece, Metaspace, BPEDecoder, Replace, Strip, Fuse, ByteFallback, Sequence");
}

PostProcessorPtr parse_post_processor(const Loader& L, const json& pp, const std::vector<uint8_t>& id_valid) {
  PostProcessorPtr result;
  auto parse_pp = [&](const json& j) -> PostProcessorPtr {
    const std::string where = "post_processor";
    const std::string type = L.type_of(j, where);
    auto check_id = [&](int64_t id, const std::string& what) {
      L.require(id >= 0 && size_t(id) < id_valid.size() && id_valid[size_t(id)],
                "post_processor " + type + ": " + what + " has id " + std::to_string(id) +
                    ", which is not in the vocabulary");
      return int32_t(id);
    };
    if (type == "TemplateProcessing") {
      auto p = std::make_unique<TemplateProcessor>();
      const json& specials = L.field(j, "special_tokens", "post_processor TemplateProcessing");
      L.require(specials.is_object(), "post_processor TemplateProcessing: \"special_tokens\" must be an object");
      auto parse_items = [&](const char* key, std::vector<TemplateProcessor::Item>& items) {
        const json& list = L.field(j, key, "post_processor TemplateProcessing");
        L.require(list.is_array(), std::string("post_processor TemplateProcessing: \"") + key + "\" must be an array");
        for (const json& x : list) {
          L.require(x.is_object() && x.size() == 1, "post_processor TemplateProcessing: bad template item");
          TemplateProcessor::Item item{};
          if (auto s = x.find("Sequence"); s != x.end()) {
            item.is_sequence = true;
            const std::string id = L.str(*s, "id", "template Sequence", "A");
            L.require(id == "A" || id == "B",
                      "post_processor TemplateProcessing: sequence id \"" + id + "\" (expected A or B)");
            item.which = id == "A" ? 0 : 1;
            item.type_id = int32_t(L.integer(*s, "type_id", "template Sequence", 0, 0, 1 << 20));
          } else if (auto t = x.find("SpecialToken"); t != x.end()) {
            item.is_sequence = false;
            const std::string id = L.str(*t, "id", "template SpecialToken");
            item.type_id = int32_t(L.integer(*t, "type_id", "template SpecialToken", 0, 0, 1 << 20));
            auto st = specials.find(id);
            L.require(st != specials.end(),
                      "post_processor TemplateProcessing: special token \"" + id + "\" is not in \"special_tokens\"");
            const json& ids = L.field(*st, "ids", "special token \"" + id + "\"");
            L.require(ids.is_array(), "special token \"" + id + "\": \"ids\" must be an array");
            for (const json& v : ids) {
              L.require(v.is_number_integer(), "special token \"" + id + "\": ids must be integers");
              item.ids.push_back(check_id(v.get<int64_t>(), "special token \"" + id + "\""));
            }
          } else {
            L.fail("post_processor TemplateProcessing: a template item must be Sequence or SpecialToken");
          }
          items.push_back(std::move(item));
        }
      };
      parse_items("single", p->single);
      parse_items("pair", p->pair);
      bool has_b = false;
      for (const auto& it : p->pair) has_b = has_b || (it.is_sequence && it.which == 1);
      L.require(has_b || p->pair.empty(), "post_processor TemplateProcessing: the pair template has no $B");
      for (const auto& it : p->single)
        L.require(!it.is_sequence || it.which == 0, "post_processor TemplateProcessing: the single template uses $B");
      return p;
    }
    if (type == "BertProcessing" || type == "RobertaProcessing") {
      auto p = std::make_unique<BertProcessor>();
      p->roberta = type == "RobertaProcessing";
      auto pair_id = [&](const char* key) {
        const json& v = L.field(j, key, "post_processor " + type);
        L.require(v.is_array() && v.size() == 2 && v[1].is_number_integer(),
                  "post_processor " + type + ": \"" + key + "\" must be [token, id]");
        return check_id(v[1].get<int64_t>(), std::string("\"") + key + "\"");
      };
      p->cls = pair_id("cls");
      p->sep = pair_id("sep");
      return p;
    }
    if (type == "ByteLevel") return nullptr;
    L.unsupported(where, type, "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence");
  };
  if (pp.is_null()) return nullptr;
  if (L.type_of(pp, "post_processor") == "Sequence") {
    const json& list = L.field(pp, "processors", "post_processor Sequence");
    L.require(list.is_array(), "post_processor Sequence: \"processors\" must be an array");
    for (const json& x : list) {
      L.require(!x.is_object() || L.str(x, "type", "post_processor") != "Sequence",
                "post_processor Sequence inside a Sequence is not supported");
      if (auto p = parse_pp(x)) {
        L.require(!result, "post_processor Sequence with more than one processor besides ByteLevel is not supported");
        result = std::move(p);
      }
    }
  } else {
    result = parse_pp(pp);
  }
  return result;
}

}  // namespace nabla::text::hf
