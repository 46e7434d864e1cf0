// Boost.Asio for the daemon, with C++20 coroutines (awaitable, co_spawn, use_awaitable).
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>: include it
// first. Include this header, never boost/asio.hpp directly.
#pragma once

// clang-format off
#include <utility>  // before boost/asio.hpp, see above
#include <boost/asio.hpp>
// clang-format on

namespace trainerd::daemon {
namespace asio = boost::asio;
}  // namespace trainerd::daemon
