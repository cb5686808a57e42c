#include "sim/network.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace tellus::sim {
namespace {

// A flow is complete when its remaining bytes are below this (relative + absolute) slack:
// the virtual clocks are doubles, and a completion must never be missed by rounding.
bool delivered(double finishServed, double served) {
  return finishServed - served <= 1e-9 * std::max(1.0, finishServed) + 1e-6;
}

}  // namespace

FairShareNetwork::FairShareNetwork(std::vector<double> uplinkBytesPerSecond,
                                   std::vector<double> downlinkBytesPerSecond)
    : uplink_(std::move(uplinkBytesPerSecond)), downlink_(std::move(downlinkBytesPerSecond)) {
  assert(uplink_.size() == downlink_.size());
  const size_t n = uplink_.size();
  flowsOut_.assign(n, 0);
  flowsIn_.assign(n, 0);
  activeOut_.resize(n);
  activeIn_.resize(n);
  buckets_.resize(n * n);
  for (size_t s = 0; s < n; ++s) {
    for (size_t d = 0; d < n; ++d) {
      buckets_[s * n + d].source = static_cast<int>(s);
      buckets_[s * n + d].destination = static_cast<int>(d);
    }
  }
}

FlowId FairShareNetwork::addFlow(double now, int source, int destination, double bytes, FlowTag tag) {
  assert(source != destination && bytes > 0);
  advanceSites(source, destination, now);
  const int index = bucketIndex(source, destination);
  Bucket& bucket = buckets_[static_cast<size_t>(index)];
  if (bucket.outPosition < 0) {
    bucket.served = 0;
    bucket.lastUpdate = now;
    activate(index);
  }
  const FlowId id = nextFlowId_++;
  bucket.entries.push_back(Entry{bucket.served + bytes, id});
  std::push_heap(bucket.entries.begin(), bucket.entries.end(), EntryLater{});
  ++bucket.liveFlows;
  ++flowsOut_[static_cast<size_t>(source)];
  ++flowsIn_[static_cast<size_t>(destination)];
  live_.emplace(id, LiveFlow{index, bytes, tag});
  refreshSites(source, destination);
  return id;
}

int FairShareNetwork::sourceOf(FlowId id) const {
  const auto it = live_.find(id);
  return it == live_.end() ? -1 : buckets_[static_cast<size_t>(it->second.bucket)].source;
}

double FairShareNetwork::cancelFlow(double now, FlowId id) {
  const auto it = live_.find(id);
  if (it == live_.end()) return 0;
  const int index = it->second.bucket;
  Bucket& bucket = buckets_[static_cast<size_t>(index)];
  advanceSites(bucket.source, bucket.destination, now);
  // The entry stays in the bucket's heap and is skipped as dead when it reaches the top.
  double finish = 0;
  for (const Entry& entry : bucket.entries) {
    if (entry.id == id) finish = entry.finishServed;
  }
  const double bytesDelivered = std::clamp(it->second.bytes - (finish - bucket.served), 0.0, it->second.bytes);
  live_.erase(it);
  --bucket.liveFlows;
  --flowsOut_[static_cast<size_t>(bucket.source)];
  --flowsIn_[static_cast<size_t>(bucket.destination)];
  const int source = bucket.source;
  const int destination = bucket.destination;
  deactivateIfIdle(index);
  refreshSites(source, destination);
  return bytesDelivered;
}

void FairShareNetwork::setBandwidth(double now, int site, double uplinkBytesPerSecond,
                                    double downlinkBytesPerSecond) {
  advanceSites(site, site, now);
  uplink_[static_cast<size_t>(site)] = uplinkBytesPerSecond;
  downlink_[static_cast<size_t>(site)] = downlinkBytesPerSecond;
  refreshSites(site, site);
}

double FairShareNetwork::nextCompletionTime() const {
  if (pairHeap_.empty()) return kNever;
  return buckets_[static_cast<size_t>(pairHeap_.front())].nextFinish;
}

