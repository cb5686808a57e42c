#pragma once
// The wide-area network of the simulator: every site has an uplink and a downlink, the core
// is congestion-free (Tetrium §2.1, Iridium), and a site's uplink (downlink) is shared
// equally among the flows it currently sends (receives). A flow from x to y therefore moves
// at   min(up_x / flowsOut_x, down_y / flowsIn_y)   bytes/s, re-evaluated whenever a flow
// starts or ends at x or y, or a bandwidth changes.
//
// Flows between the same pair of sites always have the same rate, so they are kept in one
// bucket that advances a shared "bytes served per flow" counter (processor sharing with a
// virtual clock). A flow start/end costs O(active pairs touching its two sites · log pairs),
// independent of the number of flows, which is what lets one core replay a day of trace.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

namespace tellus::sim {

// What a flow carries, returned to the simulator when the flow completes.
struct FlowTag {
  int64_t job = -1;
  int32_t stage = -1;  // -1: a job-level bulk transfer (centralized pre-aggregation)
  int32_t task = -1;
  uint32_t attempt = 0;
};

struct CompletedFlow {
  FlowTag tag;
  int source = -1;
  int destination = -1;
  double bytes = 0;
};

using FlowId = uint64_t;

class FairShareNetwork {
 public:
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  // Bandwidths in bytes per second, one entry per site; both vectors have the same size.
  FairShareNetwork(std::vector<double> uplinkBytesPerSecond, std::vector<double> downlinkBytesPerSecond);

  int siteCount() const { return static_cast<int>(uplink_.size()); }

  // Starts a flow of `bytes` (> 0) from `source` to `destination` (different sites) at `now`.
  FlowId addFlow(double now, int source, int destination, double bytes, FlowTag tag);
  // Stops a flow early (its task was killed); returns the bytes it had delivered.
  double cancelFlow(double now, FlowId id);
  // The source site of a live flow (-1 when it is not live).
  int sourceOf(FlowId id) const;
  // Changes a site's bandwidths from `now` on; flows in progress keep what they delivered.
  void setBandwidth(double now, int site, double uplinkBytesPerSecond, double downlinkBytesPerSecond);

  // When the next flow finishes, kNever when no flow is active.
  double nextCompletionTime() const;
  // Completes every flow that has delivered all its bytes by `now` (call with
  // now == nextCompletionTime()); appends them to `completed` in a deterministic order.
  void completeFlowsAt(double now, std::vector<CompletedFlow>& completed);

  size_t activeFlowCount() const { return live_.size(); }
  // The rate (bytes/s) a flow from source to destination gets right now (0 when none runs).
  double currentRate(int source, int destination) const;
  int flowsOut(int site) const { return flowsOut_[static_cast<size_t>(site)]; }
  int flowsIn(int site) const { return flowsIn_[static_cast<size_t>(site)]; }

 private:
  struct Entry {
    double finishServed;  // the bucket's `served` value at which this flow is done
    FlowId id;
  };
  struct EntryLater {
    bool operator()(const Entry& a, const Entry& b) const {
      if (a.finishServed != b.finishServed) return a.finishServed > b.finishServed;
      return a.id > b.id;
    }
  };
  struct Bucket {
    int source = 0;
    int destination = 0;
    int liveFlows = 0;
    double served = 0;      // bytes every flow of this pair has received so far
    double lastUpdate = 0;
    double ratePerFlow = 0;
    double nextFinish = kNever;
    int heapPosition = -1;  // in pairHeap_, -1 when not there
    int outPosition = -1;   // in activeOut_[source]
    int inPosition = -1;    // in activeIn_[destination]
    std::vector<Entry> entries;  // a min-heap by finishServed
  };
  struct LiveFlow {
    int bucket;
    double bytes;
    FlowTag tag;
  };

  int bucketIndex(int source, int destination) const { return source * siteCount() + destination; }
  void advance(Bucket& bucket, double now);
  void advanceSites(int source, int destination, double now);
  void refreshSites(int source, int destination);
  void refreshBucket(int index);
  void dropDeadHeads(Bucket& bucket);
  void activate(int index);
  void deactivateIfIdle(int index);

  // The indexed min-heap of active pairs by their next finish time.
  bool pairBefore(int a, int b) const;
  void heapSiftUp(int position);
  void heapSiftDown(int position);
  void heapUpdate(int index);
  void heapRemove(int index);

  std::vector<double> uplink_;
  std::vector<double> downlink_;
  std::vector<int> flowsOut_;
  std::vector<int> flowsIn_;
  std::vector<Bucket> buckets_;
  std::vector<std::vector<int>> activeOut_;
  std::vector<std::vector<int>> activeIn_;
  std::vector<int> pairHeap_;
  std::unordered_map<FlowId, LiveFlow> live_;
  FlowId nextFlowId_ = 0;
};

}  // namespace tellus::sim
