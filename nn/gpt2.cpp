#include "nn/gpt2.h"

#include <cmath>
#include <cstdio>
#include <string_view>

#include "core/impl.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "io/torch_file.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace nabla::nn {

namespace F = functional;

namespace {

void check_config(const GPT2Config& c) {
  NABLA_CHECK(ValueError,
              c.vocab_size > 0 && c.n_positions > 0 && c.n_embd > 0 && c.n_layer > 0 && c.n_head > 0 &&
                  c.n_embd % c.n_head == 0,
              "GPT2: vocab_size, n_positions, n_embd, n_layer and n_head must be positive and n_embd a multiple of "
              "n_head, got vocab_size ",
              c.vocab_size, ", n_positions ", c.n_positions, ", n_embd ", c.n_embd, ", n_layer ", c.n_layer,
              ", n_head ", c.n_head);
  NABLA_CHECK(ValueError, c.dropout >= 0 && c.dropout < 1, "GPT2: dropout must be in [0, 1), got ", c.dropout);
}

}  // namespace

// ---- Conv1D ------------------------------------------------------------------------------------------

Conv1D::Conv1D(int64_t nf_, int64_t nx_) : Module("Conv1D"), nf(nf_), nx(nx_) {
  weight = register_parameter("weight", init::normal_(empty({nx, nf}), 0.0, 0.02));
  bias = register_parameter("bias", zeros({nf}));
}

Tensor Conv1D::forward(Tensor x) { return F::linear(x, weight.t(), bias); }

std::string Conv1D::extra_repr() const { return internal::str("nf=", nf, ", nx=", nx); }

// ---- the blocks --------------------------------------------------------------------------------------

GPT2Attention::GPT2Attention(const GPT2Config& c)
    : Module("GPT2Attention"), n_head(c.n_head), head_dim(c.n_embd / c.n_head), dropout(c.dropout) {
  c_attn = register_module("c_attn", std::make_shared<Conv1D>(3 * c.n_embd, c.n_embd));
  c_proj = register_module("c_proj", std::make_shared<Conv1D>(c.n_embd, c.n_embd));
}

Tensor GPT2Attention::forward_attention(const Tensor& x, KVCache* cache) {
  NABLA_CHECK(ShapeError, x.dim() == 3 && x.size(2) == n_head * head_dim, "GPT2Attention: expected x (B, T, ",
              n_head * head_dim, "), got ", x.sizes());
  const int64_t B = x.size(0), T = x.size(1), d = n_head * head_dim;
  auto qkv = c_attn->forward(x).split(d, -1);  // 3 x (B, T, d)
  auto heads = [&](const Tensor& t) { return t.view({B, T, n_head, head_dim}).transpose(1, 2); };
  Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);  // (B, H, T, hd)
  const double p = is_training() ? dropout : 0.0;
  Tensor a;
  if (cache) {
    std::tie(k, v) = cache->append(k, v);
    a = F::scaled_dot_product_attention(
        q, k, v, {.attn_mask = cache->attention_bias(T, /*causal=*/true, q.dtype()), .dropout_p = p});
  } else {
    a = F::scaled_dot_product_attention(q, k, v, {.dropout_p = p, .is_causal = true});
  }
  Tensor out = c_proj->forward(a.transpose(1, 2).reshape({B, T, d}));
  return p > 0 ? F::dropout(out, p, true) : out;
}

GPT2MLP::GPT2MLP(const GPT2Config& c) : Module("GPT2MLP"), dropout(c.dropout) {
  c_fc = register_module("c_fc", std::make_shared<Conv1D>(4 * c.n_embd, c.n_embd));
  c_proj = register_module("c_proj", std::make_shared<Conv1D>(c.n_embd, 4 * c.n_embd));
}

Tensor GPT2MLP::forward(Tensor x) {
  Tensor out = c_proj->forward(gelu(c_fc->forward(x), "tanh"));
  return is_training() && dropout > 0 ? F::dropout(out, dropout, true) : out;
}

GPT2Block::GPT2Block(const GPT2Config& c) : Module("GPT2Block") {
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(std::vector<int64_t>{c.n_embd},
                                                             LayerNormOptions{.eps = c.layer_norm_epsilon}));
  attn = register_module("attn", std::make_shared<GPT2Attention>(c));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(std::vector<int64_t>{c.n_embd},
                                                             LayerNormOptions{.eps = c.layer_norm_epsilon}));
  mlp = register_module("mlp", std::make_shared<GPT2MLP>(c));
}

Tensor GPT2Block::forward_block(const Tensor& x, KVCache* cache) {
  Tensor h = x + attn->forward_attention(ln_1->forward(x), cache);
  return h + mlp->forward(ln_2->forward(h));
}

