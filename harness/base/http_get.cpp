#include "harness/http_get.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <sstream>

namespace tellus::harness {

namespace http = boost::beast::http;

HttpResult httpGet(const std::string& hostPort, const std::string& target) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::resolver resolver(io);
  const auto colon = hostPort.rfind(':');
  boost::beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(10));
  stream.connect(resolver.resolve(hostPort.substr(0, colon), hostPort.substr(colon + 1)));
  http::request<http::empty_body> request(http::verb::get, target, 11);
  request.set(http::field::host, hostPort);
  http::write(stream, request);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(stream, buffer, response);
  boost::system::error_code ec;
  stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
  return {response.result_int(), std::string(response[http::field::content_type]), response.body()};
}

double metricSum(const std::string& metrics, const std::string& name, const std::vector<std::string>& labels) {
  double sum = 0;
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    if (line[name.size()] != '{' && line[name.size()] != ' ') continue;  // another metric with this prefix
    bool all = true;
    for (const auto& label : labels) all = all && line.find(label) != std::string::npos;
    if (all) sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

}  // namespace tellus::harness
