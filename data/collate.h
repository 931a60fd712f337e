// default_collate: samples of any structure stacked into one batch, field by field, as
// torch.utils.data.default_collate does. The DataLoader uses it for datasets whose get(i) returns
// something other than an Example; a collate given to the DataLoader replaces it.
//
//   sample (each of B)                      batch
//   Tensor (shape S)                        Tensor (B, S...), stacked (dtypes promote as torch.stack)
//   bool                                    bool tensor (B)
//   integer (int, int64_t, uint8_t, ...)    int64 tensor (B)
//   float, double                           float64 tensor (B), as PyTorch
//   std::string                             std::vector<std::string> (B), the samples as they are
//   std::pair<A, C>, std::tuple<A...>       the same pair / tuple of collated fields
//   std::vector<T> (all of one length L)    std::vector<collate_t<T>> (L): element j collates the
//                                           samples' element j ("transposed", as PyTorch); not
//                                           std::vector<bool> (use uint8_t, or a Tensor)
//   std::array<T, N>                        std::array<collate_t<T>, N>, the same way
//   std::map<K, V> (all with the same keys) std::map<K, collate_t<V>>
//   std::optional<T>                        std::optional<collate_t<T>>: engaged when every sample
//                                           is, std::nullopt when none is (mixed: ValueError)
//   Example                                 Example: data::collate (data and target stacked)
//   an aggregate struct of the above        T::batch_type if T declares one, else std::tuple of the
//                                           collated fields (see "structs" below)
//
// An undefined Tensor collates to an undefined Tensor when every sample's is undefined (an
// unlabeled Example's target, say); one undefined among defined ones is a ValueError.
//
// Structs: a struct whose fields are all collatable (an aggregate: public fields, no constructors,
// no base classes, no C arrays, at most 16 fields) is collated field by field, in declaration
// order, with no code to write. Its batch is a std::tuple of the collated fields, or, when the
// struct names one, `batch_type`, aggregate-initialized from them in the same order:
//
//   struct Review {
//     int64_t label;
//     std::string text;
//     Tensor ids;                                  // (L)
//     struct batch_type {                          // optional: without it the batch is
//       Tensor label;                              //   std::tuple<Tensor, std::vector<std::string>, Tensor>
//       std::vector<std::string> text;
//       Tensor ids;                                // (B, L)
//     };
//   };
//   std::vector<Review> reviews = ...;
//   Review::batch_type batch = data::default_collate(reviews);   // batch.label: int64 (B)
//
// Any other type becomes collatable by specializing data::Collator (before its first use):
//
//   template <> struct nabla::data::Collator<Span> {
//     using batch_type = Tensor;                                          // (B, 2) int64
//     static Tensor collate(std::span<const Span> s) { ... }
//   };
//
// A sample type that is none of these fails to compile at the DataLoader (or default_collate) with
// a static_assert naming this header. Errors at run time are exceptions naming the sample and where
// in it the mismatch is: "default_collate: sample 2 has shape [3] but sample 0 has [2] (in field
// 2)" (ShapeError); "each element in list of batch should be of equal size" (ValueError).
//
// for_each_tensor(batch, f) visits every defined Tensor of a batch of any of these structures (and
// of a collate's own result, when it is made of them): the DataLoader's pin_memory uses it, and it
// moves a whole batch to a device:  data::for_each_tensor(batch, [&](Tensor& t) { t = t.to(dev); });
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <ranges>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/error.h"
#include "../core/ops.h"
#include "../core/tensor.h"
#include "dataset.h"

