#include "vision/weights.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/torch_file.h"
#include "vision/vision.h"

namespace nabla::vision {

namespace {
// The first bytes of a file ("" when it cannot be opened: torch_io/safetensors then give the error).
std::string head_bytes(const std::string& path, size_t n) {
  std::string out(n, '\0');
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return "";
  size_t got = std::fread(out.data(), 1, n, f);
  std::fclose(f);
  out.resize(got);
  return out;
}

bool is_torch_file(const std::string& head) {
  // torch.save's zip archive ("PK\3\4"), or the legacy format, which starts with a pickle
  // (protocol 2: 0x80 0x02) holding the magic number.
  return head.rfind("PK\x03\x04", 0) == 0 || (head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x80);
}
}  // namespace

nn::StateDict read_weights(const std::string& path, const std::string& key) {
  FILE* f = std::fopen(path.c_str(), "rb");
  NABLA_CHECK(IOError, f != nullptr, "load_weights: cannot open '", path, "': ", std::strerror(errno));
  std::fclose(f);
  std::string head = head_bytes(path, 8);
  if (is_torch_file(head)) {
    torch_io::Value v = torch_io::load(path);
    if (!key.empty()) {
      NABLA_CHECK(ValueError, v.is_dict(), "load_weights: '", path, "' holds a ", torch_io::kind_name(v.kind()),
                  ", not a dict with the key '", key, "'");
      return v[key].flatten_tensors();
    }
    return v.flatten_tensors();
  }
  NABLA_CHECK(ValueError, key.empty(), "load_weights: '", path, "' is a safetensors file; it has no key '", key, "'");
  return safetensors::load_file(path).tensors;
}

nn::LoadStateDictResult load_weights(nn::Module& model, const std::string& path, const LoadWeightsOptions& options) {
  nn::StateDict sd = read_weights(path, options.key);
  // torchvision renames the keys of its old DenseNet files when loading them; so do we.
  if (dynamic_cast<DenseNet*>(&model)) sd = rename_legacy_densenet_keys(sd);
  // and those of its ViT files saved before MLPBlock became an MLP ("mlp.linear_1.weight").
  if (dynamic_cast<VisionTransformer*>(&model)) sd = rename_legacy_vit_keys(sd);
  return model.load_state_dict(sd, options.strict);
}

int64_t count_parameters(const nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

namespace {
using Builder = std::function<std::shared_ptr<nn::Module>(const ModelOptions&)>;
const std::map<std::string, Builder>& builders() {
  static const std::map<std::string, Builder> table = [] {
    std::map<std::string, Builder> t;
    auto resnet = [&](const char* name, std::shared_ptr<ResNet> (*f)(ResNetOptions)) {
      t[name] = [f](const ModelOptions& o) { return f({.num_classes = o.num_classes}); };
    };
    resnet("resnet18", resnet18);
    resnet("resnet34", resnet34);
    resnet("resnet50", resnet50);
    resnet("resnet101", resnet101);
    resnet("resnet152", resnet152);
    resnet("resnext50_32x4d", resnext50_32x4d);
    resnet("wide_resnet50_2", wide_resnet50_2);
    auto vgg = [&](const char* name, std::shared_ptr<VGG> (*f)(VGGOptions)) {
      t[name] = [f](const ModelOptions& o) {
        return f({.num_classes = o.num_classes, .dropout = o.dropout.value_or(0.5)});
      };
    };
    vgg("vgg11", vgg11);
    vgg("vgg11_bn", vgg11_bn);
    vgg("vgg13", vgg13);
    vgg("vgg13_bn", vgg13_bn);
    vgg("vgg16", vgg16);
    vgg("vgg16_bn", vgg16_bn);
    vgg("vgg19", vgg19);
    vgg("vgg19_bn", vgg19_bn);
    t["alexnet"] = [](const ModelOptions& o) {
      return alexnet({.num_classes = o.num_classes, .dropout = o.dropout.value_or(0.5)});
    };
    t["squeezenet1_0"] = [](const ModelOptions& o) {
      return squeezenet1_0({.num_classes = o.num_classes, .dropout = o.dropout.value_or(0.5)});
    };
    t["squeezenet1_1"] = [](const ModelOptions& o) {
      return squeezenet1_1({.num_classes = o.num_classes, .dropout = o.dropout.value_or(0.5)});
    };
    t["densenet121"] = [](const ModelOptions& o) { return densenet121({.num_classes = o.num_classes}); };
    t["mobilenet_v2"] = [](const ModelOptions& o) {
      return mobilenet_v2({.num_classes = o.num_classes, .dropout = o.dropout.value_or(0.2)});
    };
    t["mobilenet_v3_large"] = [](const ModelOptions& o) {
      return mobilenet_v3_large({.num_classes = o.num_classes, .dropout = o.dropout.value_or(0.2)});
    };
    t["efficientnet_b0"] = [](const ModelOptions& o) {
      return efficientnet_b0({.num_classes = o.num_classes, .dropout = o.dropout.value_or(0.2)});
    };
    t["shufflenet_v2_x0_5"] = [](const ModelOptions& o) { return shufflenet_v2_x0_5({.num_classes = o.num_classes}); };
    t["shufflenet_v2_x1_0"] = [](const ModelOptions& o) { return shufflenet_v2_x1_0({.num_classes = o.num_classes}); };
    t["regnet_y_400mf"] = [](const ModelOptions& o) { return regnet_y_400mf({.num_classes = o.num_classes}); };
    t["convnext_tiny"] = [](const ModelOptions& o) { return convnext_tiny({.num_classes = o.num_classes}); };
    t["vit_b_16"] = [](const ModelOptions& o) {
      return vit_b_16(
          {.image_size = o.image_size.value_or(224), .dropout = o.dropout.value_or(0.0), .num_classes = o.num_classes});
    };
    t["swin_t"] = [](const ModelOptions& o) {
      return swin_t({.dropout = o.dropout.value_or(0.0), .num_classes = o.num_classes});
    };
    t["mobilenet_v3_small"] = [](const ModelOptions& o) {
      return mobilenet_v3_small({.num_classes = o.num_classes, .dropout = o.dropout.value_or(0.2)});
    };
    return t;
  }();
  return table;
}
}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& [n, b] : builders()) names.push_back(n);
  return names;
}

std::shared_ptr<nn::Module> create_model(const std::string& name, const ModelOptions& options) {
  auto it = builders().find(name);
  if (it == builders().end()) {
    std::string known;
    for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
    throw ValueError("create_model: unknown model '" + name + "'; known: " + known);
  }
  return it->second(options);
}

}  // namespace nabla::vision
