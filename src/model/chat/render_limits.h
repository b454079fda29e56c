// Resource limits of one chat-template render. Shared by the public API
// (chat_template.h) and the interpreter (jinja_interpreter.h).
#ifndef REDLINE_MODEL_CHAT_RENDER_LIMITS_H_
#define REDLINE_MODEL_CHAT_RENDER_LIMITS_H_

#include <cstddef>
#include <cstdint>

namespace redline::model::chat {

// Bounds that keep a hostile template from hanging or exhausting memory or
// stack. The defaults are far above what real chat templates need (the
// largest published ones render in well under 10^5 steps).
struct RenderLimits {
  // Bytes of output, and of any single string value made while rendering.
  size_t max_output_bytes = size_t{16} << 20;
  // Nested macro calls (recursive macros are legal; Cohere's schema printer
  // recurses once per schema level).
  int max_call_depth = 64;
  // Loop iterations summed over the whole render.
  int64_t max_loop_iterations = 1'000'000;
  // Evaluation steps (expressions, statements, and copied elements or
  // bytes/64) summed over the whole render; bounds CPU time to about a
  // second.
  int64_t max_steps = 50'000'000;
  // Nesting of values built by the template or passed in (lists in lists).
  int max_value_depth = 256;
};

}  // namespace redline::model::chat

#endif  // REDLINE_MODEL_CHAT_RENDER_LIMITS_H_
