#include "torch/autograd.h"

#include "torch/ivalue.h"

namespace torch {

const char* IValue::tagKind() const {
  static const char* const kinds[] = {"None", "Tensor", "Double", "Int", "Bool", "String", "IntList"};
  return kinds[v_.index()];
}

std::string autograd::detail::backward_name(const std::type_info& type) {
  std::string name = nabla::autograd::demangled_type_name(type.name());
  if (auto colon = name.rfind("::"); colon != std::string::npos) name = name.substr(colon + 2);
  return name + "Backward";
}

}  // namespace torch
