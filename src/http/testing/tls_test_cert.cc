#include "http/testing/tls_test_cert.h"

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <memory>

namespace redline::http::testing {

Status WriteSelfSignedCert(const std::string& dir, std::string* cert_path,
                           std::string* key_path) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"),
                                                          EVP_PKEY_free);
  if (!key) return Status::Internal("EVP_EC_gen failed");
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(
      name, "CN", MBSTRING_ASC,
      reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name,
                                            "DNS:localhost,IP:127.0.0.1");
  if (ext == nullptr) return Status::Internal("subjectAltName failed");
  X509_add_ext(cert.get(), ext, -1);
  X509_EXTENSION_free(ext);
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0)
    return Status::Internal("X509_sign failed");

  *cert_path = dir + "/cert.pem";
  *key_path = dir + "/key.pem";
  FILE* f = std::fopen(cert_path->c_str(), "w");
  if (f == nullptr) return Status::IoError("cannot write " + *cert_path);
  PEM_write_X509(f, cert.get());
  std::fclose(f);
  f = std::fopen(key_path->c_str(), "w");
  if (f == nullptr) return Status::IoError("cannot write " + *key_path);
  PEM_write_PrivateKey(f, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  return Status::Ok();
}

}  // namespace redline::http::testing
