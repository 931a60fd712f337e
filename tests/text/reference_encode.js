// Encodes every record of a corpus (one JSON string per line) with the reference tokenizers and
// writes one file per reference: one line per record, the ids separated by spaces.
//
//   node tests/text/reference_encode.js <node_modules dir> <corpus.jsonl> <output dir>
//
// References (each written only if its npm package is installed; <output dir>/manifest.json lists
// what was written):
//   gpt3_encoder       gpt-3-encoder's encode (GPT-2's encoder.json + vocab.bpe, JavaScript regex)
//   js_r50k, js_cl100k js-tiktoken, special tokens as plain text (JavaScript regex)
//   tk_r50k, tk_cl100k tiktoken (WASM build of OpenAI's Rust tiktoken: the reference), encode_ordinary
//   tk_r50k_special, tk_cl100k_special   tiktoken's encode(text, "all"): special tokens recognised
//   js_r50k_decode_prefix, js_cl100k_decode_prefix (.jsonl)   js-tiktoken's decode of the first half
//                      of each record's ids, as a JSON string (U+FFFD where the cut splits a character)
'use strict';
const fs = require('fs');
const path = require('path');

const modules = path.resolve(process.argv[2] || '');
const corpusPath = process.argv[3];
const outDir = process.argv[4];
if (!process.argv[2] || !corpusPath || !outDir) {
  console.error('usage: node reference_encode.js <node_modules dir> <corpus.jsonl> <output dir>');
  process.exit(2);
}
fs.mkdirSync(outDir, {recursive: true});
const records = fs.readFileSync(corpusPath, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l));

function tryRequire(name) {
  try {
    return require(path.join(modules, name));
  } catch (e) {
    console.error(`reference_encode: ${name} not available: ${e.message.split('\n')[0]}`);
    return null;
  }
}

const encoders = {};
const gpt3 = tryRequire('gpt-3-encoder');
if (gpt3) encoders.gpt3_encoder = (s) => gpt3.encode(s);
const jstk = tryRequire('js-tiktoken');
if (jstk) {
  const r50k = jstk.getEncoding('r50k_base');
  const cl100k = jstk.getEncoding('cl100k_base');
  encoders.js_r50k = (s) => r50k.encode(s, [], []);
  encoders.js_cl100k = (s) => cl100k.encode(s, [], []);
}
const tk = tryRequire('tiktoken');
if (tk) {
  const r50k = tk.get_encoding('r50k_base');
  const cl100k = tk.get_encoding('cl100k_base');
  encoders.tk_r50k = (s) => r50k.encode_ordinary(s);
  encoders.tk_cl100k = (s) => cl100k.encode_ordinary(s);
  encoders.tk_r50k_special = (s) => r50k.encode(s, 'all');
  encoders.tk_cl100k_special = (s) => cl100k.encode(s, 'all');
}

const written = [];
for (const [name, encode] of Object.entries(encoders)) {
  const lines = records.map((s) => Array.from(encode(s)).join(' '));
  fs.writeFileSync(path.join(outDir, name + '.ids'), lines.join('\n') + '\n');
  written.push(name);
}
// Decoding a prefix of each record's ids (cut in the middle, often inside a character) with
// js-tiktoken's decode (TextDecoder: U+FFFD for invalid UTF-8): one JSON string per record.
if (jstk) {
  for (const name of ['r50k_base', 'cl100k_base']) {
    const enc = jstk.getEncoding(name);
    const lines = records.map((s) => {
      const ids = enc.encode(s, [], []);
      return JSON.stringify(enc.decode(ids.slice(0, Math.floor(ids.length / 2))));
    });
    fs.writeFileSync(path.join(outDir, 'js_' + name.replace('_base', '') + '_decode_prefix.jsonl'), lines.join('\n') + '\n');
    written.push('js_' + name.replace('_base', '') + '_decode_prefix');
  }
}
fs.writeFileSync(path.join(outDir, 'manifest.json'), JSON.stringify({records: records.length, references: written}));
console.log(`reference_encode: ${records.length} records, ${written.join(', ')}`);
