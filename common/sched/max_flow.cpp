#include "sched/max_flow.h"

#include <algorithm>
#include <limits>
#include <queue>

namespace tellus::sched {

std::size_t MaxFlow::addEdge(std::size_t from, std::size_t to, std::int64_t capacity) {
  const std::size_t id = edges_.size();
  edges_.push_back(Edge{to, capacity});
  adjacency_[from].push_back(id);
  edges_.push_back(Edge{from, 0});
  adjacency_[to].push_back(id + 1);
  return id;
}

bool MaxFlow::buildLevels(std::size_t source, std::size_t sink) {
  level_.assign(adjacency_.size(), -1);
  std::queue<std::size_t> frontier;
  level_[source] = 0;
  frontier.push(source);
  while (!frontier.empty()) {
    const std::size_t node = frontier.front();
    frontier.pop();
    for (std::size_t id : adjacency_[node]) {
      const Edge& e = edges_[id];
      if (e.capacity > 0 && level_[e.to] < 0) {
        level_[e.to] = level_[node] + 1;
        frontier.push(e.to);
      }
    }
  }
  return level_[sink] >= 0;
}

std::int64_t MaxFlow::push(std::size_t node, std::size_t sink, std::int64_t limit) {
  if (node == sink) return limit;
  for (std::size_t& i = next_[node]; i < adjacency_[node].size(); ++i) {
    const std::size_t id = adjacency_[node][i];
    Edge& e = edges_[id];
    if (e.capacity <= 0 || level_[e.to] != level_[node] + 1) continue;
    const std::int64_t pushed = push(e.to, sink, std::min(limit, e.capacity));
    if (pushed > 0) {
      e.capacity -= pushed;
      edges_[id ^ 1].capacity += pushed;
      return pushed;
    }
  }
  return 0;
}

std::int64_t MaxFlow::run(std::size_t source, std::size_t sink) {
  std::int64_t total = 0;
  while (buildLevels(source, sink)) {
    next_.assign(adjacency_.size(), 0);
    while (const std::int64_t pushed = push(source, sink, std::numeric_limits<std::int64_t>::max())) {
      total += pushed;
    }
  }
  return total;
}

}  // namespace tellus::sched
