// Writes the files the fuzz targets and the hostile-file tests start from:
//
//   fuzz_make_corpus seeds DIR     small valid files of every kind each reader accepts, written by
//                                  nabla's own writers (and libjpeg and zlib for the variants they
//                                  do not make), into DIR/<target>/: fuzzing starts deep inside the
//                                  formats (scripts/fuzz.sh runs it into build-asan/fuzz/seeds/)
//   fuzz_make_corpus hostile DIR   the generated regression files of tests/hostile/ (run it on
//                                  tests/hostile after changing them), each FILE with FILE.expect,
//                                  the error the tests require (see tests/hostile/README.md)
//
// Files in the fuzz targets' formats: checkpoint inputs start with a byte that picks the training
// set-up of checkpoint_run.h, mnist inputs with a byte that picks a command line (even) or a
// checkpoint (odd), see mnist_fuzzer.cpp.
// <cstdio> first, in a block of its own: jpeglib.h needs FILE and size_t.
#include <cstdio>

#include <jpeglib.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "examples/mnist/args.h"
#include "examples/mnist/models.h"
#include "fuzz/checkpoint_run.h"
#include "fuzz/torch_hostile.h"
#include "nabla.h"

namespace fs = std::filesystem;
using namespace nabla;
using Bytes = std::vector<uint8_t>;

