#pragma once
// Integral max-flow (Dinic) used by the exact combinatorial steps of the library (controlled
// matrix rounding, max-min feasibility). Capacities are integers, so the flow is integral.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tellus::sched {

class MaxFlow {
 public:
  explicit MaxFlow(std::size_t nodes) : adjacency_(nodes) {}

  // Returns the edge id (for flowOn).
  std::size_t addEdge(std::size_t from, std::size_t to, std::int64_t capacity);
  std::int64_t run(std::size_t source, std::size_t sink);
  std::int64_t flowOn(std::size_t edge) const { return edges_[edge ^ 1].capacity; }
  // After run(): whether `node` is on the source side of a minimum cut (reachable from the
  // source in the residual graph), e.g. to name the saturated part of an infeasible network.
  bool onSourceSide(std::size_t node) const { return node < level_.size() && level_[node] >= 0; }
  // Raises an edge's capacity; a later run() continues from the current flow.
  void addCapacity(std::size_t edge, std::int64_t delta) { edges_[edge].capacity += delta; }

 private:
  struct Edge {
    std::size_t to;
    std::int64_t capacity;  // residual
  };
  bool buildLevels(std::size_t source, std::size_t sink);
  std::int64_t push(std::size_t node, std::size_t sink, std::int64_t limit);

  std::vector<Edge> edges_;
  std::vector<std::vector<std::size_t>> adjacency_;
  std::vector<int> level_;
  std::vector<std::size_t> next_;
};

}  // namespace tellus::sched
