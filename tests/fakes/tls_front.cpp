// The TLS terminator for tests (see tls_front.hpp).
#include "fakes/tls_front.hpp"

#include <utility>  // before asio (GCC 12)

#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <stdexcept>
#include <thread>

namespace gf::fakes {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

struct Pipe : std::enable_shared_from_this<Pipe> {
  Pipe(tcp::socket client, ssl::context& ctx, unsigned short backend)
      : tls(std::move(client), ctx), plain(tls.get_executor()), backend(backend) {}

  void start() {
    tls.async_handshake(ssl::stream_base::server, [self = shared_from_this()](error_code ec) {
      if (ec) return;
      self->plain.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), self->backend),
                                [self](error_code ec) {
                                  if (ec) return self->stop();
                                  self->tls_to_plain();
                                  self->plain_to_tls();
                                });
    });
  }
  void tls_to_plain() {
    tls.async_read_some(asio::buffer(up), [self = shared_from_this()](error_code ec, std::size_t n) {
      if (ec) return self->stop();
      asio::async_write(self->plain, asio::buffer(self->up, n), [self](error_code ec, std::size_t) {
        if (ec) return self->stop();
        self->tls_to_plain();
      });
    });
  }
  void plain_to_tls() {
    plain.async_read_some(asio::buffer(down), [self = shared_from_this()](error_code ec, std::size_t n) {
      if (ec) return self->stop();
      asio::async_write(self->tls, asio::buffer(self->down, n), [self](error_code ec, std::size_t) {
        if (ec) return self->stop();
        self->plain_to_tls();
      });
    });
  }
  void stop() {
    error_code ignored;
    tls.lowest_layer().close(ignored);
    plain.close(ignored);
  }

  ssl::stream<tcp::socket> tls;
  tcp::socket plain;
  unsigned short backend;
  std::array<char, 16384> up{}, down{};
};

}  // namespace

struct TlsFront::Impl {
  asio::io_context ioc;
  ssl::context ctx{ssl::context::tls_server};
  tcp::acceptor acceptor{ioc};
  unsigned short backend = 0;
  std::thread thread;

  void accept() {
    acceptor.async_accept([this](error_code ec, tcp::socket s) {
      if (ec) return;
      std::make_shared<Pipe>(std::move(s), ctx, backend)->start();
      accept();
    });
  }
};

TlsFront::TlsFront(unsigned short backend_port, const std::string& cert_pem, const std::string& key_pem,
                   const std::string& client_ca_pem)
    : impl_(std::make_unique<Impl>()) {
  impl_->backend = backend_port;
  impl_->ctx.use_certificate_chain(asio::buffer(cert_pem));
  impl_->ctx.use_private_key(asio::buffer(key_pem), ssl::context::pem);
  if (!client_ca_pem.empty()) {
    impl_->ctx.add_certificate_authority(asio::buffer(client_ca_pem));
    impl_->ctx.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  }
  const tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(ep.protocol());
  impl_->acceptor.bind(ep);
  impl_->acceptor.listen();
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] { impl->ioc.run(); });
}

TlsFront::~TlsFront() {
  impl_->ioc.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

unsigned short TlsFront::port() const { return impl_->acceptor.local_endpoint().port(); }

std::string TlsFront::url() const { return "https://127.0.0.1:" + std::to_string(port()); }

}  // namespace gf::fakes
