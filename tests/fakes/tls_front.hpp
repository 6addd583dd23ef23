#pragma once
// TlsFront: a TLS terminator for tests, on 127.0.0.1:<ephemeral port>. Each connection's TLS is
// accepted with the given certificate and key and its plain bytes are piped to 127.0.0.1:<backend>
// (a stand-in server) and back, so that a client's TLS setup (CA, server name, client certificate)
// meets a real handshake while the stand-in stays plain HTTP. One Asio thread of its own; Beast and
// OpenSSL stay in tls_front.cpp.
// Thread-safety: port() may be called from any thread; the destructor stops the thread.
#include <memory>
#include <string>

namespace gf::fakes {

class TlsFront {
 public:
  // cert_pem: the server's certificate chain; key_pem: its key. client_ca_pem non-empty: a client
  // certificate signed by it is required.
  TlsFront(unsigned short backend_port, const std::string& cert_pem, const std::string& key_pem,
           const std::string& client_ca_pem = {});
  ~TlsFront();
  TlsFront(const TlsFront&) = delete;
  TlsFront& operator=(const TlsFront&) = delete;

  unsigned short port() const;
  std::string url() const;  // "https://127.0.0.1:<port>"

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gf::fakes
