#pragma once
// The ZooKeeper layout, in one place (relative to the chroot). See docs/design.md.
// The /jobs part is for jobstate::JobStore alone: everything else reads and writes job state
// through it, so that the layout can change here without touching them. The /sites records
// (not job state) are still written by their owners, the master and the worker.
//
//   /sites/<site>                      persistent, empty: parent of the site's nodes
//   /sites/<site>/live                 ephemeral: SiteInfo, owned by the running master
//   /sites/<site>/datasets/<name>      persistent: SiteDataset (`tellus put`, or configured)
//   /sites/<site>/puts/<upload id>     persistent: PendingPut, a put not committed (yet)
//   /sites/<site>/workers/<id>         ephemeral: WorkerInfo, owned by the live worker
//   /sites/<site>/queue                ephemeral: SiteQueue, owned by the running master
//   /jobs/<id>                         persistent (sequential: job-0000000001)
//   /jobs/<id>/spec                    JobSpec
//   /jobs/<id>/status                  JobStatus
//   /jobs/<id>/epoch                   decimal primary epoch; its version fences stale primaries
//   /jobs/<id>/jms/<site>              ephemeral JmInfo
//   /jobs/<id>/election/n_<token>_<seq> ephemeral sequential (coord::LeaderElection): lowest leads
//   /jobs/<id>/stages/<s>/inputs       StageInputs (dataset stages: one InputRef per task)
//   /jobs/<id>/stages/<s>/taskmap      TaskMap (created when the stage is released; CAS)
//   /jobs/<id>/stages/<s>/parts        empty; its data version is the stage's record version (CAS)
//   /jobs/<id>/stages/<s>/parts/b-<n>  sequential: OutputBatch of finished executions of the stage
//                                      (jobstate/batch_codec.h), written by the worker that ran them
//   /jobs/<id>/running/<s>-<t>         ephemeral RunningTask, owned by the worker running it
//   /jobs/<id>/attempts/<s>-<t>-<n>    one node per executor started (audit: no task runs twice),
//                                      "<worker id> <token>", deleted when the execution is folded into a batch
//   /jobs/<id>/summary                 JobSummary of a compacted job (then only spec, status and dataset stages' inputs remain)
//
// A live site's node is a child of a persistent one because ephemeral nodes cannot have
// children, and `put` datasets must outlive a master restart.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tellus::jobstate {

inline std::string sitesPath() { return "/sites"; }
inline std::string sitePath(const std::string& site) { return "/sites/" + site; }
inline std::string siteLivePath(const std::string& site) { return sitePath(site) + "/live"; }
inline std::string siteDatasetsPath(const std::string& site) { return sitePath(site) + "/datasets"; }
inline std::string siteDatasetPath(const std::string& site, const std::string& dataset) {
  return siteDatasetsPath(site) + "/" + dataset;
}
inline std::string siteQueuePath(const std::string& site) { return sitePath(site) + "/queue"; }
inline std::string siteWorkersPath(const std::string& site) { return sitePath(site) + "/workers"; }
inline std::string siteWorkerPath(const std::string& site, const std::string& worker) {
  return siteWorkersPath(site) + "/" + worker;
}
inline std::string sitePutsPath(const std::string& site) { return sitePath(site) + "/puts"; }
inline std::string sitePutPath(const std::string& site, const std::string& uploadId) {
  return sitePutsPath(site) + "/" + uploadId;
}
inline std::string jobsPath() { return "/jobs"; }
inline std::string jobPrefix() { return "/jobs/job-"; }
inline std::string jobPath(const std::string& id) { return "/jobs/" + id; }
inline std::string specPath(const std::string& id) { return jobPath(id) + "/spec"; }
inline std::string statusPath(const std::string& id) { return jobPath(id) + "/status"; }
inline std::string epochPath(const std::string& id) { return jobPath(id) + "/epoch"; }
inline std::string jmsPath(const std::string& id) { return jobPath(id) + "/jms"; }
inline std::string jmPath(const std::string& id, const std::string& site) { return jmsPath(id) + "/" + site; }
inline std::string electionPath(const std::string& id) { return jobPath(id) + "/election"; }
inline std::string stagesPath(const std::string& id) { return jobPath(id) + "/stages"; }
inline std::string stagePath(const std::string& id, uint32_t s) { return stagesPath(id) + "/" + std::to_string(s); }
inline std::string inputsPath(const std::string& id, uint32_t s) { return stagePath(id, s) + "/inputs"; }
inline std::string taskmapPath(const std::string& id, uint32_t s) { return stagePath(id, s) + "/taskmap"; }
inline std::string partsPath(const std::string& id, uint32_t s) { return stagePath(id, s) + "/parts"; }
// A per-task record node: the layout before batches. Nothing writes one now; one found is
// forged, and removed like any untrusted record.
inline std::string partPath(const std::string& id, uint32_t s, uint32_t t) {
  return partsPath(id, s) + "/" + std::to_string(t);
}
inline constexpr const char* kBatchPrefix = "b-";
inline std::string batchPrefixPath(const std::string& id, uint32_t s) { return partsPath(id, s) + "/" + kBatchPrefix; }
inline std::string summaryPath(const std::string& id) { return jobPath(id) + "/summary"; }
inline std::string attemptsPath(const std::string& id) { return jobPath(id) + "/attempts"; }
// An audit node's data: "<worker id> <token>", the token telling one start of an executor from
// another (JobStore::startAttempt finds its own after a lost reply).
inline std::string auditNodeData(const std::string& workerId, const std::string& token) { return workerId + " " + token; }
inline std::string auditNodeWorker(const std::string& data) { return data.substr(0, data.find(' ')); }
inline std::string runningPath(const std::string& id) { return jobPath(id) + "/running"; }
inline std::string runningTaskName(uint32_t s, uint32_t t) { return std::to_string(s) + "-" + std::to_string(t); }
inline std::string runningTaskPath(const std::string& id, uint32_t s, uint32_t t) {
  return runningPath(id) + "/" + runningTaskName(s, t);
}
// (stage, task) from a running marker's name "<s>-<t>", or from an attempt's "<s>-<t>-<n>";
// nullopt for anything else (a node someone else put there must not crash a daemon).
std::optional<std::pair<uint32_t, uint32_t>> parseTaskName(std::string_view name);
// A job id as it may appear in a path: a name (util/names.h; ids are made by ZooKeeper as
// job-NNNNNNNNNN; anything else from the network is refused).
bool isJobId(std::string_view id);
// Task t from an output node's name "<t>"; nullopt for anything else.
std::optional<uint32_t> parsePartName(std::string_view name);

}  // namespace tellus::jobstate
