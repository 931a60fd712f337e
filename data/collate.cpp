#include "data/collate.h"

#include <vector>

#include "core/error.h"
#include "core/ops.h"

namespace nabla::data::internal {

std::string describe(const CollatePath& path) {
  std::vector<const CollatePath*> chain;
  for (const CollatePath* p = &path; p != nullptr; p = p->parent)
    if (p->kind != CollatePath::Kind::root) chain.push_back(p);
  if (chain.empty()) return "";
  std::string out = " (in ";
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const CollatePath& p = **it;
    if (it != chain.rbegin()) out += ", ";
    switch (p.kind) {
      case CollatePath::Kind::field: out += str("field ", p.index); break;
      case CollatePath::Kind::element: out += str("element ", p.index); break;
      case CollatePath::Kind::key: out += "key " + p.key_str(p.key); break;
      case CollatePath::Kind::root: break;
    }
  }
  return out + ")";
}

Tensor collate_tensors(std::span<const Tensor* const> xs, const CollatePath& path) {
  const Tensor& first = *xs[0];
  for (size_t i = 1; i < xs.size(); ++i) {
    const Tensor& t = *xs[i];
    NABLA_CHECK(ValueError, t.defined() == first.defined(), "default_collate: sample ", i,
                t.defined() ? " has a tensor but sample 0 has an undefined one"
                            : " has an undefined tensor but sample 0 has one",
                describe(path));
    if (!t.defined()) continue;
    NABLA_CHECK(ShapeError, t.sizes() == first.sizes(), "default_collate: sample ", i, " has shape ", t.sizes(),
                " but sample 0 has ", first.sizes(), describe(path),
                "; pad or crop the samples to one shape, or give the DataLoader a collate");
  }
  if (!first.defined()) return {};
  std::vector<Tensor> ts;
  ts.reserve(xs.size());
  for (const Tensor* t : xs) ts.push_back(*t);
  return stack(ts, 0);
}

void throw_unequal_lengths(size_t sample, size_t size, size_t size0, const CollatePath& path) {
  throw ValueError(str("default_collate: each element in list of batch should be of equal size: sample ", sample,
                       " has ", size, " elements but sample 0 has ", size0, describe(path)));
}

void throw_missing_key(size_t sample, const CollatePath& key_path, const CollatePath& path) {
  throw ValueError(str("default_collate: sample ", sample, " has no key ", key_path.key_str(key_path.key),
                       " but sample 0 has", describe(path)));
}

void throw_unequal_keys(size_t sample, size_t keys, size_t keys0, const CollatePath& path) {
  throw ValueError(
      str("default_collate: sample ", sample, " has ", keys, " keys but sample 0 has ", keys0, describe(path)));
}

void throw_mixed_optional(size_t sample, bool engaged, const CollatePath& path) {
  throw ValueError(str("default_collate: sample ", sample,
                       engaged ? " holds a value but sample 0 is std::nullopt" : " is std::nullopt but sample 0 is not",
                       describe(path)));
}

void throw_int64_overflow(size_t sample, uint64_t value, const CollatePath& path) {
  throw ValueError(str("default_collate: sample ", sample, " holds ", value, ", which does not fit in an int64 tensor",
                       describe(path)));
}

}  // namespace nabla::data::internal
