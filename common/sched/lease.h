#pragma once
// Awan's resource leases (paper 004 §III-C/D, §IV): how long a container will stay busy with
// the task put on it, how good that guess turned out, and the minimum locality level. Pure:
// times are the caller's, in seconds.

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tellus::sched {

struct LeaseParams {
  std::size_t historyK = 10;  // k: the newest compute records of similar tasks kept per node
  double slackS = 0.5;        // δ: added to every estimate against an optimistic guess
  // A task no similar task was ever seen finishing is leased for this long (the paper's
  // "predefined amount of time").
  double defaultS = 30.0;
};

// Compute times of finished tasks by similarity class (Tellus: the job's stage, whose tasks run
// one operator over inputs of one size class) and node, the newest k per node.
class ComputeHistory {
 public:
  explicit ComputeHistory(std::size_t k) : k_(k == 0 ? 1 : k) {}
  void record(const std::string& similarity, const std::string& node, double computeS);
  // C̄_k: the mean of `node`'s newest k records of the class; without any at that node, of
  // every node's (the paper's "performance of running a similar task on a different node");
  // nullopt when the class was never seen.
  std::optional<double> meanS(const std::string& similarity, const std::string& node) const;
  void forget(const std::string& similarity) { records_.erase(similarity); }

 private:
  std::size_t k_;
  std::map<std::string, std::map<std::string, std::deque<double>>> records_;  // class -> node -> newest last
};

// Eq. 1: L_a = datasize / B_{b,a} + C̄_k + δ, the transfer summed over the sites the input
// comes from (`remoteBytes`, bytes; `inboundBytesPerS`, measured rates into the task's site).
// With no compute history, or an input from a site whose rate was never measured, the lease
// is params.defaultS: nothing better is known.
double leaseEstimateS(const std::map<std::string, double>& remoteBytes,
                      const std::map<std::string, double>& inboundBytesPerS, std::optional<double> computeMeanS,
                      const LeaseParams& params);

// Eq. 3: 1 - |runtime - prediction| / runtime, floored at 0 (a prediction off by more than the
// runtime is simply wrong); nullopt for a runtime of 0, which no accuracy describes.
std::optional<double> leaseAccuracy(double runtimeS, double predictionS);

// Eq. 2: the fraction of `tasks` that can run locally, i.e. at bandwidth >= bMin (1 for none).
double localityLevel(const std::vector<double>& taskBandwidths, double bMin);

// Minimum locality level (§IV): a stage whose locality level is below `minLevel` is skipped —
// not launched — for at most `maxSkipS` (the paper's bounded skip: 10 s), then admitted
// whatever its locality. Times are per key (a stage); a key admitted forgets its skips.
class LocalityGate {
 public:
  LocalityGate(double minLevel, double maxSkipS) : minLevel_(minLevel), maxSkipS_(maxSkipS) {}
  // Whether the key may launch now; the first refusal starts its skip window.
  bool admit(std::size_t key, double level, double now);
  // When a skipped key is admitted anyway (nullopt: none is skipped).
  std::optional<double> nextDeadline() const;
  double minLevel() const { return minLevel_; }

 private:
  double minLevel_;
  double maxSkipS_;
  std::map<std::size_t, double> skippedSince_;
};

// Where a task waiting in a queue starts: containers free at `freeAt` (absolute times, any
// order), each running one queued task per `taskS` once free; the task is `position` (0-based)
// in that queue. The wait a lease-aware scheduler weighs against going remote.
double queuedStartAt(std::vector<double> freeAt, std::size_t position, double taskS);

}  // namespace tellus::sched
