// Writes tiktoken ranks files ("base64(token bytes) rank" per line, the format of OpenAI's
// r50k_base.tiktoken / cl100k_base.tiktoken) from the copies js-tiktoken ships in its own compressed
// form ("!prefix offset tok tok ..." lines, consecutive ranks from offset).
//
//   node tests/text/write_tiktoken_ranks.js <node_modules dir> <output dir>
// writes <output dir>/r50k_base.tiktoken and <output dir>/cl100k_base.tiktoken, and
// <output dir>/<name>.special.json with the encoding's special tokens and pattern.
'use strict';
const fs = require('fs');
const path = require('path');

const modules = process.argv[2] && path.resolve(process.argv[2]);
const outDir = process.argv[3];
if (!modules || !outDir) {
  console.error('usage: node write_tiktoken_ranks.js <node_modules dir> <output dir>');
  process.exit(2);
}
fs.mkdirSync(outDir, {recursive: true});
for (const [name, file] of [['r50k_base', 'gpt2'], ['cl100k_base', 'cl100k_base']]) {
  const data = require(path.join(modules, 'js-tiktoken', 'dist', 'ranks', file + '.cjs'));
  const lines = [];
  for (const line of data.bpe_ranks.split('\n')) {
    if (!line) continue;
    const [, offsetStr, ...tokens] = line.split(' ');
    const offset = Number.parseInt(offsetStr, 10);
    tokens.forEach((token, i) => lines.push(token + ' ' + (offset + i)));
  }
  fs.writeFileSync(path.join(outDir, name + '.tiktoken'), lines.join('\n') + '\n');
  fs.writeFileSync(path.join(outDir, name + '.special.json'),
                   JSON.stringify({pat_str: data.pat_str, special_tokens: data.special_tokens}));
  console.log(`${name}: ${lines.length} ranks`);
}
