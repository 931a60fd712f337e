// What a device provides per op, one mechanism for all of it: the kernels (core/backend.h's
// Backend), the linear algebra solver's factorizations (core/linalg/solver.h) and the fused
// optimizer updates (optim/fused.h) are each a struct of Kernel entries generated from an X-list,
// filled by each backend from the same list, and registered per device type in a DeviceTable.
//
// A list has one line per entry:  X(name, return type, (parameters), when missing)
//   when missing: `raise` (calling it throws NotImplemented naming the entry and the device) or
//   `no` (it answers R(), false for the optional kernels whose caller has a composed fallback).
// From the list come
//   - the entries:  struct Backend { NABLA_DEVICE_ENTRIES(NABLA_KERNELS) ... };  each entry is
//     called like the function it holds, backend.unary(op, x, out, p0, p1): one indirect call, the
//     null test in front of it is predicted and costs nothing measurable (bench/overhead);
//   - a backend's fill, one line for the whole list: with `table` the struct being filled and
//     `impl` a namespace (or alias) holding the device's functions, NABLA_KERNELS(NABLA_FILL_ENTRY)
//     points each entry at impl::<name>. A function missing from `impl` is a compile error ("'name'
//     is not a member of 'impl'"), and so is one whose signature differs from the list's, unless the
//     backend declares on purpose that it lacks it, with the reason:
//       NABLA_DECLARE_LACKING(name, "reason")   in the backend's namespace
//     which leaves the entry empty and puts the reason in its NotImplemented message.
#pragma once

#include <array>
#include <atomic>
#include <type_traits>
#include <utility>

#include "device.h"

namespace nabla {

// What calling an entry a device does not have does: raise NotImplemented, or answer false.
enum class IfMissing { raise, no };
// Throws NotImplemented: "kernel: not implemented for device type 'device'" (and why, when the
// device lacks it on purpose).
[[noreturn]] void throw_kernel_missing(const char* kernel, const char* device, const char* lacking);

// One entry: a function pointer of the entry's signature, called as table.name(args...).
template <class Signature, IfMissing M>
struct Kernel;
template <class R, class... P, IfMissing M>
struct Kernel<R(P...), M> {
  R (*fn)(P...) = nullptr;
  const char* name = "";
  const char* device = "";
  const char* lacking = nullptr;  // why the device lacks it on purpose (NABLA_DECLARE_LACKING)
  R operator()(P... args) const {
    if (fn) [[likely]]
      return fn(std::forward<P>(args)...);
    if constexpr (M == IfMissing::no) return R();
    else throw_kernel_missing(name, device, lacking);
  }
  explicit operator bool() const { return fn != nullptr; }
};

// A backend's statement that it lacks an entry on purpose (NABLA_DECLARE_LACKING).
struct Lacking {
  const char* reason;
};

// NABLA_FILL_ENTRY's two cases: the device's function (of exactly the entry's signature), or its
// Lacking declaration.
template <class R, class... P, IfMissing M>
constexpr void fill_entry(Kernel<R(P...), M>& entry, R (*fn)(P...)) {
  entry.fn = fn;
}
template <class R, class... P, IfMissing M>
constexpr void fill_entry(Kernel<R(P...), M>& entry, const Lacking* lacking) {
  entry.lacking = lacking->reason;
}

#define NABLA_DEVICE_ENTRY_(name, ret, params, missing) \
  ::nabla::Kernel<ret params, ::nabla::IfMissing::missing> name{nullptr, #name};
#define NABLA_DEVICE_ENTRY_VISIT_(name, ...) f(name);
// The members of a table struct: one Kernel per line of LIST, and for_each_entry(f), which calls f
// on each entry in the list's order.
#define NABLA_DEVICE_ENTRIES(LIST)   \
  LIST(NABLA_DEVICE_ENTRY_)          \
  template <class F>                 \
  void for_each_entry(F&& f) {       \
    LIST(NABLA_DEVICE_ENTRY_VISIT_)  \
  }                                  \
  template <class F>                 \
  void for_each_entry(F&& f) const { \
    LIST(NABLA_DEVICE_ENTRY_VISIT_)  \
  }
// One line of a fill: table.name = impl::name (see above).
#define NABLA_FILL_ENTRY(name, ...) ::nabla::fill_entry(table.name, &impl::name);
// In the backend's namespace: the backend lacks entry `name` on purpose, for `reason`.
#define NABLA_DECLARE_LACKING(name, reason) inline constexpr ::nabla::Lacking name{reason};

constexpr const char* device_type_name(DeviceType type) { return type == DeviceType::cuda ? "cuda" : "cpu"; }

// Names every entry of a table for `device` (the NotImplemented messages say which device it was).
template <class Entries>
void name_entries(Entries& table, const char* device) {
  table.for_each_entry([&](auto& entry) { entry.device = device; });
}

// One table of Entries per device type, registered by the device's backend when it loads (from any
// thread, before the first lookup that needs it) and read lock-free by every op: a lookup is one
// atomic load (acquire, a plain load on x86-64).
template <class Entries>
class DeviceTable {
 public:
  using Mutable = std::remove_const_t<Entries>;

  void set(DeviceType type, Entries* table) { slots_[index(type)].store(table, std::memory_order_release); }
  // The table registered for `type`, or nullptr.
  Entries* find(DeviceType type) const { return slots_[index(type)].load(std::memory_order_acquire); }
  // find(type), or else an empty table of `type`: every entry raises NotImplemented naming itself and
  // the device (or answers false, for the optional ones).
  Entries& get(DeviceType type) const {
    if (Entries* t = find(type)) [[likely]]
      return *t;
    static Mutable empty[kNumDeviceTypes] = {named(DeviceType::cpu), named(DeviceType::cuda)};
    return empty[index(type)];
  }

 private:
  static_assert(kNumDeviceTypes == 2, "DeviceTable::get's empty tables list every device type");
  static constexpr int index(DeviceType type) { return static_cast<int>(type); }
  static Mutable named(DeviceType type) {
    Mutable t{};
    name_entries(t, device_type_name(type));
    return t;
  }
  std::array<std::atomic<Entries*>, kNumDeviceTypes> slots_{};
};

}  // namespace nabla