namespace nabla::data {

// The customisation point: specialize it for a type the rules above do not cover, with
// `using batch_type = ...;` and `static batch_type collate(std::span<const T>)`. A specialization
// also replaces the rule an aggregate struct would otherwise get.
template <class T>
struct Collator;

namespace internal {
// The library's private helpers (internal::str, ...) are reachable from here as well.
using namespace ::nabla::internal;

// Where in the samples a collation is, kept as a chain on the stack and put into words only when
// an error is thrown: " (in field 1, element 0, key \"ids\")".
struct CollatePath {
  enum class Kind { root, field, element, key };
  const CollatePath* parent = nullptr;
  Kind kind = Kind::root;
  size_t index = 0;                               // field or element
  const void* key = nullptr;                      // a map's key, put into words by key_str
  std::string (*key_str)(const void*) = nullptr;  //
  CollatePath child(Kind k, size_t i) const { return {this, k, i}; }
};
std::string describe(const CollatePath& path);

// The leaves, out of line (collate.cpp): stacked tensors, and the errors of the containers.
Tensor collate_tensors(std::span<const Tensor* const> xs, const CollatePath& path);
[[noreturn]] void throw_unequal_lengths(size_t sample, size_t size, size_t size0, const CollatePath& path);
[[noreturn]] void throw_missing_key(size_t sample, const CollatePath& key_path, const CollatePath& path);
[[noreturn]] void throw_unequal_keys(size_t sample, size_t keys, size_t keys0, const CollatePath& path);
[[noreturn]] void throw_mixed_optional(size_t sample, bool engaged, const CollatePath& path);
[[noreturn]] void throw_int64_overflow(size_t sample, uint64_t value, const CollatePath& path);

template <class K>
std::string key_string(const void* key) {
  const K& k = *static_cast<const K*>(key);
  if constexpr (std::convertible_to<const K&, std::string_view>) return str('"', std::string_view(k), '"');
  else return str(k);
}

template <class T>
struct is_std_array : std::false_type {};
template <class T, size_t N>
struct is_std_array<std::array<T, N>> : std::true_type {};

// ---- aggregate structs, decomposed into their fields (as Boost.PFR does) -------------------------
// AnyField converts to any type, so T{AnyField x N} compiles exactly when T has at least N fields.
struct AnyField {
  template <class U>
  operator U() const;  // never called: used in unevaluated contexts only
};
template <class T, size_t... I>
constexpr bool brace_init_with(std::index_sequence<I...>) {
  return requires { T{((void)I, AnyField{})...}; };
}
constexpr size_t kMaxFields = 16;
template <class T, size_t N = kMaxFields + 1>
constexpr size_t field_count() {
  if constexpr (N == 0) return 0;
  else if constexpr (brace_init_with<T>(std::make_index_sequence<N>{})) return N;
  else return field_count<T, N - 1>();
}

template <class T>
concept AggregateStruct = std::is_class_v<T> && std::is_aggregate_v<T> && !std::is_same_v<T, Example> &&
                          !is_std_array<T>::value && field_count<T>() > 0;

// References to the fields of `t` (a const or mutable aggregate), in declaration order.
template <class T>
auto tie_fields(T& t) {
  constexpr size_t n = field_count<std::remove_cv_t<T>>();
  static_assert(n <= kMaxFields,
                "data::default_collate: a struct with more than 16 fields cannot be decomposed; "
                "specialize data::Collator for it (data/collate.h)");
  // clang-format off
  if constexpr (n == 1) { auto& [a] = t; return std::tie(a); }
  else if constexpr (n == 2) { auto& [a, b] = t; return std::tie(a, b); }
  else if constexpr (n == 3) { auto& [a, b, c] = t; return std::tie(a, b, c); }
  else if constexpr (n == 4) { auto& [a, b, c, d] = t; return std::tie(a, b, c, d); }
  else if constexpr (n == 5) { auto& [a, b, c, d, e] = t; return std::tie(a, b, c, d, e); }
  else if constexpr (n == 6) { auto& [a, b, c, d, e, f] = t; return std::tie(a, b, c, d, e, f); }
  else if constexpr (n == 7) { auto& [a, b, c, d, e, f, g] = t; return std::tie(a, b, c, d, e, f, g); }
  else if constexpr (n == 8) { auto& [a, b, c, d, e, f, g, h] = t; return std::tie(a, b, c, d, e, f, g, h); }
  else if constexpr (n == 9) { auto& [a, b, c, d, e, f, g, h, i] = t; return std::tie(a, b, c, d, e, f, g, h, i); }
  else if constexpr (n == 10) {
    auto& [a, b, c, d, e, f, g, h, i, j] = t; return std::tie(a, b, c, d, e, f, g, h, i, j);
  } else if constexpr (n == 11) {
    auto& [a, b, c, d, e, f, g, h, i, j, k] = t; return std::tie(a, b, c, d, e, f, g, h, i, j, k);
  } else if constexpr (n == 12) {
    auto& [a, b, c, d, e, f, g, h, i, j, k, l] = t; return std::tie(a, b, c, d, e, f, g, h, i, j, k, l);
  } else if constexpr (n == 13) {
    auto& [a, b, c, d, e, f, g, h, i, j, k, l, m] = t; return std::tie(a, b, c, d, e, f, g, h, i, j, k, l, m);
  } else if constexpr (n == 14) {
    auto& [a, b, c, d, e, f, g, h, i, j, k, l, m, o] = t;
    return std::tie(a, b, c, d, e, f, g, h, i, j, k, l, m, o);
  } else if constexpr (n == 15) {
    auto& [a, b, c, d, e, f, g, h, i, j, k, l, m, o, p] = t;
    return std::tie(a, b, c, d, e, f, g, h, i, j, k, l, m, o, p);
  } else {
    auto& [a, b, c, d, e, f, g, h, i, j, k, l, m, o, p, q] = t;
    return std::tie(a, b, c, d, e, f, g, h, i, j, k, l, m, o, p, q);
  }
  // clang-format on
}
template <class T>
using fields_t = decltype(tie_fields(std::declval<const T&>()));  // std::tuple<const F&...>
template <class T, size_t I>
using field_t = std::remove_cvref_t<std::tuple_element_t<I, fields_t<T>>>;

// ---- the rules ------------------------------------------------------------------------------------
// Rule<T>: batch_type and run(pointers to the B samples, path). Undefined: T is not collatable.
template <class T>
struct Rule;

template <class T>
concept UserCollated = requires(std::span<const T> s) {
  typename Collator<T>::batch_type;
  { Collator<T>::collate(s) } -> std::convertible_to<typename Collator<T>::batch_type>;
};
template <class T>
concept Collatable = UserCollated<T> || requires {
  typename Rule<T>::batch_type;
};

template <class T>
struct batch_of {
  using type = typename Rule<T>::batch_type;
};
template <UserCollated T>
struct batch_of<T> {
  using type = typename Collator<T>::batch_type;
};

// Collates the samples *xs[0], ..., *xs[B-1].
template <class T>
auto collate_ptrs(std::span<const T* const> xs, const CollatePath& path) {
  if constexpr (UserCollated<T>) {
    std::vector<T> copies;
    copies.reserve(xs.size());
    for (const T* x : xs) copies.push_back(*x);
    return static_cast<typename Collator<T>::batch_type>(Collator<T>::collate(std::span<const T>(copies)));
  } else {
    return Rule<T>::run(xs, path);
  }
}
// Collates the part get(*x) of every sample.
template <class F, class T, class Get>
auto collate_part(std::span<const T* const> xs, const CollatePath& path, Get get) {
  std::vector<const F*> parts;
  parts.reserve(xs.size());
  for (const T* x : xs) parts.push_back(&get(*x));
  return collate_ptrs<F>(std::span<const F* const>(parts), path);
}

template <>
struct Rule<Tensor> {
  using batch_type = Tensor;
  static Tensor run(std::span<const Tensor* const> xs, const CollatePath& path) { return collate_tensors(xs, path); }
};

template <>
struct Rule<Example> {
  using batch_type = Example;
  static Example run(std::span<const Example* const> xs, const CollatePath&) {
    std::vector<Example> examples;
    examples.reserve(xs.size());
    for (const Example* x : xs) examples.push_back(*x);
    return collate(examples);
  }
};

template <>
struct Rule<bool> {
  using batch_type = Tensor;
  static Tensor run(std::span<const bool* const> xs, const CollatePath&) {
    std::vector<bool> v;
    v.reserve(xs.size());
    for (const bool* x : xs) v.push_back(*x);
    return tensor(v);
  }
};

template <class T>
requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) struct Rule<T> {
  using batch_type = Tensor;
  static Tensor run(std::span<const T* const> xs, const CollatePath& path) {
    std::vector<int64_t> v;
    v.reserve(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t))
        if (*xs[i] > static_cast<T>(INT64_MAX)) throw_int64_overflow(i, static_cast<uint64_t>(*xs[i]), path);
      v.push_back(static_cast<int64_t>(*xs[i]));
    }
    return tensor(v);
  }
};

