#pragma once
// Router: method + path pattern → handler. Patterns are literal segments and {name} parameters
// ("/api/v1/gpus/{index}"). Each route says whether it changes state (then it needs the bearer token)
// and whether its handler may block (store, fresh driver query) and so must run off the I/O thread.
// Not thread-safe while routes are added; after that, match() may be called from any thread.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "server/http.hpp"

namespace gf::server {

enum class Access { Read, Write };
// Inline: runs on the I/O thread (reads published data only). Blocking: runs on a worker thread.
// BlockingWhenFresh: blocking only when the request asks for a fresh reading (?fresh=1).
enum class Exec { Inline, Blocking, BlockingWhenFresh };

// Whether a request asks for a fresh driver query (?fresh=1|true|yes).
bool wants_fresh(const Request& req);
// Whether this route, for this request, must run off the I/O thread.
bool runs_blocking(Exec e, const Request& req);

struct Route {
  Method method = Method::Get;
  std::string pattern;
  Access access = Access::Read;
  Exec exec = Exec::Inline;
  std::function<Response(const Request&)> handler;
  std::vector<std::string> segments;  // the pattern split on '/'
};

class Router {
 public:
  void add(Method method, std::string pattern, Access access, Exec exec,
           std::function<Response(const Request&)> handler);

  struct Match {
    const Route* route = nullptr;  // null: see status
    unsigned status = 404;         // 404 no such path, 405 path known but not with this method
    std::string allow;             // for 405: the methods the path has ("GET, POST")
  };
  // Finds the route for req.method and req.path and fills req.params.
  Match match(Request& req) const;

  const std::vector<Route>& routes() const noexcept { return routes_; }

 private:
  static bool matches(const Route& r, const std::vector<std::string_view>& segs, Request* fill);
  std::vector<Route> routes_;
};

// What to do with a request: an answer now (404, 405, 401), or the route to run.
struct Decision {
  const Route* route = nullptr;
  std::optional<Response> answer;
};
// Matches the request and checks access: Access::Write routes (and every route with auth_read) need
// "Authorization: Bearer <token>".
// With auth_read, a read also passes with read_token when it is set (the dashboard readers' token,
// which releases nothing).
Decision decide(const Router& router, Request& req, std::string_view token, bool auth_read,
                std::string_view read_token = {});
// Runs the route's handler; an exception becomes a 500 with its message (the server stays up).
Response invoke(const Route& route, const Request& req) noexcept;

}  // namespace gf::server