namespace {

fs::path g_out;

Bytes read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write(const std::string& target, const std::string& name, const Bytes& bytes) {
  fs::create_directories(g_out / target);
  std::ofstream f(g_out / target / name, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Runs a writer that takes a path and returns the bytes it wrote.
template <class F>
Bytes via_file(F&& writer) {
  fs::path tmp = g_out / ".tmp";
  writer(tmp.string());
  Bytes b = read(tmp);
  fs::remove(tmp);
  return b;
}

Bytes replace(Bytes b, const std::string& from, const std::string& to) {
  std::string s(b.begin(), b.end());
  auto pos = s.find(from);
  if (pos != std::string::npos) s.replace(pos, from.size(), to);
  return Bytes(s.begin(), s.end());
}

void npy_seeds() {
  auto npy = [](const Tensor& t) { return via_file([&](const std::string& p) { save_npy(t, p); }); };
  write("npy", "f32_2x3.npy", npy(arange(6, dtype(kFloat32)).view({2, 3})));
  write("npy", "f64_scalar.npy", npy(scalar_tensor(2.5, dtype(kFloat64))));
  write("npy", "i64_5.npy", npy(arange(5, dtype(kInt64))));
  write("npy", "i32_2x2x2.npy", npy(arange(8, dtype(kInt32)).view({2, 2, 2})));
  write("npy", "u8_empty.npy", npy(empty({0, 4}, kUInt8)));
  write("npy", "bool_3.npy", npy(tensor(std::vector<int64_t>{1, 0, 1}).to(kBool)));
  write("npy", "f16_2x2.npy", npy(ones({2, 2}).to(kFloat16)));
  Bytes f = npy(arange(6, dtype(kFloat32)).view({2, 3}));
  write("npy", "fortran_2x3.npy", replace(f, "'fortran_order': False", "'fortran_order': True "));
  write("npy", "big_endian.npy", replace(f, "'<f4'", "'>f4'"));
}

void safetensors_seeds() {
  nn::StateDict sd;
  sd.insert("w", arange(6, dtype(kFloat32)).view({2, 3}));
  sd.insert("b", arange(3, dtype(kFloat64)));
  sd.insert("i", arange(4, dtype(kInt64)));
  sd.insert("n", arange(2, dtype(kInt32)));
  sd.insert("u", arange(5, dtype(kUInt8)));
  sd.insert("m", tensor(std::vector<int64_t>{1, 0}).to(kBool));
  sd.insert("h", ones({2}).to(kFloat16));
  sd.insert("z", ones({2}).to(kBFloat16));
  sd.insert("s", scalar_tensor(1.5));
  sd.insert("e", empty({0, 3}));
  auto bytes = [](const std::vector<char>& v) { return Bytes(v.begin(), v.end()); };
  write("safetensors", "all_dtypes.safetensors",
        bytes(safetensors::serialize(sd, {{"format", "pt"}, {"note", "seed"}})));
  write("safetensors", "empty.safetensors", bytes(safetensors::serialize({})));
  nn::StateDict one;
  one.insert("x", ones({1}));
  write("safetensors", "one.safetensors", bytes(safetensors::serialize(one)));
  // A dtype nabla does not load (I8): read_header accepts it, the loaders do not.
  std::string h = R"({"q":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})";
  h.append((8 - h.size() % 8) % 8, ' ');
  Bytes i8(8, 0);
  for (int k = 0; k < 8; ++k) i8[static_cast<size_t>(k)] = static_cast<uint8_t>(h.size() >> (8 * k));
  i8.insert(i8.end(), h.begin(), h.end());
  i8.push_back(1), i8.push_back(2);
  write("safetensors", "i8.safetensors", i8);
}

void checkpoint_seeds() {
  for (int c = 0; c < nabla_fuzz::CheckpointRun::kConfigs; ++c) {
    nabla_fuzz::CheckpointRun run(c);
    run.step();
    run.step();
    Bytes b = via_file([&](const std::string& p) { optim::save_checkpoint(p, run.checkpoint(1, 2)); });
    b.insert(b.begin(), static_cast<uint8_t>(c));
    write("checkpoint", "config" + std::to_string(c) + ".ckpt", b);
  }
}

Bytes gzip(const Bytes& plain) {
  z_stream zs{};
  deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  Bytes out(deflateBound(&zs, static_cast<uLong>(plain.size())) + 64);
  zs.next_in = const_cast<Bytef*>(plain.data());
  zs.avail_in = static_cast<uInt>(plain.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

void idx_seeds() {
  auto idx = [](const Tensor& t, bool gz) {
    return via_file([&](const std::string& p) { data::write_idx(p, t, gz); });
  };
  write("idx", "u8_3x4x5.idx", idx(arange(60, dtype(kInt64)).view({3, 4, 5}).to(kUInt8), false));
  write("idx", "u8_3x4x5.idx.gz", idx(arange(60, dtype(kInt64)).view({3, 4, 5}).to(kUInt8), true));
  write("idx", "labels_10.idx", idx(arange(10, dtype(kInt64)).to(kUInt8), false));
  write("idx", "i32_4.idx", idx(arange(4, dtype(kInt32)) - 2, false));
  write("idx", "f32_2x2.idx.gz", idx(arange(4, dtype(kFloat32)).view({2, 2}), true));
  write("idx", "f64_3.idx", idx(arange(3, dtype(kFloat64)), false));
  // The types write_idx does not write: i8 (0x09) and i16 (0x0B).
  write("idx", "i8_4.idx", {0, 0, 0x09, 1, 0, 0, 0, 4, 0xFF, 0x80, 0x01, 0x7F});
  Bytes i16 = {0, 0, 0x0B, 2, 0, 0, 0, 2, 0, 0, 0, 2, 0xFF, 0xFE, 0x80, 0x00, 0x00, 0x01, 0x7F, 0xFF};
  write("idx", "i16_2x2.idx", i16);
  write("idx", "i16_2x2.idx.gz", gzip(i16));
}

// A JPEG written by libjpeg: progressive, or in CMYK (Adobe), which stb_image_write cannot make.
Bytes libjpeg_file(int w, int h, bool progressive, bool cmyk) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = cmyk ? 4 : 3;
  c.in_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 90, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  std::vector<unsigned char> row(static_cast<size_t>(w * c.input_components));
  while (c.next_scanline < c.image_height) {
    for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<unsigned char>((i * 7 + c.next_scanline * 13) % 256);
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  Bytes out(buf, buf + size);
  free(buf);
  return out;
}

uint32_t crc_of(const Bytes& b, size_t from, size_t n) {
  return static_cast<uint32_t>(crc32(0, b.data() + from, static_cast<uInt>(n)));
}
void put32(Bytes& b, uint32_t v) {
  for (int k = 3; k >= 0; --k) b.push_back(static_cast<uint8_t>(v >> (8 * k)));
}
void chunk(Bytes& png, const char* type, const Bytes& body) {
  put32(png, static_cast<uint32_t>(body.size()));
  size_t start = png.size();
  png.insert(png.end(), type, type + 4);
  png.insert(png.end(), body.begin(), body.end());
  put32(png, crc_of(png, start, body.size() + 4));
}
// A PNG with any IHDR (palette with tRNS, 16-bit, 1-bit gray), from unfiltered rows.
Bytes png_file(uint32_t w, uint32_t h, uint8_t depth, uint8_t color, const Bytes& raw_rows, bool palette = false) {
  Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  Bytes ihdr;
  put32(ihdr, w);
  put32(ihdr, h);
  ihdr.insert(ihdr.end(), {depth, color, 0, 0, 0});
  chunk(png, "IHDR", ihdr);
  if (palette) {
    chunk(png, "PLTE", {0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255});
    chunk(png, "tRNS", {0, 128});
  }
  uLongf n = compressBound(static_cast<uLong>(raw_rows.size()));
  Bytes z(n);
  compress(z.data(), &n, raw_rows.data(), static_cast<uLong>(raw_rows.size()));
  z.resize(n);
  chunk(png, "IDAT", z);
  chunk(png, "IEND", {});
  return png;
}

// Every format the WAV reader accepts, mono to six channels (extensible beyond two, or beyond 16 bits).
// text/'s readers: a saved vocabulary (with escaped bytes), GloVe and word2vec vectors, AG_NEWS CSV.
void text_seeds() {
  text::Vocab v({"<unk>", "the", "a\tb", "line\nbreak", "\xff"});
  write("text", "vocab.txt", via_file([&](const std::string& p) { v.save(p); }));
  auto bytes = [](const std::string& s) { return Bytes(s.begin(), s.end()); };
  write("text", "glove.txt", bytes("the 0.1 -0.2 3e-1\nof 1 2 3\n"));
  write("text", "word2vec.txt", bytes("2 3\nthe 0.1 -0.2 0.3\nof 1 2 3\n"));
  write("text", "ag_news.csv", bytes("\"3\",\"Title, quoted\",\"Text with \"\"quotes\"\"\nand a newline\"\n1,b,c\n"));
}

void wav_seeds() {
  struct F {
    wav::Encoding enc;
    int64_t bits;
    DType dtype;
  };
  const F formats[] = {{wav::Encoding::pcm_u, 8, kUInt8},    {wav::Encoding::pcm_s, 16, kInt32},
                       {wav::Encoding::pcm_s, 24, kInt32},   {wav::Encoding::pcm_s, 32, kInt32},
                       {wav::Encoding::pcm_f, 32, kFloat32}, {wav::Encoding::pcm_f, 64, kFloat64}};
  for (const F& f : formats)
    for (int64_t ch : {1, 2, 6}) {
      Tensor x = arange(0, 8 * ch).view({8, ch});
      x = f.enc == wav::Encoding::pcm_f ? x.to(f.dtype) / 16.0 : x.to(f.dtype);
      write("wav",
            std::string(wav::encoding_name(f.enc)) + std::to_string(f.bits) + "_" + std::to_string(ch) + "ch.wav",
            via_file([&](const std::string& p) { wav::write(p, x, 8000, f.enc, f.bits); }));
    }
}

void image_seeds() {
  auto img = [](int64_t h, int64_t w, int64_t c) {
    return remainder(arange(h * w * c, dtype(kInt64)).mul(37), 256).view({h, w, c}).to(kUInt8);
  };
  auto file = [](const Tensor& t, const char* ext) {
    return via_file([&](const std::string& p) { data::save_image(p + ext, t), fs::rename(p + ext, p); });
  };
  for (int64_t c : {1, 2, 3, 4}) write("image", "rgb" + std::to_string(c) + ".png", file(img(5, 7, c), ".png"));
  write("image", "gray.jpg", file(img(8, 8, 1), ".jpg"));
  write("image", "rgb.jpg", file(img(16, 9, 3), ".jpg"));
  write("image", "progressive.jpg", libjpeg_file(17, 9, true, false));
  write("image", "cmyk.jpg", libjpeg_file(8, 8, false, true));
  Bytes bmp = file(img(4, 3, 3), ".bmp");
  write("image", "rgb.bmp", bmp);
  write("image", "rgba.bmp", file(img(3, 2, 4), ".bmp"));
  Bytes top_down = bmp;  // height -4: rows stored top to bottom
  const uint32_t neg = static_cast<uint32_t>(-4);
  for (int k = 0; k < 4; ++k) top_down[static_cast<size_t>(22 + k)] = static_cast<uint8_t>(neg >> (8 * k));
  write("image", "top_down.bmp", top_down);
  write("image", "palette_trns.png", png_file(2, 2, 8, 3, {0, 0, 1, 0, 2, 1}, true));
  write("image", "gray16.png", png_file(2, 1, 16, 0, {0, 0x12, 0x34, 0xFF, 0xFF}));
  write("image", "gray1.png", png_file(9, 2, 1, 0, {0, 0xA5, 0x80, 0, 0x5A, 0x00}));
  write("image", "ga.png", png_file(1, 2, 8, 4, {0, 10, 20, 0, 30, 40}));
}

// ---- mnist ------------------------------------------------------------------------------------
Bytes command_line(std::initializer_list<std::string> args) {
  Bytes b = {0};
  for (const auto& a : args) {
    if (b.size() > 1) b.push_back(0);
    b.insert(b.end(), a.begin(), a.end());
  }
  return b;
}

// A checkpoint as `mnist train` writes it (model weights and mnist.* metadata), in the mnist
// target's format (a leading odd byte); `edit` changes the metadata first. Without weights (for
// the hostile files, whose metadata is refused before any weight is read) it is a few hundred
// bytes instead of up to 800 KB.
Bytes mnist_checkpoint(const std::string& model,
                       const std::function<void(std::map<std::string, std::string>&)>& edit = {}, bool weights = true) {
  mnist::Settings s{.model = model,
                    .dataset = "mnist",
                    .optimizer = "adam",
                    .scheduler = "step",
                    .lr = 1e-3,
                    .momentum = 0.9,
                    .weight_decay = 0,
                    .gamma = 0.5,
                    .batch_size = 64,
                    .seed = 1};
  auto md = mnist::to_metadata(s);
  md.merge(mnist::to_metadata(
      mnist::RunProgress{.train_seconds = 1.5, .loader_seed = 1, .loader_index = 3, .partial_seen = 192}));
  if (edit) edit(md);
  manual_seed(1);
  mnist::ModelInfo m = mnist::make_model(model);
  Bytes b = via_file([&](const std::string& p) {
    optim::save_checkpoint(p, {.model = weights ? m.module.get() : nullptr, .epoch = 1, .step = 941, .metadata = md});
  });
  b.insert(b.begin(), 1);
  return b;
}

// tokenizer.json files (a first byte 0: the rest is the file) and texts (1: the rest is encoded by
// the target's own tokenizers).
void hf_tokenizer_seeds() {
  auto seed = [](const std::string& name, char mode, const std::string& s) {
    Bytes b{static_cast<uint8_t>(mode)};
    b.insert(b.end(), s.begin(), s.end());
    write("hf_tokenizer", name, b);
  };
  seed("wordpiece.json", 0,
       R"({"version":"1.0","added_tokens":[{"id":0,"content":"[UNK]","special":true,"normalized":false,)"
       R"("single_word":false,"lstrip":false,"rstrip":false}],"normalizer":{"type":"BertNormalizer",)"
       R"("clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true},)"
       R"("pre_tokenizer":{"type":"BertPreTokenizer"},"post_processor":null,"decoder":{"type":"WordPiece",)"
       R"("prefix":"##","cleanup":true},"model":{"type":"WordPiece","unk_token":"[UNK]",)"
       R"("continuing_subword_prefix":"##","max_input_chars_per_word":100,"vocab":{"[UNK]":0,"a":1,"##b":2}}})");
  seed("bpe.json", 0,
       R"({"version":"1.0","added_tokens":[],"normalizer":{"type":"Sequence","normalizers":[{"type":"NFD"},)"
       R"({"type":"Lowercase"},{"type":"StripAccents"}]},"pre_tokenizer":{"type":"Sequence","pretokenizers":[)"
       R"({"type":"Whitespace"},{"type":"Digits","individual_digits":true}]},"post_processor":null,)"
       R"("decoder":{"type":"BPEDecoder","suffix":"</w>"},"model":{"type":"BPE","dropout":null,)"
       R"("unk_token":"<unk>","continuing_subword_prefix":null,"end_of_word_suffix":"</w>","fuse_unk":true,)"
       R"("byte_fallback":false,"vocab":{"<unk>":0,"a":1,"b":2,"a</w>":3,"b</w>":4,"ab</w>":5},)"
       R"("merges":[["a","b</w>"]]}})");
  seed("text.txt", 1, "Hello, World! [CLS] caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 123 the thin <|endoftext|> \xff\xfe");
}

void mnist_seeds() {
  write("mnist", "train_default", command_line({"train"}));
  write("mnist", "train_lenet",
        command_line({"train", "--model", "lenet", "--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.5",
                      "--batch-size", "64", "--no-shuffle", "--epochs=2", "--threads", "2"}));
  write("mnist", "train_resume",
        command_line({"train", "--resume", "ck.safetensors", "--epochs", "5", "--workers", "2", "--quiet",
                      "--summary-json", "s.json", "--device", "cpu"}));
  write("mnist", "train_help", command_line({"train", "--help"}));
  write("mnist", "eval",
        command_line({"eval", "--checkpoint", "ck.safetensors", "--batch-size", "500", "--data", "d"}));
  write("mnist", "predict", command_line({"predict", "--json", "--save-input", "out", "a.png", "b.jpg"}));
  write("mnist", "export",
        command_line({"export", "--count", "5", "--first", "--invert", "--out", "o", "--seed", "3"}));
  write("mnist", "checkpoint_mlp", mnist_checkpoint("mlp"));
  write("mnist", "checkpoint_lenet", mnist_checkpoint("lenet"));
}

// ---- hostile files --------------------------------------------------------------------------------
// Each is written with FILE.expect: "error <Type>" (or "loads"), then one line per text the error
// message must contain. (The tests also require the file's path in the message.)
void hostile(const std::string& reader, const std::string& name, const Bytes& bytes, const std::string& type,
             std::initializer_list<std::string> contains) {
  write(reader, name, bytes);
  std::string expect = type == "loads" ? "loads\n" : "error " + type + "\n";
  for (const auto& c : contains) expect += c + "\n";
  write(reader, name + ".expect", Bytes(expect.begin(), expect.end()));
}

Bytes safetensors_file(const std::string& header, size_t data_bytes) {
  std::string h = header;
  h.append((8 - h.size() % 8) % 8, ' ');
  Bytes b(8);
  for (int k = 0; k < 8; ++k)
    b[static_cast<size_t>(k)] = static_cast<uint8_t>(static_cast<uint64_t>(h.size()) >> (8 * k));
  b.insert(b.end(), h.begin(), h.end());
  b.resize(b.size() + data_bytes, 0);
  return b;
}

void safetensors_hostile() {
  // A nested array in "shape" or "data_offsets" made the error path dump() the JSON,
  // recursively: a stack overflow from depth ~10,000 under ASan (~90,000 in release builds, which
  // the test checks with a buffer made at run time).
  const std::string open(20000, '['), close(20000, ']');
  hostile("safetensors", "deep_nesting_in_shape.safetensors",
          safetensors_file(R"({"t":{"dtype":"F32","shape":)" + open + close + R"(,"data_offsets":[0,4]}})", 4),
          "IOError", {"JSON nested more than 64 levels deep", "a safetensors header needs 3"});
  hostile("safetensors", "deep_nesting_in_data_offsets.safetensors",
          safetensors_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[)" + open + close + R"(,4]}})", 4),
          "IOError", {"JSON nested more than 64 levels deep"});
  // Names and strings from the file are quoted and cut short in messages.
  hostile(
      "safetensors", "huge_name_bad_dtype.safetensors",
      safetensors_file(R"({")" + std::string(5000, 'n') + R"(":{"dtype":"F99","shape":[1],"data_offsets":[0,4]}})", 4),
      "IOError", {"invalid header entry for tensor 'nnnnnnnnnn", "... (5000 bytes)", "unknown dtype 'F99'"});
  hostile("safetensors", "nested_array_as_shape_entry.safetensors",
          safetensors_file(R"({"t":{"dtype":"F32","shape":[[1,2]],"data_offsets":[0,4]}})", 4), "IOError",
          {"shape entries must be non-negative integers, got an array of 2 values"});
}

void npy_hostile() {
  // A 0 before huge dims passed the size check (0 bytes of data) and then failed in
  // the tensor's constructor, a ShapeError without the file's name.
  std::string h = "{'descr': '<f4', 'fortran_order': True, 'shape': (0, 999999999999999999, 999999999999999999), }";
  h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
  h += '\n';
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<uint8_t>(h.size()), static_cast<uint8_t>(h.size() >> 8)};
  b.insert(b.end(), h.begin(), h.end());
  hostile("npy", "fortran_zero_then_huge_dims.npy", b, "IOError",
          {"not a valid .npy file", "overflows", "999999999999999999"});
}

