#include "core/op_schema.h"

#include <unordered_map>

namespace nabla {

std::optional<OpId> op_from_name(std::string_view name) {
  static const std::unordered_map<std::string_view, OpId> by_name = [] {
    std::unordered_map<std::string_view, OpId> m;
    for (size_t i = 0; i < kOpCount; ++i) m.emplace(op_row(static_cast<OpId>(i)).name, static_cast<OpId>(i));
    return m;
  }();
  auto it = by_name.find(name);
  if (it == by_name.end()) return std::nullopt;
  return it->second;
}

}  // namespace nabla
