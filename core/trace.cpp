// The tracer of each thread (core/trace.h).
#include "core/trace.h"

namespace nabla::trace {

constinit thread_local Tracer* tl_current = nullptr;

}  // namespace nabla::trace
