#pragma once
// The simulator's clock: a min-heap of timestamped events. Events at the same instant come
// out in the order they were pushed (a sequence number breaks ties), which is what makes a
// run deterministic: no ordering ever depends on heap layout or on pointer values.

#include <cstddef>
#include <cstdint>
#include <queue>
#include <vector>

namespace tellus::sim {

enum class EventKind : uint8_t {
  kJobArrival,      // the next job of the workload arrives
  kTaskComputeDone, // a task's computation ends (its input had arrived)
  kJmWake,          // a job manager's core asked to step again (stage = its site index)
  kClusterChange,   // a resource drop / restore or a spot-VM loss at a site
  kSchedulingRound, // a Tetrium scheduling instance over the free slots
  kOrderRefresh,    // the job order may be recomputed again (PolicyConfig::orderRefreshSeconds)
};

struct Event {
  double time = 0;
  uint64_t sequence = 0;
  EventKind kind = EventKind::kJobArrival;
  int64_t job = -1;
  int32_t stage = -1;
  int32_t task = -1;
  // Tells a stale completion (of a killed and re-queued task attempt) from the live one.
  uint32_t attempt = 0;
};

class EventQueue {
 public:
  void push(Event event);
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.top(); }
  Event pop();

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      if (a.time != b.time) return a.time > b.time;
      return a.sequence > b.sequence;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t nextSequence_ = 0;
};

}  // namespace tellus::sim