template <std::floating_point T>
struct Rule<T> {
  using batch_type = Tensor;
  static Tensor run(std::span<const T* const> xs, const CollatePath&) {
    std::vector<double> v;
    v.reserve(xs.size());
    for (const T* x : xs) v.push_back(static_cast<double>(*x));
    return tensor(v);
  }
};

template <>
struct Rule<std::string> {
  using batch_type = std::vector<std::string>;
  static batch_type run(std::span<const std::string* const> xs, const CollatePath&) {
    batch_type v;
    v.reserve(xs.size());
    for (const std::string* x : xs) v.push_back(*x);
    return v;
  }
};

template <Collatable A, Collatable C>
struct Rule<std::pair<A, C>> {
  using batch_type = std::pair<typename batch_of<A>::type, typename batch_of<C>::type>;
  static batch_type run(std::span<const std::pair<A, C>* const> xs, const CollatePath& path) {
    return {
        collate_part<A>(xs, path.child(CollatePath::Kind::field, 0), [](const auto& p) -> const A& { return p.first; }),
        collate_part<C>(xs, path.child(CollatePath::Kind::field, 1),
                        [](const auto& p) -> const C& { return p.second; })};
  }
};

template <Collatable... A>
struct Rule<std::tuple<A...>> {
  using batch_type = std::tuple<typename batch_of<A>::type...>;
  static batch_type run(std::span<const std::tuple<A...>* const> xs, const CollatePath& path) {
    return [&]<size_t... I>(std::index_sequence<I...>) { return batch_type(part<I>(xs, path)...); }
    (std::index_sequence_for<A...>{});
  }