// A checkpoint of set-up `config` after two steps, with the tensor `key` replaced (or, with
// `meta`, a metadata value), in the checkpoint target's format.
Bytes edited_checkpoint(int config, const std::string& key, const Tensor& value,
                        const std::pair<std::string, std::string>& meta = {}) {
  nabla_fuzz::CheckpointRun run(config);
  run.step();
  run.step();
  Bytes b = via_file([&](const std::string& p) { optim::save_checkpoint(p, run.checkpoint(1, 2)); });
  safetensors::File f = safetensors::deserialize(reinterpret_cast<const char*>(b.data()), b.size());
  if (!key.empty()) {
    if (!f.tensors.find(key)) throw std::runtime_error("no tensor " + key);
    f.tensors.insert_or_assign(key, value);
  }
  if (!meta.first.empty()) f.metadata[meta.first] = meta.second;
  std::vector<char> out = safetensors::serialize(f.tensors, f.metadata);
  Bytes r(out.begin(), out.end());
  r.insert(r.begin(), static_cast<uint8_t>(config));
  return r;
}

void checkpoint_hostile() {
  // Numbers stored in a checkpoint overflowed conversions and signed arithmetic
  // (undefined behaviour; in release builds, a resume that trained to NaN).
  auto f64 = [](double v) { return scalar_tensor(v, dtype(kFloat64)); };
  auto i64 = [](int64_t v) { return scalar_tensor(v, dtype(kInt64)); };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  hostile("checkpoint", "adam_step_1e300.ckpt", edited_checkpoint(0, "optimizer.state.0.step", f64(1e300)),
          "ValueError", {"Adam.load_state_dict: 'state.0.step' must be a whole number from 0 to 2^53, got 1e+300"});
  hostile("checkpoint", "adam_step_nan.ckpt", edited_checkpoint(0, "optimizer.state.1.step", f64(nan)), "ValueError",
          {"'state.1.step' must be a whole number from 0 to 2^53, got nan"});
  hostile("checkpoint", "adam_step_int64_max.ckpt",
          edited_checkpoint(0, "optimizer.state.0.step", i64(std::numeric_limits<int64_t>::max())), "ValueError",
          {"'state.0.step' must be a whole number from 0 to 2^53, got 9.22337e+18"});
  hostile("checkpoint", "adam_step_fraction.ckpt", edited_checkpoint(0, "optimizer.state.0.step", f64(2.5)),
          "ValueError", {"'state.0.step' must be a whole number", "got 2.5"});
  hostile("checkpoint", "adam_lr_nan.ckpt", edited_checkpoint(0, "optimizer.param_groups.0.lr", f64(nan)), "ValueError",
          {"'param_groups.0.lr' must be a finite number, got nan"});
  hostile("checkpoint", "adam_amsgrad_2.ckpt", edited_checkpoint(0, "optimizer.param_groups.0.amsgrad", f64(2)),
          "ValueError", {"'param_groups.0.amsgrad' must be 0 or 1 (a flag), got 2"});
  hostile("checkpoint", "steplr_last_epoch_int64_max.ckpt",
          edited_checkpoint(0, "scheduler.last_epoch", i64(std::numeric_limits<int64_t>::max())), "ValueError",
          {"StepLR.load_state_dict: 'last_epoch' must be a whole number from -1 to 2^53"});
  hostile("checkpoint", "steplr_last_epoch_1e300.ckpt", edited_checkpoint(0, "scheduler.last_epoch", f64(1e300)),
          "ValueError", {"'last_epoch' must be a whole number from -1 to 2^53, got 1e+300"});
  hostile("checkpoint", "cosine_base_lrs_inf.ckpt",
          edited_checkpoint(1, "scheduler.base_lrs", tensor(std::vector<double>{INFINITY}, dtype(kFloat64))),
          "ValueError", {"'base_lrs' must hold finite numbers, got inf at index 0"});
  hostile("checkpoint", "plateau_best_nan.ckpt", edited_checkpoint(3, "scheduler.best", f64(nan)), "ValueError",
          {"ReduceLROnPlateau.load_state_dict: 'best' is NaN"});
  hostile("checkpoint", "plateau_bad_epochs_negative.ckpt", edited_checkpoint(3, "scheduler.num_bad_epochs", i64(-5)),
          "ValueError", {"'num_bad_epochs' must be a whole number from 0 to 2^53, got -5"});
  hostile("checkpoint", "warm_restarts_fraction_2.ckpt", edited_checkpoint(4, "scheduler.epoch_fraction", f64(2)),
          "ValueError", {"'epoch_fraction' must be in [0, 1), got 2"});
  hostile("checkpoint", "negative_epoch.ckpt", edited_checkpoint(0, "", {}, {"epoch", "-3"}), "IOError",
          {"epoch is not a whole number >= 0: '-3'"});
  hostile("checkpoint", "step_out_of_range.ckpt", edited_checkpoint(0, "", {}, {"step", "99999999999999999999"}),
          "IOError", {"step is not a whole number >= 0: '99999999999999999999'"});
}

