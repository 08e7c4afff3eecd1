#include "node/notice_poller.h"

#include <spdlog/spdlog.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <ctime>
#include <mutex>
#include <condition_variable>
#include <stdexcept>

namespace spotlight::node {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

NoticeUrl parse_notice_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) throw std::invalid_argument("notice URL must start with http://: " + url);
  std::string rest = url.substr(scheme.size());
  NoticeUrl u;
  auto slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  u.target = slash == std::string::npos ? "/" : rest.substr(slash);
  auto colon = hostport.rfind(':');
  u.host = hostport.substr(0, colon);
  if (colon != std::string::npos) u.port = hostport.substr(colon + 1);
  if (u.host.empty() || u.port.empty()) throw std::invalid_argument("notice URL has no host: " + url);
  return u;
}

std::optional<int64_t> read_notice(int status, const std::string& body,
                                   std::chrono::system_clock::time_point now) {
  if (status != 200) return std::nullopt;
  std::string b;
  for (char c : body) {
    if (!std::isspace(static_cast<unsigned char>(c))) b.push_back(static_cast<char>(std::tolower(c)));
  }
  if (b.empty() || b == "false") return std::nullopt;
  // AWS: {"action":"terminate","time":"2026-11-30T01:40:00Z"}
  auto t = body.find("\"time\"");
  if (t != std::string::npos) {
    auto q = body.find('"', body.find(':', t) + 1);
    std::tm tm{};
    if (q != std::string::npos && strptime(body.c_str() + q + 1, "%Y-%m-%dT%H:%M:%S", &tm)) {
      auto at = std::chrono::system_clock::from_time_t(timegm(&tm));
      return std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(at - now).count());
    }
  }
  return 0;
}

NoticePoller::NoticePoller(const std::string& url, std::chrono::milliseconds interval, Callback on_notice)
    : url_(parse_notice_url(url)), interval_(interval), on_notice_(std::move(on_notice)) {
  thread_ = std::thread([this] { loop(); });
}

NoticePoller::~NoticePoller() {
  stop_ = true;
  thread_.join();
}

void NoticePoller::loop() {
  boost::asio::io_context ioc;
  while (!stop_.load()) {
    try {
      tcp::resolver resolver(ioc);
      beast::tcp_stream stream(ioc);
      stream.expires_after(std::chrono::seconds(2));
      stream.connect(resolver.resolve(url_.host, url_.port));
      http::request<http::empty_body> req{http::verb::get, url_.target, 11};
      req.set(http::field::host, url_.host);
      http::write(stream, req);
      beast::flat_buffer buf;
      http::response<http::string_body> res;
      http::read(stream, buf, res);
      beast::error_code ec;
      stream.socket().shutdown(tcp::socket::shutdown_both, ec);
      auto left = read_notice(res.result_int(), res.body(), std::chrono::system_clock::now());
      if (left) {
        spdlog::warn("notice from {}: {}", url_.host, res.body());
        on_notice_(*left > 0 ? std::optional(std::chrono::milliseconds(*left)) : std::nullopt);
        return;  // one notice is all a machine gets
      }
    } catch (const std::exception& e) {
      spdlog::debug("notice poll failed: {}", e.what());  // the endpoint may come and go
    }
    for (auto waited = std::chrono::milliseconds(0); waited < interval_ && !stop_.load();
         waited += std::chrono::milliseconds(10)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the poll period, stoppable
    }
  }
}

}  // namespace spotlight::node
