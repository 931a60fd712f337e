// The tracer of each thread (core/trace.h).
#include "core/trace.h"

#include <array>

namespace nabla::trace {

constinit thread_local Tracer* tl_current = nullptr;
constinit thread_local bool tl_step_aside = false;

void notify_random_draw() {
  if (Tracer* t = tl_current) t->on_random_draw();
}

size_t attrs_index(OpId op) {
  static constexpr auto table = []<size_t... I>(std::index_sequence<I...>) {
    return std::array<size_t, kOpCount>{VariantIndex<op_attrs_t<static_cast<OpId>(I)>, OpAttrs>::value...};
  }
  (std::make_index_sequence<kOpCount>{});
  static_assert(
      [] {
        for (size_t i : table)
          if (i >= std::variant_size_v<OpAttrs>) return false;
        return true;
      }(),
      "every op's attribute struct is one of OpAttrs' alternatives");
  return table[static_cast<size_t>(op)];
}

}  // namespace nabla::trace
