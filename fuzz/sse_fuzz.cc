// libFuzzer target for the server-sent events parser (http/sse.h): the bytes
// of a stream arrive from the network in pieces of any size, so the events
// must not depend on where the pieces end.
//
// Input: byte 0 seeds the split points, the rest is the stream. Checks:
//   - the events (kind, event type, data) and Finish's result are the same
//     for the whole stream in one Feed, one byte per Feed, and random
//     splits (empty pieces included, CR/LF pairs cut in two);
//   - a parser reused after Reset gives the same events again;
//   - SseData and SseComment round-trip: a payload without CR or LF comes
//     back as exactly one event holding it.
//
//   cmake --preset fuzz && cmake --build --preset fuzz --target sse_fuzz
//   ./build/fuzz/fuzz/sse_fuzz -max_total_time=60 tests/data/sse_seeds
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "http/sse.h"

namespace {

using redline::http::SseEvent;
using redline::http::SseParser;

// An event copied out of the callback (its views die with the call).
struct Event {
  SseEvent::Kind kind;
  std::string event_type;
  std::string data;
  bool operator==(const Event&) const = default;
};

struct Outcome {
  std::vector<Event> events;
  bool finished_event = false;
  bool operator==(const Outcome&) const = default;
};

void Collect(std::vector<Event>* out, const SseEvent& e) {
  out->push_back({e.kind, std::string(e.event_type), std::string(e.data)});
}

// Feeds `stream` in pieces whose lengths come from `next_length`, then
// finishes.
template <typename NextLength>
Outcome Run(SseParser& parser, std::string_view stream,
            NextLength next_length) {
  Outcome out;
  auto on_event = [&](const SseEvent& e) { Collect(&out.events, e); };
  size_t pos = 0;
  while (pos < stream.size()) {
    const size_t n = std::min(next_length(), stream.size() - pos);
    parser.Feed(stream.substr(pos, n), on_event);
    pos += n;
  }
  out.finished_event = parser.Finish(on_event);
  RL_CHECK(parser.pending_bytes() == 0) << "Finish left a partial line";
  return out;
}

Outcome Whole(std::string_view stream) {
  SseParser parser;
  return Run(parser, stream, [&] { return stream.size(); });
}

// Small xorshift generator: reproducible splits from the input's own seed.
struct Splits {
  uint32_t state;
  size_t operator()() {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    // Mostly short pieces (CR/LF pairs get cut), now and then empty or long.
    switch (state % 8) {
      case 0:
        return 0;
      case 1:
        return 64 + state % 512;
      default:
        return 1 + state % 5;
    }
  }
};

void CheckRoundTrip(std::string_view payload) {
  if (payload.find_first_of("\r\n") != std::string_view::npos) return;
  for (bool comment : {false, true}) {
    const std::string framed = comment ? redline::http::SseComment(payload)
                                       : redline::http::SseData(payload);
    const Outcome got = Whole(framed);
    RL_CHECK(got.events.size() == 1 && !got.finished_event)
        << "a framed payload gave " << got.events.size() << " events";
    const Event& e = got.events[0];
    RL_CHECK(e.kind ==
             (comment ? SseEvent::Kind::kComment : SseEvent::Kind::kData));
    RL_CHECK(e.data == payload) << "payload changed in the round trip";
    RL_CHECK(e.event_type.empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view stream(reinterpret_cast<const char*>(data + 1),
                                size - 1);
  const Outcome whole = Whole(stream);

  SseParser parser;
  const Outcome bytewise = Run(parser, stream, [] { return size_t{1}; });
  RL_CHECK(bytewise == whole) << "one byte per Feed changed the events";

  // Random splits; each round reuses the parser after Reset, which must
  // then behave as a new one.
  Splits splits{0x9E3779B9u ^ (uint32_t{data[0]} * 0x01000193u)};
  for (int round = 0; round < 4; ++round) {
    parser.Reset();
    const Outcome split = Run(parser, stream, splits);
    RL_CHECK(split == whole) << "split points changed the events";
  }

  CheckRoundTrip(stream.substr(0, std::min<size_t>(stream.size(), 256)));
  return 0;
}