void idx_hostile() {
  // max_bytes once bounded the declared size, not memory (a 1 MB .gz declaring 1 GiB took
  // 2.2 GB). A gzip file must be able to hold what it declares: this one (a few hundred bytes)
  // cannot hold 1 GiB, and is refused before anything is allocated.
  Bytes header = {0, 0, 0x08, 2, 0, 0, 0x80, 0, 0, 0, 0x80, 0};  // 32768 x 32768 u8
  Bytes plain = header;
  plain.resize(plain.size() + 65536, 0);
  hostile("idx", "gzip_bomb_declares_1gib.idx.gz", gzip(plain), "IOError",
          {"32768 x 32768 u8 (1073741824 bytes of data)", "cannot hold that much", "decompression bomb"});
  // i8 widened to int32: 4 GiB declared make a 16 GiB tensor, over the (default 4 GiB) limit.
  hostile("idx", "i8_widened_to_16gib.idx", {0, 0, 0x09, 2, 0, 1, 0, 0, 0, 1, 0, 0, 1, 2, 3}, "IOError",
          {"65536 x 65536 of i8 need 4294967296 bytes (17179869184 as int32)", "IdxOptions::max_bytes"});
}

// A JPEG with a DHT segment whose 16 code counts add up to 272 (at most 256 codes exist):
// stb_image wrote past its Huffman tables; libjpeg refuses it.
Bytes jpeg_dht_overflow() {
  Bytes b = {0xFF, 0xD8};
  Bytes dht = {0x00};  // class 0 (DC), table 0
  for (int i = 0; i < 16; ++i) dht.push_back(17);
  for (int i = 0; i < 272; ++i) dht.push_back(static_cast<uint8_t>(i));
  b.insert(b.end(), {0xFF, 0xC4, static_cast<uint8_t>((dht.size() + 2) >> 8), static_cast<uint8_t>(dht.size() + 2)});
  b.insert(b.end(), dht.begin(), dht.end());
  b.insert(b.end(), {0xFF, 0xD9});
  return b;
}

