// Boost.Asio for the daemon, with C++20 coroutines (awaitable, co_spawn, use_awaitable).
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>: include it
// first. Include this header, never boost/asio.hpp directly.
#pragma once

// Boost 1.74 enables co_await on clang only with libc++'s <experimental/coroutine>; clang with
// libstdc++'s <coroutine> (the fuzz build, scripts/fuzz.sh) has what GCC has.
#if defined(__clang__) && !defined(BOOST_ASIO_HAS_CO_AWAIT) && defined(__cpp_impl_coroutine) && \
    __cpp_impl_coroutine >= 201902L
#define BOOST_ASIO_HAS_CO_AWAIT 1
#endif

// clang-format off
#include <utility>  // before boost/asio.hpp, see above
#include <boost/asio.hpp>
// clang-format on

namespace trainerd::daemon {
namespace asio = boost::asio;
}  // namespace trainerd::daemon