void FairShareNetwork::completeFlowsAt(double now, std::vector<CompletedFlow>& completed) {
  while (!pairHeap_.empty() && buckets_[static_cast<size_t>(pairHeap_.front())].nextFinish <= now) {
    const int index = pairHeap_.front();
    Bucket& bucket = buckets_[static_cast<size_t>(index)];
    const int source = bucket.source;
    const int destination = bucket.destination;
    advanceSites(source, destination, now);
    dropDeadHeads(bucket);
    assert(!bucket.entries.empty());
    // This pair was due: its first flow is done even if rounding left a sliver of bytes.
    bucket.served = std::max(bucket.served, bucket.entries.front().finishServed);
    while (!bucket.entries.empty() && delivered(bucket.entries.front().finishServed, bucket.served)) {
      std::pop_heap(bucket.entries.begin(), bucket.entries.end(), EntryLater{});
      const FlowId id = bucket.entries.back().id;
      bucket.entries.pop_back();
      const auto it = live_.find(id);
      if (it == live_.end()) continue;  // cancelled earlier
      completed.push_back(CompletedFlow{it->second.tag, source, destination, it->second.bytes});
      live_.erase(it);
      --bucket.liveFlows;
      --flowsOut_[static_cast<size_t>(source)];
      --flowsIn_[static_cast<size_t>(destination)];
    }
    deactivateIfIdle(index);
    refreshSites(source, destination);
  }
}

double FairShareNetwork::currentRate(int source, int destination) const {
  const Bucket& bucket = buckets_[static_cast<size_t>(bucketIndex(source, destination))];
  return bucket.liveFlows > 0 ? bucket.ratePerFlow : 0.0;
}

void FairShareNetwork::advance(Bucket& bucket, double now) {
  if (bucket.liveFlows > 0 && now > bucket.lastUpdate) {
    bucket.served += bucket.ratePerFlow * (now - bucket.lastUpdate);
  }
  bucket.lastUpdate = now;
}

void FairShareNetwork::advanceSites(int source, int destination, double now) {
  for (int index : activeOut_[static_cast<size_t>(source)]) advance(buckets_[static_cast<size_t>(index)], now);
  for (int index : activeIn_[static_cast<size_t>(destination)]) advance(buckets_[static_cast<size_t>(index)], now);
}

void FairShareNetwork::refreshSites(int source, int destination) {
  // refreshBucket never changes list membership, so iterating the lists directly is safe.
  for (int index : activeOut_[static_cast<size_t>(source)]) refreshBucket(index);
  for (int index : activeIn_[static_cast<size_t>(destination)]) refreshBucket(index);
}

void FairShareNetwork::refreshBucket(int index) {
  Bucket& bucket = buckets_[static_cast<size_t>(index)];
  const auto s = static_cast<size_t>(bucket.source);
  const auto d = static_cast<size_t>(bucket.destination);
  bucket.ratePerFlow = std::min(uplink_[s] / std::max(1, flowsOut_[s]), downlink_[d] / std::max(1, flowsIn_[d]));
  dropDeadHeads(bucket);
  if (bucket.entries.empty() || bucket.ratePerFlow <= 0) {
    bucket.nextFinish = kNever;
  } else {
    const double remaining = std::max(0.0, bucket.entries.front().finishServed - bucket.served);
    bucket.nextFinish = bucket.lastUpdate + remaining / bucket.ratePerFlow;
  }
  heapUpdate(index);
}

void FairShareNetwork::dropDeadHeads(Bucket& bucket) {
  while (!bucket.entries.empty() && !live_.contains(bucket.entries.front().id)) {
    std::pop_heap(bucket.entries.begin(), bucket.entries.end(), EntryLater{});
    bucket.entries.pop_back();
  }
}

void FairShareNetwork::activate(int index) {
  Bucket& bucket = buckets_[static_cast<size_t>(index)];
  auto& out = activeOut_[static_cast<size_t>(bucket.source)];
  auto& in = activeIn_[static_cast<size_t>(bucket.destination)];
  bucket.outPosition = static_cast<int>(out.size());
  out.push_back(index);
  bucket.inPosition = static_cast<int>(in.size());
  in.push_back(index);
}

