// nabla's error hierarchy. Every user mistake becomes one of these exceptions, with a message that
// names the op and shows what was passed, e.g.
//   matmul: inner dimensions differ: lhs [64, 320] rhs [50, 10]
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace nabla {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ShapeError : public Error { using Error::Error; };          // incompatible or invalid shapes
class DTypeError : public Error { using Error::Error; };          // unsupported or mismatched dtypes
class DeviceError : public Error { using Error::Error; };         // tensors on different devices
class IndexError : public Error { using Error::Error; };          // index or dim out of range
class ValueError : public Error { using Error::Error; };          // a bad argument value
class IOError : public Error { using Error::Error; };             // unreadable, corrupt or truncated files
class NotImplemented : public Error { using Error::Error; };      // op not available for a device/dtype
class AutogradError : public Error { using Error::Error; };       // misuse of the autograd graph
class CudaError : public Error { using Error::Error; };           // CUDA, cuBLAS or cuDNN failures
class CudaOutOfMemory : public CudaError { using CudaError::CudaError; };

namespace detail {
// Concatenates anything streamable into one string: str("add: ", shape, " vs ", other).
template <class... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// Throws E with the streamed arguments as message when `cond` is false.
template <class E = Error, class... Args>
inline void check(bool cond, const Args&... args) {
  if (!cond) [[unlikely]]
    throw E(detail::str(args...));
}

}  // namespace nabla
