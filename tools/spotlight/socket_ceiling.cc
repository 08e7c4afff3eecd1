#include "tools/spotlight/socket_ceiling.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace spotlight::bench {
namespace {

constexpr size_t kMessage = 32;  // zmq_roundtrips' payload

int check(int rc, const char* what) {
  if (rc < 0) throw std::system_error(errno, std::generic_category(), what);
  return rc;
}

// Closes on every path, so that a failed run leaks no descriptor.
struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() { ::close(fd); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

void no_delay(int fd) {
  int one = 1;
  check(::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), "setsockopt(TCP_NODELAY)");
}

// Whole messages only: TCP may hand a message over in pieces. False when the
// peer closed.
bool read_message(int fd, char* buf) {
  size_t got = 0;
  while (got < kMessage) {
    ssize_t r = ::read(fd, buf + got, kMessage - got);
    if (r == 0) return false;
    if (r < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "read");
    }
    got += static_cast<size_t>(r);
  }
  return true;
}

void write_message(int fd, const char* buf) {
  size_t put = 0;
  while (put < kMessage) {
    ssize_t r = ::write(fd, buf + put, kMessage - put);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "write");
    }
    put += static_cast<size_t>(r);
  }
}

}  // namespace

double tcp_roundtrips(int n) {
  Fd listener(check(::socket(AF_INET, SOCK_STREAM, 0), "socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  check(::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), len), "bind");
  check(::listen(listener.fd, 1), "listen");
  check(::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len), "getsockname");

  Fd client(check(::socket(AF_INET, SOCK_STREAM, 0), "socket"));
  check(::connect(client.fd, reinterpret_cast<sockaddr*>(&addr), len), "connect");
  no_delay(client.fd);
  Fd server(check(::accept(listener.fd, nullptr, nullptr), "accept"));
  no_delay(server.fd);

  std::exception_ptr echo_failed;
  std::thread echo([&] {
    try {
      char buf[kMessage];
      while (read_message(server.fd, buf)) write_message(server.fd, buf);
    } catch (...) {
      echo_failed = std::current_exception();
    }
  });
  char buf[kMessage] = {};
  std::exception_ptr failed;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    for (int i = 0; i < n; ++i) {
      write_message(client.fd, buf);
      if (!read_message(client.fd, buf)) throw std::runtime_error("the echo thread closed early");
    }
  } catch (...) {
    failed = std::current_exception();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::shutdown(client.fd, SHUT_WR);  // the echo thread reads end-of-stream and returns
  echo.join();
  if (failed) std::rethrow_exception(failed);
  if (echo_failed) std::rethrow_exception(echo_failed);
  return n / seconds;
}

}  // namespace spotlight::bench
