#include "server/static_files.hpp"

#include <fstream>
#include <iterator>
#include <memory>

#include "server/security.hpp"

namespace gf::server {

Response static_file_response(const std::string& static_dir, const Request& req) {
  if (req.method != Method::Get && req.method != Method::Head) {
    Response r = error_response(405, "method_not_allowed", "static files are GET only");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  if (static_dir.empty()) {
    return error_response(
        404, "not_found",
        req.path == "/"
            ? "no dashboard here: build it (make web) or start with --static DIR; the API is at /api/openapi.json"
            : "no such file: " + req.path);
  }
  auto file = resolve_static(static_dir, req.path);
  if (!file) return error_response(404, "not_found", "no such file: " + req.path);
  std::ifstream in(*file, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return error_response(500, "io_error", "cannot read " + req.path);
  Response r =
      shared_response(200, std::string(content_type_for(*file)), std::make_shared<const std::string>(std::move(data)));
  // Vite names assets by content hash: they never change. index.html is checked every time.
  r.headers.emplace_back("Cache-Control",
                         req.path.rfind("/assets/", 0) == 0 ? "public, max-age=31536000, immutable" : "no-cache");
  r.headers.emplace_back("Content-Security-Policy", std::string(kDashboardCsp));
  return r;
}

}  // namespace gf::server