void FairShareNetwork::deactivateIfIdle(int index) {
  Bucket& bucket = buckets_[static_cast<size_t>(index)];
  if (bucket.liveFlows > 0 || bucket.outPosition < 0) return;
  auto removeAt = [this](std::vector<int>& list, int position, bool outgoing) {
    const int moved = list.back();
    list[static_cast<size_t>(position)] = moved;
    list.pop_back();
    if (static_cast<size_t>(position) < list.size()) {
      Bucket& movedBucket = buckets_[static_cast<size_t>(moved)];
      (outgoing ? movedBucket.outPosition : movedBucket.inPosition) = position;
    }
  };
  removeAt(activeOut_[static_cast<size_t>(bucket.source)], bucket.outPosition, true);
  removeAt(activeIn_[static_cast<size_t>(bucket.destination)], bucket.inPosition, false);
  bucket.outPosition = -1;
  bucket.inPosition = -1;
  bucket.entries.clear();
  bucket.served = 0;
  bucket.nextFinish = kNever;
  heapRemove(index);
}

bool FairShareNetwork::pairBefore(int a, int b) const {
  const double fa = buckets_[static_cast<size_t>(a)].nextFinish;
  const double fb = buckets_[static_cast<size_t>(b)].nextFinish;
  if (fa != fb) return fa < fb;
  return a < b;
}

void FairShareNetwork::heapSiftUp(int position) {
  while (position > 0) {
    const int parent = (position - 1) / 2;
    if (!pairBefore(pairHeap_[static_cast<size_t>(position)], pairHeap_[static_cast<size_t>(parent)])) break;
    std::swap(pairHeap_[static_cast<size_t>(position)], pairHeap_[static_cast<size_t>(parent)]);
    buckets_[static_cast<size_t>(pairHeap_[static_cast<size_t>(position)])].heapPosition = position;
    buckets_[static_cast<size_t>(pairHeap_[static_cast<size_t>(parent)])].heapPosition = parent;
    position = parent;
  }
}

void FairShareNetwork::heapSiftDown(int position) {
  const int size = static_cast<int>(pairHeap_.size());
  while (true) {
    const int left = 2 * position + 1;
    const int right = left + 1;
    int best = position;
    if (left < size && pairBefore(pairHeap_[static_cast<size_t>(left)], pairHeap_[static_cast<size_t>(best)])) best = left;
    if (right < size && pairBefore(pairHeap_[static_cast<size_t>(right)], pairHeap_[static_cast<size_t>(best)])) best = right;
    if (best == position) return;
    std::swap(pairHeap_[static_cast<size_t>(position)], pairHeap_[static_cast<size_t>(best)]);
    buckets_[static_cast<size_t>(pairHeap_[static_cast<size_t>(position)])].heapPosition = position;
    buckets_[static_cast<size_t>(pairHeap_[static_cast<size_t>(best)])].heapPosition = best;
    position = best;
  }
}

void FairShareNetwork::heapUpdate(int index) {
  Bucket& bucket = buckets_[static_cast<size_t>(index)];
  if (bucket.nextFinish == kNever) {
    heapRemove(index);
    return;
  }
  if (bucket.heapPosition < 0) {
    bucket.heapPosition = static_cast<int>(pairHeap_.size());
    pairHeap_.push_back(index);
  }
  heapSiftUp(bucket.heapPosition);
  heapSiftDown(bucket.heapPosition);
}

void FairShareNetwork::heapRemove(int index) {
  Bucket& bucket = buckets_[static_cast<size_t>(index)];
  const int position = bucket.heapPosition;
  if (position < 0) return;
  const int last = static_cast<int>(pairHeap_.size()) - 1;
  bucket.heapPosition = -1;
  if (position != last) {
    const int moved = pairHeap_[static_cast<size_t>(last)];
    pairHeap_[static_cast<size_t>(position)] = moved;
    buckets_[static_cast<size_t>(moved)].heapPosition = position;
    pairHeap_.pop_back();
    heapSiftUp(position);
    heapSiftDown(buckets_[static_cast<size_t>(moved)].heapPosition);
  } else {
    pairHeap_.pop_back();
  }
}

}  // namespace tellus::sim
