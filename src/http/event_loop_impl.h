// Private to src/http: what EventLoop::Impl holds. Only the http .cc files
// include this header, so Boost.Asio stays out of every public header.
#ifndef REDLINE_HTTP_EVENT_LOOP_IMPL_H_
#define REDLINE_HTTP_EVENT_LOOP_IMPL_H_

#include <boost/asio/io_context.hpp>

#include "http/event_loop.h"

namespace redline::http {

struct EventLoop::Impl {
  // Concurrency hint 1: one thread runs the loop, so Asio can skip locking.
  boost::asio::io_context io{1};
};

}  // namespace redline::http

#endif  // REDLINE_HTTP_EVENT_LOOP_IMPL_H_
