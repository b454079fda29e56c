// Conversion of Boost.JSON documents into interpreter values (JSON objects
// become insertion-ordered dicts, numbers keep their int/float kind, null
// becomes None). Serialization (Python's json.dumps) is JsonDump in
// jinja_builtins.h.
//
// Thread-safety: pure functions. Cost: O(size of the document).
#ifndef REDLINE_MODEL_CHAT_JINJA_JSON_H_
#define REDLINE_MODEL_CHAT_JINJA_JSON_H_

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include "base/result.h"
#include "model/chat/jinja_value.h"

namespace redline::model::chat::jinja {

// Fails with InvalidArgument when the document nests deeper than
// `max_depth` arrays/objects.
Result<Value> ValueFromJson(const boost::json::value& json, int max_depth);
Result<Value> ValueFromJson(const boost::json::array& json, int max_depth);

}  // namespace redline::model::chat::jinja

#endif  // REDLINE_MODEL_CHAT_JINJA_JSON_H_
