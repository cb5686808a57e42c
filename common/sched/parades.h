#pragma once
// Parades: parameterized delay scheduling with work stealing (HOUTU Alg. 2, §4.3).
// Called by a job manager for each of its containers with free capacity (jobcore::JobCore does
// so on every step). Pure: waiting times are computed by the caller from its clock
// (wait = now - enqueue time) and passed in.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tellus::sched {

struct ParadesParams {
  double tau = 0.5;    // τ: a task may go rack-local after τ·p waiting, anywhere after 2τ·p
  double delta = 0.8;  // δ: a non-local launch needs an almost idle container (free >= 1-δ)
};

struct WaitingTask {
  // The caller's name for it, handed back in TaskLaunch (a number: a step builds this view of
  // hundreds of tasks, and labels cost an allocation and a parse each).
  uint64_t key = 0;
  // Views of names the caller keeps alive while it asks: a step views hundreds of tasks, and a
  // copy of each name cost an allocation.
  std::vector<std::string_view> preferredNodes;  // hosts holding its input (node-local)
  // Next locality level. Tellus has no rack information: the JM passes its site's name, so
  // "rack-local" means site-local (the input is at this site, on another host).
  std::vector<std::string_view> preferredRacks;
  double waitS = 0;        // how long it has been waiting (t.wait)
  double processingS = 0;  // estimated processing time (t.p), e.g. stage mean of finished tasks
  double resource = 0;     // fraction of one container it needs (t.r), in (0,1]
};

// A container that reported its free capacity.
struct ContainerUpdate {
  std::string containerId;
  std::string node;
  std::string rack;
  double free = 0;  // free fraction of the container, [0,1]
};

enum class Locality { kNodeLocal, kRackLocal, kAny };

struct TaskLaunch {
  uint64_t key = 0;  // WaitingTask::key
  Locality locality = Locality::kNodeLocal;
};

struct ParadesDecision {
  std::vector<TaskLaunch> launches;  // in launch order, all on update.containerId
  double freeAfter = 0;              // container free fraction after the launches
  // No task was waiting: the JM should ask its siblings to steal work for this container.
  bool steal = false;
};

// Packs tasks onto the container while it has free capacity: first node-local tasks, then
// rack-local tasks that waited >= τ·p, then any task that waited >= 2τ·p if the container is
// at least (1-δ) free. Every launched task fits (resource <= free). Among tasks of one level
// the longest-waiting goes first (ties: input order). Deterministic.
ParadesDecision paradesOnUpdate(std::span<const WaitingTask> waiting, const ContainerUpdate& update,
                                const ParadesParams& params);

// Whether a container with `free` capacity (a fraction) can take anything: more than float
// noise. With none, paradesOnUpdate launches nothing.
bool hasRoom(double free);

// Puts `waiting` in the order paradesOnUpdate considers it (longest waiting first, ties in
// input order), so that calls for many containers in a row do not each sort it.
void sortForParades(std::span<WaitingTask> waiting);

// Takes the task `key` (launched) out of `waiting`, the others keeping their order: the span
// shrinks by one and the entry moves just past its end, for the caller to reuse.
void dropLaunched(std::span<WaitingTask>& waiting, uint64_t key);

}  // namespace tellus::sched
