#include "head/metrics_server.h"

#include <spdlog/spdlog.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <thread>

#include "head/dashboard.h"
#include "head/metrics.h"
#include "spotlight/codec.h"

namespace spotlight::head {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// A scraper that stops sending (or never reads) loses its connection after this.
constexpr auto kIdle = std::chrono::seconds(10);
// GET requests carry no body; anything larger is not a scrape.
constexpr size_t kHeaderLimit = 8 * 1024;
constexpr size_t kBodyLimit = 4 * 1024;

// One connection: requests in turn, kept alive while the client asks.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const MetricsServer::Source& status)
      : stream_(std::move(socket)), status_(status) {}
  void start() { read(); }

 private:
  void read() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(kBodyLimit);
    stream_.expires_after(kIdle);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset) {
      return close();
    }
    if (ec) {  // not HTTP, or over the limits: say so, then hang up
      auto res =
          reply(http::status::bad_request, std::string("bad request: ") + ec.message() + "\n", 11);
      res.keep_alive(false);
      return write(std::move(res));
    }
    write(answer(parser_->release()));
  }

  http::response<http::string_body> reply(http::status status, std::string body, unsigned version,
                                          const char* type = "text/plain; charset=utf-8") {
    http::response<http::string_body> res{status, version};
    res.set(http::field::server, "spotlight-head");
    res.set(http::field::content_type, type);
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
  }

  static bool is_page(beast::string_view target) {
    return target == "/" || target == "/index.html" || target == "/status.json" ||
           target == "/metrics" || target == "/healthz";
  }

  http::response<http::string_body> render(beast::string_view target, const ClusterStatus& s,
                                           unsigned v) {
    if (target == "/healthz") return reply(http::status::ok, "ok\n", v);
    if (target == "/metrics") {
      return reply(http::status::ok, prometheus_text(s), v,
                   "text/plain; version=0.0.4; charset=utf-8");
    }
    if (target == "/status.json")
      return reply(http::status::ok, status_json(s), v, "application/json");
    return reply(http::status::ok, dashboard_html(s), v, "text/html; charset=utf-8");
  }

  http::response<http::string_body> answer(const http::request<http::string_body>& req) {
    const unsigned v = req.version();
    http::response<http::string_body> res;
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      res = reply(http::status::method_not_allowed, "only GET\n", v);
      res.set(http::field::allow, "GET, HEAD");
    } else if (is_page(req.target())) {
      // One snapshot of the head's status, packed by its loop; rendered here.
      std::optional<std::string> packed = status_();
      if (!packed) {
        res =
            reply(http::status::service_unavailable, "the head's loop did not answer in time\n", v);
      } else {
        res = render(req.target(), unpack<ClusterStatus>(*packed), v);
      }
    } else {
      res = reply(http::status::not_found,
                  "not found: try / (the status page), /status.json, /metrics or /healthz\n", v);
    }
    res.keep_alive(req.keep_alive());
    if (req.method() == http::verb::head) {
      const auto length = res.body().size();
      res.body().clear();
      res.content_length(length);
    }
    return res;
  }

  void write(http::response<http::string_body> res) {
    auto out = std::make_shared<http::response<http::string_body>>(std::move(res));
    stream_.expires_after(kIdle);
    http::async_write(stream_, *out,
                      [self = shared_from_this(), out](beast::error_code ec, size_t) {
                        if (ec || !out->keep_alive()) return self->close();
                        self->read();
                      });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  const MetricsServer::Source& status_;
};

}  // namespace

struct MetricsServer::Impl {
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  Source status;
  std::thread thread;

  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted) return;  // closing
      if (!ec)
        std::make_shared<Session>(std::move(socket), status)->start();
      else
        spdlog::warn("metrics: accept failed: {}", ec.message());
      accept();
    });
  }
};

MetricsServer::MetricsServer(const std::string& host, int port, Source status)
    : impl_(std::make_unique<Impl>()) {
  impl_->status = std::move(status);
  beast::error_code ec;
  const auto address = net::ip::make_address(host, ec);
  if (ec) throw std::runtime_error("metrics: '" + host + "' is not an IP address: " + ec.message());
  const tcp::endpoint at{address, static_cast<unsigned short>(port)};
  auto& a = impl_->acceptor;
  if (a.open(at.protocol(), ec); !ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(at, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    throw std::runtime_error("metrics: cannot listen on " + host + ":" + std::to_string(port) +
                             ": " + ec.message());
  }
  impl_->accept();
  impl_->thread = std::thread([this] {
    try {
      impl_->ioc.run();
    } catch (const std::exception& e) {
      spdlog::error("metrics server stopped: {}", e.what());
    }
  });
}

MetricsServer::~MetricsServer() {
  impl_->ioc.stop();
  impl_->thread.join();
}

int MetricsServer::port() const {
  return impl_->acceptor.local_endpoint().port();
}

}  // namespace spotlight::head
