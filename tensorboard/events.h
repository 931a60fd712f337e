// Event messages (tensorflow/core/util/event.proto) as bytes:
//   Event { double wall_time = 1; int64 step = 2; oneof what { string file_version = 3;
//           Summary summary = 5; SessionLog session_log = 7; ... } }
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "proto.h"

namespace nabla::tensorboard {

// Seconds since the Unix epoch, as Python's time.time() (a vDSO call: no system call).
inline double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace event_field {
inline constexpr uint32_t wall_time = 1, step = 2, file_version = 3, summary = 5, session_log = 7;
}

// Appends an Event {wall_time, step, summary: <summary_body(w)>} to out.
template <class SummaryBody>
void encode_summary_event(std::string& out, double wall, std::optional<int64_t> step, SummaryBody&& summary_body) {
  ProtoWriter w(out);
  w.f64(event_field::wall_time, wall);
  if (step) w.int64(event_field::step, *step);
  w.message(event_field::summary, [&] { summary_body(w); });
}

inline void encode_file_version_event(std::string& out, double wall, std::optional<int64_t> step,
                                      std::string_view version) {
  ProtoWriter w(out);
  w.f64(event_field::wall_time, wall);
  if (step) w.int64(event_field::step, *step);
  w.str_always(event_field::file_version, version);
}

// SessionLog { enum SessionStatus { STATUS_UNSPECIFIED = 0; START = 1; STOP = 2; CHECKPOINT = 3; } status = 1; }
inline void encode_session_start_event(std::string& out, double wall, int64_t step) {
  ProtoWriter w(out);
  w.f64(event_field::wall_time, wall);
  w.int64(event_field::step, step);
  w.message(event_field::session_log, [&] { w.int64(1, 1); });
}

}  // namespace nabla::tensorboard
