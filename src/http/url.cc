#include "http/url.h"

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#include <string>

namespace redline::http {

std::string Origin::HostHeader() const {
  const bool is_default = (tls && port == 443) || (!tls && port == 80);
  std::string host_part =
      host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (is_default) return host_part;
  return host_part + ":" + std::to_string(port);
}

std::string Origin::ToString() const {
  return std::string(tls ? "https://" : "http://") + HostHeader();
}

Result<ParsedUrl> ParseUrl(std::string_view url) {
  auto parsed =
      boost::urls::parse_uri(boost::urls::string_view(url.data(), url.size()));
  if (!parsed) {
    return Status::InvalidArgument("bad URL '" + std::string(url) +
                                   "': " + parsed.error().message());
  }
  const boost::urls::url_view& u = *parsed;
  ParsedUrl out;
  const std::string scheme(u.scheme());
  if (scheme == "https") {
    out.origin.tls = true;
  } else if (scheme != "http") {
    return Status::InvalidArgument("URL scheme must be http or https: '" +
                                   std::string(url) + "'");
  }
  std::string host(u.encoded_host());
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty())
    return Status::InvalidArgument("URL has no host: '" + std::string(url) +
                                   "'");
  out.origin.host = host;
  if (u.has_port()) {
    const std::string port(u.port());
    int value = 0;
    for (char c : port) {
      if (c < '0' || c > '9')
        return Status::InvalidArgument("bad port in '" + std::string(url) +
                                       "'");
      value = value * 10 + (c - '0');
      if (value > 65535)
        return Status::InvalidArgument("port out of range in '" +
                                       std::string(url) + "'");
    }
    out.origin.port = static_cast<uint16_t>(value);
  } else {
    out.origin.port = out.origin.tls ? 443 : 80;
  }
  out.target = std::string(u.encoded_path());
  if (out.target.empty()) out.target = "/";
  if (u.has_query()) out.target += "?" + std::string(u.encoded_query());
  return out;
}

std::string JoinPath(std::string_view base, std::string_view path) {
  while (!base.empty() && base.back() == '/') base.remove_suffix(1);
  while (!path.empty() && path.front() == '/') path.remove_prefix(1);
  std::string out(base);
  out += '/';
  out += path;
  return out;
}

}  // namespace redline::http
