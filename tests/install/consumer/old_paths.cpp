// The include paths of nabla 0.1 that moved (README, "Folders") still compile through their
// forwarding headers and name the same entities as the new paths. Removed with the forwarding
// headers in the next release.
#include <core/io.h>
#include <core/zip.h>
#include <nn/metrics.h>
#include <nn/models/vision.h>
#include <nn/ordered_dict.h>
#include <nn/safetensors.h>
#include <nn/torch_file.h>
#include <nn/torch_pickle.h>

#include <type_traits>

static_assert(std::is_same_v<nabla::nn::OrderedDict<int>, nabla::OrderedDict<int>>);
static_assert(std::is_same_v<nabla::nn::StateDict, nabla::StateDict>);

// What is checked is that this file compiles (the old paths reach the moved declarations, and the
// static_asserts above hold) and links (the functions are defined in the installed library): taking
// the addresses makes the linker resolve them. The pointers themselves are never null.
int check_old_include_paths() {
  auto* save = &nabla::nn::save_weights;
  auto* load_torch = &nabla::nn::load_torch_weights;
  auto* resnet = &nabla::vision::resnet18;
  return save && load_torch && resnet ? 0 : 1;
}
