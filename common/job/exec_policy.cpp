#include "job/exec_policy.h"

#include "data/operator.h"

namespace tellus::job {

pb::ExecPolicy toProto(const config::ExecConfig& exec) {
  pb::ExecPolicy p;
  p.set_enabled(exec.enabled);
  for (const auto& command : exec.allowed_commands) p.add_allowed_commands(command);
  p.set_run_as_user(exec.run_as_user);
  p.set_cpu_s(exec.rlimits.cpu_s);
  p.set_memory_mb(exec.rlimits.memory_mb);
  p.set_open_files(exec.rlimits.open_files);
  p.set_processes(exec.rlimits.processes);
  p.set_work_dir(exec.work_dir);
  return p;
}

config::ExecConfig fromProto(const pb::ExecPolicy& p) {
  config::ExecConfig exec;
  exec.enabled = p.enabled();
  exec.allowed_commands.assign(p.allowed_commands().begin(), p.allowed_commands().end());
  exec.run_as_user = p.run_as_user();
  exec.rlimits.cpu_s = p.cpu_s();
  exec.rlimits.memory_mb = p.memory_mb();
  exec.rlimits.open_files = p.open_files();
  exec.rlimits.processes = p.processes();
  exec.work_dir = p.work_dir().empty() ? exec.work_dir : p.work_dir();
  return exec;
}

Status checkJobExec(const pb::JobSpec& spec, const std::map<std::string, config::ExecConfig>& siteExec) {
  for (const auto& stage : spec.stages()) {
    if (stage.op() != "exec") continue;
    const auto cmd = stage.params().find("cmd");
    const std::string command = cmd == stage.params().end() ? std::string() : cmd->second;
    for (const auto& [site, exec] : siteExec) {
      if (auto st = data::checkExecAllowed(exec, command); !st) {
        return st.error().prepend("stage '" + stage.name() + "': exec at site " + site);
      }
    }
  }
  return Status::ok();
}

}  // namespace tellus::job
