// nabla's error hierarchy. Every user mistake becomes one of these exceptions, with a message that
// names the op and shows what was passed, e.g.
//   matmul: inner dimensions differ: lhs [64, 320] rhs [50, 10]
//
// Checks are written with NABLA_CHECK(E, cond, message...): the message parts are evaluated and
// streamed only when `cond` is false, so a passing check costs one branch whatever it would print.
// In debug builds (NDEBUG not defined) the message ends with the check's file and line.
#pragma once

#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>

namespace nabla {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ShapeError : public Error {
  using Error::Error;
};  // incompatible or invalid shapes
class DTypeError : public Error {
  using Error::Error;
};  // unsupported or mismatched dtypes
class DeviceError : public Error {
  using Error::Error;
};  // tensors on different devices
class IndexError : public Error {
  using Error::Error;
};  // index or dim out of range
class ValueError : public Error {
  using Error::Error;
};  // a bad argument value
class IOError : public Error {
  using Error::Error;
};  // unreadable, corrupt or truncated files
class NotImplemented : public Error {
  using Error::Error;
};  // op not available for a device/dtype
class AutogradError : public Error {
  using Error::Error;
};  // misuse of the autograd graph
class CudaError : public Error {
  using Error::Error;
};  // CUDA, cuBLAS or cuDNN failures
class CudaOutOfMemory : public CudaError {
  using CudaError::CudaError;
};

namespace internal {
// An output stream that writes into a string (a std::ostringstream kept out of this header).
class MessageStream {
 public:
  MessageStream();
  ~MessageStream();
  MessageStream(const MessageStream&) = delete;
  MessageStream& operator=(const MessageStream&) = delete;
  std::ostream& stream();
  std::string take();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Concatenates anything streamable into one string: str("add: ", shape, " vs ", other).
template <class... Args>
std::string str(const Args&... args) {
  MessageStream m;
  if constexpr (sizeof...(Args) > 0) (m.stream() << ... << args);
  return m.take();
}

// " (core/views.cpp:120)" in debug builds, "" otherwise.
std::string check_location(const char* file, int line);

// Throws E with the streamed arguments as message: the failing branch of NABLA_CHECK, out of line
// so that the passing branch stays small.
template <class E, class... Args>
[[noreturn, gnu::cold, gnu::noinline]] void check_failed([[maybe_unused]] const char* file, [[maybe_unused]] int line,
                                                         const Args&... args) {
#ifdef NDEBUG
  throw E(str(args...));
#else
  throw E(str(args...) + check_location(file, line));
#endif
}
}  // namespace internal

// Throws E (an nabla::Error) with the message parts streamed together when `cond` is false; the
// parts are evaluated only then. A statement: NABLA_CHECK(ShapeError, a.dim() == 2, "mm: ", a.sizes());
#define NABLA_CHECK(E, cond, ...)                                          \
  do {                                                                     \
    if (!(cond)) [[unlikely]]                                              \
      ::nabla::internal::check_failed<E>(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

// The function form, for the rare place a check must be an expression; its message parts are
// evaluated even when the check passes, so prefer NABLA_CHECK.
template <class E = Error, class... Args>
inline void check(bool cond, const Args&... args) {
  if (!cond) [[unlikely]]
    internal::check_failed<E>(nullptr, 0, args...);
}

}  // namespace nabla
