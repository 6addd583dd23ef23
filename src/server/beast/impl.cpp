// Asio and Beast, compiled once (BOOST_ASIO_SEPARATE_COMPILATION, BOOST_BEAST_SEPARATE_COMPILATION,
// which CMake's gf_beast target gives every file that uses them): each file that uses them then compiles
// only its own templates, not the libraries' non-template parts again.
#include <utility>  // before asio (GCC 12, see STACK.md)

#include <boost/asio/impl/src.hpp>
#include <boost/beast/src.hpp>
