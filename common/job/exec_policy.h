#pragma once
// The `exec` policy across sites: a site's config::ExecConfig travels as pb::ExecPolicy (in its
// published SiteInfo, and from a worker to its executor), and a job using exec is checked at
// submission against every site it runs at (docs/jobs.md, "exec").

#include <map>
#include <string>

#include "config/config.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::job {

pb::ExecPolicy toProto(const config::ExecConfig& exec);
config::ExecConfig fromProto(const pb::ExecPolicy& policy);

// Ok when every exec stage's command is allowed at every site in `siteExec` (the sites the
// job runs at: stealing may move any task to any of them). Otherwise kInvalidArgument with the
// first refusal on one line: "stage 'wait': exec at site eu-west: exec is disabled at this
// site (exec.enabled: false in its config)".
Status checkJobExec(const pb::JobSpec& spec, const std::map<std::string, config::ExecConfig>& siteExec);

}  // namespace tellus::job
