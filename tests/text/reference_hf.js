// Encodes the corpus with the JavaScript port of Hugging Face's tokenizers (@huggingface/tokenizers,
// "Tokenizers.js") for every tokenizer.json that make_hf_tokenizers.py wrote, one line per record:
//
//   node tests/text/reference_hf.js <node_modules dir> <corpus.jsonl> <tokenizer dir>
//
// Writes into <tokenizer dir>, for each NAME.json (the "added" tokenizer reads added_corpus.jsonl):
//   NAME.ids                 encode(text).ids (add_special_tokens true), space-separated
//   NAME.decode.jsonl        decode(ids, {skip_special_tokens: false}) as a JSON string
//   NAME.decode_skip.jsonl   decode(ids, {skip_special_tokens: true})
//   NAME.pair.ids / NAME.pair.types   encode(record i, {text_pair: record i+1}) ids and token_type_ids,
//                            for the first 3000 records (BERT-style tokenizers only)
// clean_up_tokenization_spaces is false (a transformers setting; the Rust library has none).
'use strict';
const fs = require('fs');
const path = require('path');

const modules = path.resolve(process.argv[2] || '');
const corpusPath = process.argv[3];
const dir = process.argv[4];
if (!process.argv[2] || !corpusPath || !dir) {
  console.error('usage: node reference_hf.js <node_modules dir> <corpus.jsonl> <tokenizer dir>');
  process.exit(2);
}
const {Tokenizer} = require(path.join(modules, '@huggingface/tokenizers/dist/tokenizers.cjs'));
const readJsonl = (p) => fs.readFileSync(p, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l));
const corpus = readJsonl(corpusPath);
const addedCorpus = readJsonl(path.join(dir, 'added_corpus.jsonl')).map((r) => r.text);
const decode = (tok, ids, skip) => (ids.length === 0 ? '' : tok.decode(ids, {skip_special_tokens: skip}));

for (const name of ['gpt2', 'bert_uncased', 'bert_cased', 'spm_bpe', 'added']) {
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(path.join(dir, name + '.json'), 'utf8')),
                            {clean_up_tokenization_spaces: false});
  const records = name === 'added' ? addedCorpus : corpus;
  const ids = [], dec = [], decSkip = [];
  for (const text of records) {
    const e = tok.encode(text).ids;
    ids.push(e.join(' '));
    dec.push(JSON.stringify(decode(tok, e, false)));
    decSkip.push(JSON.stringify(decode(tok, e, true)));
  }
  fs.writeFileSync(path.join(dir, name + '.ids'), ids.join('\n') + '\n');
  fs.writeFileSync(path.join(dir, name + '.decode.jsonl'), dec.join('\n') + '\n');
  fs.writeFileSync(path.join(dir, name + '.decode_skip.jsonl'), decSkip.join('\n') + '\n');
  if (name.startsWith('bert') || name === 'spm_bpe') {
    const pids = [], ptypes = [];
    for (let i = 0; i < Math.min(3000, records.length); ++i) {
      const e = tok.encode(records[i], {text_pair: records[(i + 1) % records.length], return_token_type_ids: true});
      pids.push(e.ids.join(' '));
      ptypes.push(e.token_type_ids.join(' '));
    }
    fs.writeFileSync(path.join(dir, name + '.pair.ids'), pids.join('\n') + '\n');
    fs.writeFileSync(path.join(dir, name + '.pair.types'), ptypes.join('\n') + '\n');
  }
}
fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify({records: corpus.length}));
console.log(`reference_hf: ${corpus.length} records`);
