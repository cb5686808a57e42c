#include <catch2/catch.hpp>

#include "master/lease_book.h"

using namespace std::chrono_literals;
using tellus::master::LeaseBook;

TEST_CASE("lease book: grants, stated estimates, the maximum, overdue past the grace", "[unit][master]") {
  LeaseBook book(30s, 60s, 10s);
  const auto t0 = LeaseBook::Clock::time_point{} + 1000s;
  const LeaseBook::Key a{"w1", 0}, b{"w1", 1}, c{"w2", 0};
  book.granted(a, t0);
  CHECK(book.endOf(a, t0) == t0 + 30s);
  CHECK(book.endOf(c, t0 + 5s) == t0 + 35s);  // none known: the default from now
  book.stated(b, 2000, t0);
  CHECK(book.endOf(b, t0) == t0 + 2s);
  book.stated(c, 3'600'000, t0);  // an hour asked, the maximum given
  CHECK(book.endOf(c, t0) == t0 + 60s);

  // Overdue means past its end by more than the grace.
  const std::vector<LeaseBook::Key> held{a, b, c};
  CHECK(book.overdue(held, t0 + 12s).empty());
  CHECK(book.overdue(held, t0 + 12001ms) == std::vector<LeaseBook::Key>{b});
  CHECK(book.overdue({a, c}, t0 + 12001ms).empty());  // only containers still held count
  CHECK(book.extend(b, t0 + 13s));  // the first time

  CHECK(book.endOf(b, t0) == t0 + 23s);
  CHECK(book.overdue(held, t0 + 33s).empty());  // exactly the grace past: not yet
  CHECK(book.overdue(held, t0 + 33001ms) == std::vector<LeaseBook::Key>{b});
  CHECK(book.overdue(held, t0 + 41s) == std::vector<LeaseBook::Key>{a, b});
  CHECK_FALSE(book.extend(b, t0 + 41s));  // again: not the first
  book.stated(b, 1000, t0 + 42s);         // restated: still the same grant
  CHECK_FALSE(book.extend(b, t0 + 60s));
  book.granted(b, t0 + 61s);              // granted again: a new lease
  CHECK(book.extend(b, t0 + 100s));

  book.retain({a, c});
  CHECK(book.size() == 2);
  CHECK(book.endOf(b, t0) == t0 + 30s);  // forgotten: the default again
}