// ---- the models ----------------------------------------------------------------------------------

GPT2Model::GPT2Model(const GPT2Config& c) : Module("GPT2Model"), config(c) {
  check_config(c);
  wte = register_module("wte", std::make_shared<Embedding>(c.vocab_size, c.n_embd));
  wpe = register_module("wpe", std::make_shared<Embedding>(c.n_positions, c.n_embd));
  h = register_module("h", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    blocks.push_back(std::make_shared<GPT2Block>(c));
    h->push_back(blocks.back());
  }
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(std::vector<int64_t>{c.n_embd},
                                                             LayerNormOptions{.eps = c.layer_norm_epsilon}));
}

Tensor GPT2Model::forward_hidden(const Tensor& tokens, const Tensor& positions_in, std::vector<KVCache>* caches) {
  const char* op = "GPT2Model";
  NABLA_CHECK(ShapeError, tokens.dim() == 2, op, ": expected tokens (B, T), got ", tokens.sizes());
  NABLA_CHECK(DTypeError, tokens.dtype() == DType::i64 || tokens.dtype() == DType::i32, op,
              ": tokens must be int64 or int32, got ", tokens.dtype());
  if (caches)
    NABLA_CHECK(ValueError, static_cast<int64_t>(caches->size()) == config.n_layer, op, ": expected ", config.n_layer,
                " caches (one per block), got ", caches->size());
  const int64_t B = tokens.size(0), T = tokens.size(1), past = caches ? (*caches)[0].length() : 0;
  NABLA_CHECK(ValueError, past + T <= config.n_positions, op, ": ", past + T,
              " positions, but the model has position embeddings for ", config.n_positions, " (n_positions)");
  Tensor positions = positions_in;
  if (!positions.defined())
    positions = caches ? (*caches)[0].positions(T)
                       : arange(T, dtype(DType::i64).device(tokens.device())).unsqueeze(0).expand({B, T});
  Tensor x = wte->forward(tokens) + wpe->forward(positions);
  if (is_training() && config.dropout > 0) x = F::dropout(x, config.dropout, true);
  // Without caches each block is called as a module (its forward hooks run: FSDP's units use them).
  for (size_t i = 0; i < blocks.size(); ++i) x = caches ? blocks[i]->forward_block(x, &(*caches)[i]) : (*blocks[i])(x);
  return ln_f->forward(x);
}

GPT2LMHeadModel::GPT2LMHeadModel(const GPT2Config& c) : Module("GPT2LMHeadModel") {
  transformer = register_module("transformer", std::make_shared<GPT2Model>(c));
  reset_parameters();
}

Tensor GPT2LMHeadModel::forward(Tensor tokens) {
  return matmul(transformer->forward_hidden(tokens, {}, nullptr), transformer->wte->weight.t());
}

Tensor GPT2LMHeadModel::forward_cached(const Tensor& tokens, std::vector<KVCache>& caches) {
  return matmul(transformer->forward_hidden(tokens, {}, &caches), transformer->wte->weight.t());
}

std::vector<KVCache> GPT2LMHeadModel::make_caches(int64_t batch, int64_t capacity) const {
  const GPT2Config& c = config();
  const Tensor& w = transformer->wte->weight;
  std::vector<KVCache> caches;
  for (int64_t i = 0; i < c.n_layer; ++i)
    caches.emplace_back(batch, c.n_head, c.n_embd / c.n_head, capacity, w.dtype(), w.device());
  return caches;
}

void GPT2LMHeadModel::reset_parameters() {
  autograd::NoGradGuard ng;
  const GPT2Config& c = config();
  init::normal_(transformer->wte->weight, 0.0, 0.02);
  init::normal_(transformer->wpe->weight, 0.0, 0.02);
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  for (auto& b : transformer->blocks) {
    for (auto* ln : {b->ln_1.get(), b->ln_2.get()}) ln->reset_parameters();
    for (auto* conv : {b->attn->c_attn.get(), b->attn->c_proj.get(), b->mlp->c_fc.get(), b->mlp->c_proj.get()}) {
      const bool residual = conv == b->attn->c_proj.get() || conv == b->mlp->c_proj.get();
      init::normal_(conv->weight, 0.0, residual ? proj_std : 0.02);
      conv->bias.zero_();
    }
  }
  transformer->ln_f->reset_parameters();
}

// ---- loading Hugging Face's files ----------------------------------------------------------------

