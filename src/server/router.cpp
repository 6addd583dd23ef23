#include "server/router.hpp"

#include <exception>
#include <string_view>

#include "server/security.hpp"

namespace gf::server {
namespace {

std::vector<std::string_view> split_path(std::string_view p) {
  std::vector<std::string_view> out;
  if (!p.empty() && p.front() == '/') p.remove_prefix(1);
  while (true) {
    const auto slash = p.find('/');
    out.push_back(p.substr(0, slash));
    if (slash == std::string_view::npos) break;
    p.remove_prefix(slash + 1);
  }
  return out;
}

bool is_param(std::string_view seg) { return seg.size() > 2 && seg.front() == '{' && seg.back() == '}'; }

}  // namespace

bool wants_fresh(const Request& req) {
  auto it = req.query.find("fresh");
  if (it == req.query.end()) return false;
  return it->second == "1" || it->second == "true" || it->second == "yes" || it->second.empty();
}

bool runs_blocking(Exec e, const Request& req) {
  return e == Exec::Blocking || (e == Exec::BlockingWhenFresh && wants_fresh(req));
}

void Router::add(Method method, std::string pattern, Access access, Exec exec,
                 std::function<Response(const Request&)> handler) {
  Route r;
  r.method = method;
  r.access = access;
  r.exec = exec;
  r.handler = std::move(handler);
  for (auto s : split_path(pattern)) r.segments.emplace_back(s);
  r.pattern = std::move(pattern);
  routes_.push_back(std::move(r));
}

bool Router::matches(const Route& r, const std::vector<std::string_view>& segs, Request* fill) {
  if (r.segments.size() != segs.size()) return false;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    const std::string& want = r.segments[i];
    if (is_param(want)) {
      if (segs[i].empty()) return false;
    } else if (want != segs[i]) {
      return false;
    }
  }
  if (fill) {
    fill->params.clear();
    for (std::size_t i = 0; i < segs.size(); ++i)
      if (is_param(r.segments[i]))
        fill->params[r.segments[i].substr(1, r.segments[i].size() - 2)] = std::string(segs[i]);
  }
  return true;
}

Router::Match Router::match(Request& req) const {
  const auto segs = split_path(req.path);
  Match m;
  // Literal routes win over parameter routes of the same shape: try routes without parameters first.
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& r : routes_) {
      bool has_param = false;
      for (const auto& s : r.segments) has_param = has_param || is_param(s);
      if (has_param != (pass == 1)) continue;
      if (!matches(r, segs, nullptr)) continue;
      const bool method_ok = r.method == req.method || (req.method == Method::Head && r.method == Method::Get);
      if (method_ok) {
        matches(r, segs, &req);
        m.route = &r;
        return m;
      }
      m.status = 405;
      if (m.allow.find(to_string(r.method)) == std::string::npos) {
        if (!m.allow.empty()) m.allow += ", ";
        m.allow += to_string(r.method);
        if (r.method == Method::Get) m.allow += ", HEAD";
      }
    }
  }
  return m;
}

Decision decide(const Router& router, Request& req, std::string_view token, bool auth_read,
                std::string_view read_token) {
  Decision d;
  const auto m = router.match(req);
  if (!m.route) {
    if (m.status == 405) {
      Response r = error_response(
          405, "method_not_allowed",
          std::string(to_string(req.method)) + " is not allowed on " + req.path + " (allowed: " + m.allow + ")");
      r.headers.emplace_back("Allow", m.allow);
      d.answer = std::move(r);
    } else {
      d.answer = error_response(404, "not_found", "no such endpoint: " + req.path + " (see /api/openapi.json)");
    }
    return d;
  }
  req.writer = !req.authorization.empty() && bearer_ok(req.authorization, token);
  if (m.route->access == Access::Write || auth_read) {
    // A write needs the agent's token; a read (with auth_read) either token that reads.
    const bool ok =
        m.route->access == Access::Write
            ? req.writer
            : reads_with(token, read_token, [&](std::string_view t) { return bearer_ok(req.authorization, t); });
    if (!ok) {
      Response r = error_response(401, "unauthorized",
                                  req.authorization.empty()
                                      ? "this request needs Authorization: Bearer <token> (the agent's token file)"
                                      : "the bearer token is not the agent's");
      r.headers.emplace_back("WWW-Authenticate", "Bearer");
      d.answer = std::move(r);
      return d;
    }
  }
  d.route = m.route;
  return d;
}

Response invoke(const Route& route, const Request& req) noexcept {
  try {
    return route.handler(req);
  } catch (const std::exception& e) {
    try {
      return error_response(500, "internal_error", e.what());
    } catch (...) {
    }
  } catch (...) {
  }
  Response r;
  r.status = 500;
  return r;
}

}  // namespace gf::server
