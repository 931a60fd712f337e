// libtorch's enum tags: torch::kMean, torch::kSum, torch::kNone (reductions), torch::kZeros,
// torch::kReflect, torch::kReplicate, torch::kCircular (padding modes), torch::kTanh, torch::kReLU
// (RNN nonlinearities), torch::kFanIn, kFanOut, kLinear, kSigmoid, kLeakyReLU, kConv2D (nn::init), kGELU (Transformer activations),
// kBatchMean (kl_div), kConstant (padding), kNearest, kBilinear, kBicubic, kTrilinear, kArea (interpolation), kMax (EmbeddingBag).
// Each is an object of its own type in torch::enumtype, and an option takes a
// std::variant of the tags it allows, as libtorch's do:
//   torch::nn::CrossEntropyLoss(torch::nn::CrossEntropyLossOptions().reduction(torch::kSum))
#pragma once

#include <string>
#include <variant>

#include "../nn/functional.h"

namespace torch {

namespace enumtype {
struct kNone {};
struct kMean {};
struct kSum {};
struct kZeros {};
struct kReflect {};
struct kReplicate {};
struct kCircular {};
struct kTanh {};
struct kReLU {};
struct kFanIn {};
struct kFanOut {};
struct kLinear {};
struct kSigmoid {};
struct kLeakyReLU {};
struct kConv2D {};
struct kGELU {};
struct kBatchMean {};
struct kConstant {};
struct kNearest {};
struct kBilinear {};
struct kBicubic {};
struct kTrilinear {};
struct kArea {};
struct kMax {};
}  // namespace enumtype

inline constexpr enumtype::kNone kNone{};
inline constexpr enumtype::kMean kMean{};
inline constexpr enumtype::kSum kSum{};
inline constexpr enumtype::kZeros kZeros{};
inline constexpr enumtype::kReflect kReflect{};
inline constexpr enumtype::kReplicate kReplicate{};
inline constexpr enumtype::kCircular kCircular{};
inline constexpr enumtype::kTanh kTanh{};
inline constexpr enumtype::kReLU kReLU{};
inline constexpr enumtype::kFanIn kFanIn{};
inline constexpr enumtype::kFanOut kFanOut{};
inline constexpr enumtype::kLinear kLinear{};
inline constexpr enumtype::kSigmoid kSigmoid{};
inline constexpr enumtype::kLeakyReLU kLeakyReLU{};
inline constexpr enumtype::kConv2D kConv2D{};
inline constexpr enumtype::kGELU kGELU{};
inline constexpr enumtype::kBatchMean kBatchMean{};
inline constexpr enumtype::kConstant kConstant{};
inline constexpr enumtype::kNearest kNearest{};
inline constexpr enumtype::kBilinear kBilinear{};
inline constexpr enumtype::kBicubic kBicubic{};
inline constexpr enumtype::kTrilinear kTrilinear{};
inline constexpr enumtype::kArea kArea{};
inline constexpr enumtype::kMax kMax{};

namespace enumtype {
using reduction_t = std::variant<kNone, kMean, kSum>;
using padding_mode_t = std::variant<kZeros, kReflect, kReplicate, kCircular>;
using nonlinearity_t = std::variant<kTanh, kReLU>;

inline nabla::nn::functional::Reduction to_nabla(const reduction_t& r) {
  using R = nabla::nn::functional::Reduction;
  return r.index() == 0 ? R::none : r.index() == 1 ? R::mean : R::sum;
}
// nabla's spelling of a padding mode or nonlinearity: "zeros", "reflect", ...; "tanh", "relu".
inline std::string to_nabla(const padding_mode_t& m) {
  static const char* const names[] = {"zeros", "reflect", "replicate", "circular"};
  return names[m.index()];
}
inline std::string to_nabla(const nonlinearity_t& n) { return n.index() == 0 ? "tanh" : "relu"; }
using kldiv_reduction_t = std::variant<kNone, kBatchMean, kSum, kMean>;
inline nabla::nn::functional::Reduction to_nabla(const kldiv_reduction_t& r) {
  using R = nabla::nn::functional::Reduction;
  static constexpr R kinds[] = {R::none, R::batchmean, R::sum, R::mean};
  return kinds[r.index()];
}
using pad_mode_t = std::variant<kConstant, kReflect, kReplicate, kCircular>;
inline std::string to_nabla(const pad_mode_t& m) {
  static const char* const names[] = {"constant", "reflect", "replicate", "circular"};
  return names[m.index()];
}
using embedding_bag_mode_t = std::variant<kSum, kMean, kMax>;
inline std::string to_nabla(const embedding_bag_mode_t& m) {
  static const char* const names[] = {"sum", "mean", "max"};
  return names[m.index()];
}
using interpolate_mode_t = std::variant<kNearest, kLinear, kBilinear, kBicubic, kTrilinear, kArea>;
inline std::string to_nabla(const interpolate_mode_t& m) {
  static const char* const names[] = {"nearest", "linear", "bilinear", "bicubic", "trilinear", "area"};
  return names[m.index()];
}
}  // namespace enumtype

}  // namespace torch
