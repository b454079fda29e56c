// Test helper: writes a fresh self-signed certificate and private key (PEM)
// for "localhost" / 127.0.0.1, so TLS tests need no checked-in secrets.
#ifndef REDLINE_HTTP_TESTING_TLS_TEST_CERT_H_
#define REDLINE_HTTP_TESTING_TLS_TEST_CERT_H_

#include <string>

#include "base/status.h"

namespace redline::http::testing {

// Creates `dir`/cert.pem and `dir`/key.pem (EC P-256, valid for one day,
// subjectAltName DNS:localhost, IP:127.0.0.1).
Status WriteSelfSignedCert(const std::string& dir, std::string* cert_path,
                           std::string* key_path);

}  // namespace redline::http::testing

#endif  // REDLINE_HTTP_TESTING_TLS_TEST_CERT_H_