void image_hostile() {
  hostile("image", "jpeg_dht_counts_over_256.jpg", jpeg_dht_overflow(), "IOError",
          {"looks like a JPEG file but its header is corrupt", "Bogus Huffman table definition"});
  // A truncated JPEG: the error was stb's stale "bad png sig".
  Bytes jpg = libjpeg_file(64, 48, false, false);
  jpg.resize(jpg.size() / 2);
  hostile("image", "truncated.jpg", jpg, "IOError", {"cannot decode", "(JPEG)", "truncated"});
  Bytes prog = libjpeg_file(64, 48, true, false);
  prog.resize(prog.size() * 2 / 3);
  hostile("image", "truncated_progressive.jpg", prog, "IOError", {"cannot decode", "(JPEG)", "truncated"});
  Bytes png = png_file(4, 4, 8, 2, Bytes(4 * 13, 7));
  png.resize(png.size() - 20);  // into IDAT
  hostile("image", "truncated.png", png, "IOError", {"cannot decode", "(PNG)"});
  // A valid top-down BMP (negative height) was once refused as "an empty image". Rows hold
  // y * 10 + x in every channel, top row first.
  Bytes bmp = {'B', 'M', 0, 0, 0, 0, 0, 0, 0, 0, 54, 0, 0, 0, 40, 0, 0, 0, 3, 0, 0, 0, 0xFE, 0xFF, 0xFF, 0xFF, 1,
               0,   24,  0, 0, 0, 0, 0, 0, 0, 0, 0,  0, 0, 0, 0,  0, 0, 0, 0, 0, 0, 0, 0,    0,    0,    0,    0};
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 3; ++x) bmp.insert(bmp.end(), 3, static_cast<uint8_t>(y * 10 + x));
    bmp.insert(bmp.end(), 3, 0);  // rows padded to 4 bytes
  }
  hostile("image", "top_down.bmp", bmp, "loads", {});
  hostile("image", "gif_not_supported.gif", {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0}, "IOError",
          {"is not a readable PNG, JPEG or BMP image", "47 49 46 38 39 61"});
}

