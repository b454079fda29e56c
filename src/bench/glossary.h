// Short definitions of the names a bench report prints (the HTML report's
// glossary), one line each, worded as docs/GLOSSARY.md and
// docs/METRICS.md define them. Keys are the names as printed: the metric
// keys ("ttft", "e2e_sched"), threshold keys ("errors", "goodput") and the
// words of the other sections ("offered", "kv_cache").
//
// Thread-safety: immutable static data.
#ifndef REDLINE_BENCH_GLOSSARY_H_
#define REDLINE_BENCH_GLOSSARY_H_

#include <string_view>
#include <utility>
#include <vector>

namespace redline::bench {

// (term, definition) in display order.
const std::vector<std::pair<std::string_view, std::string_view>>&
GlossaryEntries();

// The definition of `term`, "" when it has none.
std::string_view GlossaryDefinition(std::string_view term);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_GLOSSARY_H_