 private:
  template <size_t I>
  static auto part(std::span<const std::tuple<A...>* const> xs, const CollatePath& path) {
    using F = std::tuple_element_t<I, std::tuple<A...>>;
    return collate_part<F>(xs, path.child(CollatePath::Kind::field, I),
                           [](const std::tuple<A...>& t) -> const F& { return std::get<I>(t); });
  }
};

// Element j of the batch collates element j of every sample; all samples have as many elements.
template <class T, class Batch, class Samples>
void collate_elements(Samples xs, size_t n, const CollatePath& path, Batch& out) {
  for (size_t i = 0; i < xs.size(); ++i)
    if (xs[i]->size() != n) throw_unequal_lengths(i, xs[i]->size(), n, path);
  for (size_t j = 0; j < n; ++j)
    out[j] =
        collate_part<T>(xs, path.child(CollatePath::Kind::element, j), [j](const auto& v) -> const T& { return v[j]; });
}

template <Collatable T, class A>
requires(!std::is_same_v<T, bool>) struct Rule<std::vector<T, A>> {
  using batch_type = std::vector<typename batch_of<T>::type>;
  static batch_type run(std::span<const std::vector<T, A>* const> xs, const CollatePath& path) {
    batch_type out(xs[0]->size());
    collate_elements<T>(xs, xs[0]->size(), path, out);
    return out;
  }
};

template <Collatable T, size_t N>
struct Rule<std::array<T, N>> {
  using batch_type = std::array<typename batch_of<T>::type, N>;
  static batch_type run(std::span<const std::array<T, N>* const> xs, const CollatePath& path) {
    batch_type out{};
    collate_elements<T>(xs, N, path, out);
    return out;
  }
};

template <class K, Collatable V, class Less, class A>
struct Rule<std::map<K, V, Less, A>> {
  using batch_type = std::map<K, typename batch_of<V>::type, Less>;
  static batch_type run(std::span<const std::map<K, V, Less, A>* const> xs, const CollatePath& path) {
    batch_type out;
    for (size_t i = 1; i < xs.size(); ++i)
      if (xs[i]->size() != xs[0]->size()) throw_unequal_keys(i, xs[i]->size(), xs[0]->size(), path);
    for (const auto& [key, value0] : *xs[0]) {
      (void)value0;
      CollatePath at{&path, CollatePath::Kind::key, 0, &key, &key_string<K>};
      std::vector<const V*> values;
      values.reserve(xs.size());
      for (size_t i = 0; i < xs.size(); ++i) {
        auto it = xs[i]->find(key);
        if (it == xs[i]->end()) throw_missing_key(i, at, path);
        values.push_back(&it->second);
      }
      out.emplace(key, collate_ptrs<V>(std::span<const V* const>(values), at));
    }
    return out;
  }
};

template <Collatable T>
struct Rule<std::optional<T>> {
  using batch_type = std::optional<typename batch_of<T>::type>;
  static batch_type run(std::span<const std::optional<T>* const> xs, const CollatePath& path) {
    const bool engaged = xs[0]->has_value();
    for (size_t i = 1; i < xs.size(); ++i)
      if (xs[i]->has_value() != engaged) throw_mixed_optional(i, xs[i]->has_value(), path);
    if (!engaged) return std::nullopt;
    return collate_part<T>(xs, path, [](const auto& o) -> const T& { return *o; });
  }
};

template <class T>
constexpr bool fields_collatable() {
  return []<size_t... I>(std::index_sequence<I...>) { return (Collatable<field_t<T, I>> && ...); }
  (std::make_index_sequence<std::tuple_size_v<fields_t<T>>>{});
}
template <class T>
struct declared_batch {
  using type = void;
};
template <class T>
requires requires { typename T::batch_type; }
struct declared_batch<T> {
  using type = typename T::batch_type;
};

template <class T, class Seq>
struct collated_fields;
template <class T, size_t... I>
struct collated_fields<T, std::index_sequence<I...>> {
  using type = std::tuple<typename batch_of<field_t<T, I>>::type...>;
};

