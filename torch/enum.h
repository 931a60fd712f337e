// libtorch's enum tags: torch::kMean, torch::kSum, torch::kNone (reductions), torch::kZeros,
// torch::kReflect, torch::kReplicate, torch::kCircular (padding modes), torch::kTanh, torch::kReLU
// (RNN nonlinearities), torch::kFanIn, kFanOut, kLinear, kSigmoid, kLeakyReLU, kConv2D (nn::init).
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
}  // namespace enumtype

}  // namespace torch
