#include <catch2/catch.hpp>

#include "sim/event_queue.h"
#include "sim/stats.h"

using tellus::sim::Event;
using tellus::sim::EventKind;
using tellus::sim::EventQueue;

namespace {
Event at(double time, int32_t tag) {
  Event event;
  event.time = time;
  event.kind = EventKind::kTaskComputeDone;
  event.task = tag;
  return event;
}
}  // namespace

TEST_CASE("events come out in time order", "[unit][sim]") {
  EventQueue queue;
  for (double t : {5.0, 1.0, 3.0, 0.5, 4.0}) queue.push(at(t, static_cast<int32_t>(t * 10)));
  std::vector<double> times;
  while (!queue.empty()) times.push_back(queue.pop().time);
  CHECK(times == std::vector<double>{0.5, 1.0, 3.0, 4.0, 5.0});
}

TEST_CASE("events at the same instant come out in push order", "[unit][sim]") {
  EventQueue queue;
  for (int32_t tag = 0; tag < 50; ++tag) queue.push(at(tag % 2 == 0 ? 2.0 : 1.0, tag));
  std::vector<int32_t> tags;
  while (!queue.empty()) tags.push_back(queue.pop().task);
  REQUIRE(tags.size() == 50);
  // All odd tags (time 1) first, each group ascending: FIFO among equal times.
  for (size_t i = 0; i < 25; ++i) CHECK(tags[i] == static_cast<int32_t>(2 * i + 1));
  for (size_t i = 0; i < 25; ++i) CHECK(tags[25 + i] == static_cast<int32_t>(2 * i));
}

TEST_CASE("streaming statistics: exact mean, quantiles within half a bin", "[unit][sim]") {
  tellus::sim::StreamingStats stats;
  for (int i = 1; i <= 1000; ++i) stats.add(i);
  CHECK(stats.count() == 1000);
  CHECK(stats.mean() == Approx(500.5));
  CHECK(stats.min() == 1);
  CHECK(stats.max() == 1000);
  CHECK(stats.quantile(0.5) == Approx(500).epsilon(0.005));
  CHECK(stats.quantile(0.95) == Approx(950).epsilon(0.005));
  CHECK(stats.quantile(1.0) == Approx(1000).epsilon(0.005));
  tellus::sim::StreamingStats zeros;
  zeros.add(0);
  zeros.add(0);
  zeros.add(10);
  CHECK(zeros.quantile(0.5) == 0);
  CHECK(tellus::sim::StreamingStats().quantile(0.5) == 0);
}