template <AggregateStruct T>
requires(fields_collatable<T>()) struct Rule<T> {
  static constexpr size_t N = std::tuple_size_v<fields_t<T>>;
  using collated = typename collated_fields<T, std::make_index_sequence<N>>::type;
  using batch_type =
      std::conditional_t<std::is_void_v<typename declared_batch<T>::type>, collated, typename declared_batch<T>::type>;

  static batch_type run(std::span<const T* const> xs, const CollatePath& path) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      if constexpr (std::is_same_v<batch_type, collated>) {
        return collated(field<I>(xs, path)...);
      } else {
        static_assert(
            requires { batch_type{std::declval<typename batch_of<field_t<T, I>>::type>()...}; },
            "data::default_collate: a struct's batch_type must be an aggregate whose fields are, in "
            "order, the collated fields of the struct (data/collate.h)");
        return batch_type{field<I>(xs, path)...};
      }
    }
    (std::make_index_sequence<N>{});
  }

 private:
  template <size_t I>
  static auto field(std::span<const T* const> xs, const CollatePath& path) {
    using F = field_t<T, I>;
    return collate_part<F>(xs, path.child(CollatePath::Kind::field, I),
                           [](const T& t) -> const F& { return std::get<I>(tie_fields(t)); });
  }
};

template <class T>
struct uncollatable {};  // the batch type of samples that are not collatable (a static_assert names it)
template <class T>
struct batch_or_tag {
  using type = uncollatable<T>;
};
template <Collatable T>
struct batch_or_tag<T> {
  using type = typename batch_of<T>::type;
};
}  // namespace internal

// Samples of type T can be collated (a rule above or a Collator specialization).
template <class T>
concept Collatable = internal::Collatable<T>;

// The batch type of samples of type T.
template <Collatable T>
using collate_t = typename internal::batch_of<T>::type;

// Stacks `samples` (a std::vector, std::span or other contiguous range; at least one sample) into a
// batch by the rules above.
template <std::ranges::contiguous_range R>
auto default_collate(const R& samples) {
  using T = std::ranges::range_value_t<R>;
  if constexpr (!Collatable<T>) {
    static_assert(Collatable<T>,
                  "data::default_collate: this sample type cannot be collated. Samples may be Tensors, bools, "
                  "integers, floats, std::strings, std::pair/tuple/vector/array/map/optional of these, Examples, or "
                  "aggregate structs of these (data/collate.h lists the rules); for anything else give the "
                  "DataLoader a collate, or specialize data::Collator<T>");
    return internal::uncollatable<T>{};
  } else {
    const size_t n = std::ranges::size(samples);
    NABLA_CHECK(ValueError, n > 0, "default_collate: no samples to collate");
    const T* first = std::ranges::data(samples);
    std::vector<const T*> xs(n);
    for (size_t i = 0; i < n; ++i) xs[i] = first + i;
    return internal::collate_ptrs<T>(std::span<const T* const>(xs), internal::CollatePath{});
  }
}

// Calls f(Tensor&) for every defined Tensor in `batch`: through Examples, pairs, tuples, vectors,
// arrays, maps, optionals and aggregate structs; other types hold nothing it reaches. With a const
// batch, f gets const Tensor&.
template <class B, class F>
void for_each_tensor(B& batch, F&& f) {
  using T = std::remove_cv_t<B>;
  if constexpr (std::is_same_v<T, Tensor>) {
    if (batch.defined()) f(batch);
  } else if constexpr (std::is_same_v<T, Example>) {
    for_each_tensor(batch.data, f);
    for_each_tensor(batch.target, f);
  } else if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string> ||
                       std::is_same_v<T, std::vector<bool>>) {
    return;
  } else if constexpr (requires { typename std::tuple_size<T>::type; } && !internal::is_std_array<T>::value) {
    std::apply([&](auto&... x) { (for_each_tensor(x, f), ...); }, batch);
  } else if constexpr (requires { typename T::mapped_type; }) {
    for (auto& kv : batch) for_each_tensor(kv.second, f);
  } else if constexpr (requires {
                         typename T::value_type;
                         batch.begin();
                       }) {
    for (auto& x : batch) for_each_tensor(x, f);
  } else if constexpr (requires {
                         batch.has_value();
                         *batch;
                       }) {
    if (batch.has_value()) for_each_tensor(*batch, f);
  } else if constexpr (internal::AggregateStruct<T>) {
    auto fields = internal::tie_fields(batch);
    std::apply([&](auto&... x) { (for_each_tensor(x, f), ...); }, fields);
  }
}

}  // namespace nabla::data
