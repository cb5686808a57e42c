#pragma once
// A stage's output record nodes as a driver reads them (JobStore::outputNode), told to JobCore
// as changes: a new listing costs the nodes that came or went and the tasks they record, not
// the stage's tasks. Pure (the driver does the reads); one per stage.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "jobcore/job_core.h"
#include "tellus.pb.h"

namespace tellus::jobcore {

// One output as a record node holds it.
struct ListedPart {
  pb::PartitionLocation location;
  std::string finishKey;
};

class PartListing {
 public:
  // A new listing of the stage's node names (its watch): nodes it no longer shows are dropped
  // (replaced by lineage, or removed as forged). Returns the names not read yet, to read and add().
  std::vector<std::string> relist(const std::set<std::string>& names);
  // A node read (the listing's name), with the outputs it records.
  void add(const std::string& name, std::map<uint32_t, ListedPart> outputs);
  // Tells the core what changed since the last apply: each task of a node added or dropped is
  // recorded under the node that now takes precedence, or unlisted; then the stage is listed.
  // A task recorded in a batch and also in another node (a per-task one: forged) is the batch's.
  void apply(JobCore& core, uint32_t stage);

  size_t nodes() const { return nodes_.size(); }

 private:
  // The node that records task t now (nullptr: none): batches before other nodes, each by name.
  const std::string* holderOf(uint32_t t) const;

  std::map<std::string, std::map<uint32_t, ListedPart>> nodes_;
  // By task: the names of the nodes recording it (keys of nodes_, which stay put). Usually one.
  std::unordered_map<uint32_t, std::vector<const std::string*>> holders_;
  std::set<uint32_t> changed_;  // tasks whose holders changed since the last apply
};

}  // namespace tellus::jobcore
