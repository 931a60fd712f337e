#include "core/error.h"

#include <sstream>

namespace nabla::internal {

struct MessageStream::Impl {
  std::ostringstream os;
};

MessageStream::MessageStream() : impl_(std::make_unique<Impl>()) {}
MessageStream::~MessageStream() = default;
std::ostream& MessageStream::stream() { return impl_->os; }
std::string MessageStream::take() { return std::move(impl_->os).str(); }

std::string check_location(const char* file, int line) {
  if (file == nullptr) return {};
  return str(" (", file, ":", line, ")");
}

}  // namespace nabla::internal
