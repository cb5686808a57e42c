#pragma once
// The leases on a site's containers (Awan, paper 004 §III-C): until when each held container's
// job expects to need it. A grant starts a lease of the default length; the job's JM restates
// it with its estimate (sched::leaseEstimateS) as it launches; no lease is longer than the
// maximum (the paper's "rejecting a lease request for an unreasonable long time"). A lease
// overdue by more than the grace is the master's to act on: extended by the grace, or taken
// back. Pure: the caller's clock.

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "jobstate/site_queue.h"

namespace tellus::master {

class LeaseBook {
 public:
  using Clock = std::chrono::steady_clock;
  using Key = std::pair<std::string, uint32_t>;  // (worker, slot)

  LeaseBook(std::chrono::milliseconds defaultLease, std::chrono::milliseconds maxLease,
            std::chrono::milliseconds grace)
      : default_(defaultLease), max_(std::min(maxLease, std::chrono::milliseconds(jobstate::kMaxQueueLeaseMs))),
        grace_(grace) {}

  // A container granted: leased for the default length from now.
  void granted(const Key& key, Clock::time_point now) {
    ends_[key] = now + default_;
    extended_.erase(key);
  }
  // Its holder's estimate, `endsInMs` from now (clamped to the maximum).
  void stated(const Key& key, uint64_t endsInMs, Clock::time_point now);
  // When the lease on `key` ends; the default from now for a container with none (a holder
  // the master learnt of from a worker's registration).
  Clock::time_point endOf(const Key& key, Clock::time_point now) const;
  // Of the containers `held`, those whose lease ended more than the grace before now.
  std::vector<Key> overdue(const std::vector<Key>& held, Clock::time_point now) const;
  // Overdue and kept: the lease runs for another grace from now. True the first time since the
  // container was granted (a log line says so once per grant, however often it is restated).
  bool extend(const Key& key, Clock::time_point now);
  // Leases of containers no longer held are dropped (`held` sorted).
  void retain(const std::vector<Key>& held);
  std::size_t size() const { return ends_.size(); }

 private:
  std::chrono::milliseconds default_, max_, grace_;
  std::map<Key, Clock::time_point> ends_;
  std::set<Key> extended_;  // extended since granted
};

}  // namespace tellus::master