// PyTorch files whose values cost far more than their bytes (fuzz/torch_hostile.h). The
// torch target's other hostile files come from tests/torch_files/make_hostile.py. Full size here
// where the file stays small (deflated pickles); the stored 1 MB, 4.3 MB and 9.9 MB variants are
// made by the tests themselves (tests/io/test_torch_hostile.cpp), which measure time and memory.
void torch_hostile() {
  namespace th = nabla_fuzz::torch_hostile;
  hostile("torch", "billion_laughs.pt", th::billion_laughs(), "ValueError",
          {"1048576 leaves (counting shared subtrees once per path)", "Value::flatten's max_bytes"});
  hostile("torch", "deep_shared_key.pt", th::deep_shared_key(990, size_t(1) << 20, true), "ValueError",
          {"1 leaf (counting shared subtrees once per path)", "Value::flatten's max_bytes"});
  hostile("torch", "empty_dicts.pt", th::empty_dicts(9'900'000, true), "IOError",
          {"the pickle's values take more than", "LoadOptions::max_value_bytes"});
  hostile("torch", "nested_records.pt", th::nested_records(40, 4096), "IOError",
          {"entries 'archive/data/000' and 'archive/data/001' overlap", "entries nested in each other"});
  hostile("torch", "zero_stride_view.pt", th::zero_stride_view(), "loads", {});
}