void load_gpt2_weights(GPT2LMHeadModel& model, const std::string& path) {
  const char* op = "load_gpt2_weights";
  // safetensors: an 8-byte header length, then the JSON header ('{'); anything else goes to the
  // PyTorch reader (zip or legacy pickle), which names what it does not recognise.
  bool is_safetensors = false;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    unsigned char head[9] = {};
    is_safetensors = std::fread(head, 1, 9, f) == 9 && head[8] == '{';
    std::fclose(f);
  } else {
    NABLA_CHECK(IOError, false, op, ": cannot open '", path, "'");
  }
  StateDict file = is_safetensors ? safetensors::load_file(path).tensors : torch_io::load(path).flatten_tensors();
  const bool prefixed = file.find("transformer.wte.weight") != nullptr;
  StateDict state;
  for (const auto& [name, t] : file) {
    std::string key = prefixed ? name : "transformer." + name;
    std::string_view k(key);
    if (k == "lm_head.weight" || k.ends_with(".attn.bias") || k.ends_with(".attn.masked_bias")) {
      // Tied to wte, and old versions' causal-mask buffers. A lm_head that is not wte is not GPT-2.
      if (k == "lm_head.weight") {
        const Tensor* wte = file.find(prefixed ? "transformer.wte.weight" : "wte.weight");
        NABLA_CHECK(ValueError, wte && t.sizes() == wte->sizes() && equal(t, *wte), op, ": '", path,
                    "' has an lm_head.weight that is not transformer.wte.weight (nabla's GPT-2 ties them)");
      }
      continue;
    }
    state.insert(std::move(key), t);
  }
  try {
    model.load_state_dict(state, /*strict=*/true);
  } catch (const Error& e) {
    NABLA_CHECK(ValueError, false, op, ": '", path, "' does not fit this GPT-2 (n_layer ", model.config().n_layer,
                ", n_embd ", model.config().n_embd, ", vocab_size ", model.config().vocab_size, "): ", e.what());
  }
}

// ---- GGUF for llama.cpp -------------------------------------------------------------------------

void save_gpt2_gguf(const GPT2LMHeadModel& model, const gguf::BpeVocab& vocab, const std::string& path) {
  const GPT2Config& c = model.config();
  NABLA_CHECK(ValueError, static_cast<int64_t>(vocab.tokens.size()) == c.vocab_size,
              "save_gpt2_gguf: the vocabulary has ", vocab.tokens.size(), " tokens but the model's vocab_size is ",
              c.vocab_size);
  gguf::Writer w;
  w.add_string("general.architecture", "gpt2");
  w.add_string("general.name", "nabla GPT-2");
  w.add_u32("general.file_type", 0);  // all float32
  w.add_u32("gpt2.context_length", static_cast<uint32_t>(c.n_positions));
  w.add_u32("gpt2.embedding_length", static_cast<uint32_t>(c.n_embd));
  w.add_u32("gpt2.feed_forward_length", static_cast<uint32_t>(4 * c.n_embd));
  w.add_u32("gpt2.block_count", static_cast<uint32_t>(c.n_layer));
  w.add_u32("gpt2.attention.head_count", static_cast<uint32_t>(c.n_head));
  w.add_f32("gpt2.attention.layer_norm_epsilon", static_cast<float>(c.layer_norm_epsilon));
  w.add_bpe_vocab(vocab);
  const GPT2Model& t = *model.transformer;
  auto f32 = [](const Tensor& x) { return x.detach().to(kFloat32); };
  // Conv1D weights are (in, out); llama.cpp's matrices are PyTorch Linear's (out, in).
  auto conv = [&](const std::string& name, const Conv1D& m) {
    w.add_tensor(name + ".weight", f32(m.weight).t());
    w.add_tensor(name + ".bias", f32(m.bias));
  };
  auto norm = [&](const std::string& name, const LayerNorm& m) {
    w.add_tensor(name + ".weight", f32(m.weight));
    w.add_tensor(name + ".bias", f32(m.bias));
  };
  w.add_tensor("token_embd.weight", f32(t.wte->weight));
  w.add_tensor("position_embd.weight", f32(t.wpe->weight));
  for (size_t i = 0; i < t.blocks.size(); ++i) {
    const GPT2Block& b = *t.blocks[i];
    const std::string p = "blk." + std::to_string(i) + ".";
    norm(p + "attn_norm", *b.ln_1);
    conv(p + "attn_qkv", *b.attn->c_attn);
    conv(p + "attn_output", *b.attn->c_proj);
    norm(p + "ffn_norm", *b.ln_2);
    conv(p + "ffn_up", *b.mlp->c_fc);
    conv(p + "ffn_down", *b.mlp->c_proj);
  }
  norm("output_norm", *t.ln_f);
  w.add_tensor("output.weight", f32(t.wte->weight));  // the tied head, written out
  w.save(path);
}

}  // namespace nabla::nn
