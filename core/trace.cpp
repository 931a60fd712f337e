// The tracer of each thread (core/trace.h).
#include "core/trace.h"

namespace nabla::trace {

constinit thread_local Tracer* tl_current = nullptr;
constinit thread_local bool tl_step_aside = false;

}  // namespace nabla::trace