void mnist_hostile() {
  // Checked in tests/programs/test_mnist_program.cpp by running the program (exit code 2: a usage
  // error, 1: a damaged checkpoint). Command lines: out-of-range integers.
  hostile("mnist", "epochs_overflow", command_line({"train", "--epochs", "99999999999999999999"}), "UsageError",
          {"--epochs must be a whole number from 1 to 1000000, got 99999999999999999999"});
  hostile("mnist", "threads_too_many", command_line({"train", "--threads", "100000"}), "UsageError",
          {"--threads must be a whole number from 1 to 1024, got 100000"});
  hostile("mnist", "lr_inf", command_line({"train", "--lr", "inf"}), "UsageError",
          {"--lr expects a finite number, got 'inf'"});
  hostile("mnist", "batch_size_negative", command_line({"train", "--batch-size", "-64"}), "UsageError",
          {"--batch-size must be a whole number from 1 to 1000000, got -64"});
  hostile("mnist", "eval_batch_size_junk", command_line({"eval", "--batch-size", "12abc"}), "UsageError",
          {"--batch-size expects a whole number from 1 to 1000000, got '12abc'"});
  // Damaged metadata (read by `train --resume`): raw C++ messages before ("mnist: map::at",
  // "mnist: stoll").
  auto damaged = [](const std::function<void(std::map<std::string, std::string>&)>& edit) {
    return mnist_checkpoint("mlp", edit, false);
  };
  hostile("mnist", "checkpoint_without_lr", damaged([](auto& md) { md.erase("mnist.lr"); }), "Failure",
          {"lacks the metadata field 'mnist.lr'"});
  hostile("mnist", "checkpoint_batch_size_junk", damaged([](auto& md) { md["mnist.batch_size"] = "abc"; }), "Failure",
          {"the metadata field 'mnist.batch_size' must be a whole number from 1 to 1000000, got 'abc'"});
  hostile("mnist", "checkpoint_unknown_model", damaged([](auto& md) { md["mnist.model"] = "resnet"; }), "Failure",
          {"the metadata field 'mnist.model' must be one of mlp, lenet, cnn, pytorch, fast, got 'resnet'"});
  hostile("mnist", "checkpoint_lr_nan", damaged([](auto& md) { md["mnist.lr"] = "nan"; }), "Failure",
          {"the metadata field 'mnist.lr' must be a number from"});
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[1] : "";
  if (mode != "seeds" && mode != "hostile") {
    std::fprintf(stderr, "usage: fuzz_make_corpus seeds DIR | fuzz_make_corpus hostile DIR\n");
    return 2;
  }
  g_out = argv[2];
  fs::create_directories(g_out);
  if (mode == "seeds") {
    npy_seeds();
    safetensors_seeds();
    checkpoint_seeds();
    idx_seeds();
    image_seeds();
    wav_seeds();
    text_seeds();
    mnist_seeds();
    hf_tokenizer_seeds();
  } else {
    safetensors_hostile();
    npy_hostile();
    checkpoint_hostile();
    idx_hostile();
    image_hostile();
    mnist_hostile();
    torch_hostile();
  }
  std::printf("%s written to %s\n", mode.c_str(), g_out.c_str());
  return 0;
}
