#include "cli.h"

#include <CLI/CLI.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "args.h"
#include "data/dataset.h"
#include "job/spec.h"
#include "jobstate/job_view.h"
#include "net/methods.h"
#include "net/rpc_client.h"
#include "plan/plan.h"
#include "progress.h"
#include "tellus.pb.h"
#include "transfer/chunked.h"

namespace tellus::cli {
namespace {

using std::chrono::milliseconds;

// `put` and `result` move data as pipelined chunk calls on one connection
// (transfer/chunked.h): up to kTransferWindowBytes in flight. Each chunk call has the
// command's --timeout-ms, so that timeout must cover the window at the link's rate (8 MiB:
// 1.7 s at 40 Mbit/s).
constexpr uint32_t kChunkBytes = 1 << 20;
constexpr uint64_t kTransferWindowBytes = 8ULL << 20;

struct Globals {
  std::string master;
  uint32_t timeoutMs = 5000;
  bool json = false;
  // Mutual TLS to the masters (docs/security.md): flags, or TELLUS_TLS_CA/_CERT/_KEY; or
  // --insecure (TELLUS_INSECURE=1) for a plaintext cluster.
  net::TlsConfig tls;
  bool insecure = false;
  std::shared_ptr<net::TlsContext> tlsContext;  // loaded once the command is known
  Terminal terminal;
};

// A failure that ends the command: message and exit code.
struct Failure {
  int code;
  std::string message;
};



std::string toJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  std::string s;
  (void)google::protobuf::util::MessageToJsonString(m, &s, opts);
  return s;
}

class Client {
 public:
  explicit Client(const Globals& g) : g_(g) {}

  net::Endpoint master() const {
    auto ep = net::Endpoint::parse(g_.master);
    if (!ep) throw Failure{2, "--master: " + ep.message()};
    return *ep;
  }

  template <net::RpcMethod M>
  typename M::Response call(const net::Endpoint& to, const typename M::Request& req) const {
    net::ClientOptions options;
    options.tls = g_.tlsContext;
    auto r = net::callBlocking<M>(to, req, milliseconds(g_.timeoutMs), options);
    if (!r) {
      int code = r.error().code == ErrorCode::kInvalidArgument ? 2 : 1;
      throw Failure{code, r.message()};
    }
    return std::move(r).value();
  }

  template <net::RpcMethod M>
  typename M::Response call(const typename M::Request& req) const {
    return call<M>(master(), req);
  }

 private:
  const Globals& g_;
};

// Runs `body` with one client to `to` on a private io_context (one connection, on which the
// transfer's chunk calls are pipelined) and throws its error as a Failure.
void runTransfer(const Globals& g, const net::Endpoint& to,
                 const std::function<boost::asio::awaitable<Status>(net::RpcClient&)>& body) {
  boost::asio::io_context io;
  net::ClientOptions options;
  options.tls = g.tlsContext;
  net::RpcClient client(io.get_executor(), to, options);
  std::optional<Status> outcome;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        outcome.emplace(co_await body(client));
        client.close();  // ends the connection's loops so that run() returns
      },
      [&](std::exception_ptr error) {
        if (error && !outcome) outcome.emplace(makeError(ErrorCode::kInternal, "transfer failed with an exception"));
      });
  io.run();
  if (!outcome || !*outcome) {
    const Status failed = outcome ? *outcome : Status(makeError(ErrorCode::kInternal, "transfer did not finish"));
    throw Failure{failed.code() == ErrorCode::kInvalidArgument ? 2 : 1, failed.message()};
  }
}

transfer::TransferOptions transferOptions(const Globals& g, uint64_t maxTotalBytes) {
  transfer::TransferOptions options;
  options.window = {.chunkBytes = kChunkBytes, .windowBytes = kTransferWindowBytes, .maxTotalBytes = maxTotalBytes};
  options.chunkTimeout = milliseconds(g.timeoutMs);
  return options;
}

void printTasks(const pb::JobStatusResponse& st, std::ostream& out) {
  for (const auto& stage : st.stages()) {
    for (const auto& t : stage.task_placements()) {
      out << "  " << stage.name() << "[" << t.task() << "]  owner " << t.owner_site() << "  output on "
          << (t.worker_id().empty() ? "-" : t.worker_id()) << "  executions " << t.executions() << "\n";
    }
  }
}

// "cost so far: 0.0123 (containers 0.0100, egress 0.0023; 12.345 container-seconds, 4567 bytes across sites)"
std::string costLine(const pb::JobCost& cost) {
  double seconds = 0;
  uint64_t bytes = 0;
  for (const auto& s : cost.sites()) seconds += s.container_seconds();
  for (const auto& p : cost.pairs()) bytes += p.bytes();
  std::string line = fmt::format("cost so far: {:.4f} (containers {:.4f}, egress {:.4f}; {:.3f} container-seconds, {} bytes across sites)",
                                 cost.total(), cost.container_cost(), cost.egress_cost(), seconds, bytes);
  if (cost.unpriced_sites_size() > 0) {
    line += fmt::format("; no prices known for {}", fmt::join(cost.unpriced_sites(), ", "));
  }
  return line;
}

void printStatus(const pb::JobStatusResponse& st, std::ostream& out) {
  const auto& s = st.status();
  // Someone else's job comes without its name, stage names and error (docs/security.md).
  out << s.job_id() << "  " << (s.name().empty() ? "-" : s.name()) << "  " << jobstate::jobStateName(s.state())
      << "  submitted at " << s.submit_site();
  if (!s.owner().empty()) out << " by " << s.owner();
  if (!s.error().empty()) out << "  error: " << s.error();
  out << "\n";
  for (int i = 0; i < st.stages_size(); ++i) {
    const auto& stage = st.stages(i);
    out << "  stage " << (stage.name().empty() ? fmt::format("#{}", i) : stage.name()) << ": " << stage.done() << "/"
        << stage.tasks() << " done";
    if (!stage.released()) out << " (waiting for upstream)";
    for (const auto& site : stage.sites()) {
      out << "  [" << site.site() << " " << site.done() << "/" << site.owned() << "]";
    }
    out << "\n";
  }
  out << "  " << costLine(st.cost()) << "\n";
  for (const auto& jm : st.jms()) {
    out << "  jm " << jm.site() << " " << (jm.role() == pb::JM_PRIMARY ? "primary" : "secondary")
        << " epoch " << jm.epoch() << " on " << jm.worker_id() << " (" << jm.address() << ")  containers "
        << jm.granted() << " (desire " << jm.desire() << ")\n";
  }
}

// How often a watch asks for the job's status (the summary: a few ZooKeeper reads per stage).
constexpr milliseconds kWatchPoll{500};

// Polls the job's status summary until it ends. On a terminal: one bar per stage, redrawn in
// place (progress.h); otherwise a line whenever the progress changes; with --json, the status
// as a JSON line whenever it changes (the last line is the final status).
int waitForJob(const Client& client, const std::string& jobId, const Globals& g, std::ostream& out) {
  pb::JobRequest req;
  req.set_job_id(jobId);
  const auto started = std::chrono::steady_clock::now();
  JobProgress progress;
  std::string last;
  size_t drawn = 0;
  for (;;) {
    auto st = client.call<rpc::Master::Status>(req);
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    progress.add(now, st);
    const bool over = jobstate::isTerminal(st.status().state());
    if (g.json) {
      std::string line = toJson(st);
      if (line != last) out << line << std::endl;
      last = std::move(line);
    } else if (g.terminal.tty) {
      auto lines = progress.render(st, now, g.terminal.width);
      out << redrawFrame(lines, drawn) << std::flush;
      drawn = lines.size();
    } else {
      std::ostringstream line;
      line << jobstate::jobStateName(st.status().state());
      for (const auto& stage : st.stages()) line << "  " << stage.name() << " " << stage.done() << "/" << stage.tasks();
      if (line.str() != last) out << "[" << jobId << "] " << line.str() << std::endl;
      last = line.str();
    }
    if (over) {
      if (!g.json) printStatus(st, out);
      return st.status().state() == pb::JOB_SUCCEEDED ? 0 : 1;
    }
    // A poll interval, not a race fix: the CLI is a human-facing watcher.
    std::this_thread::sleep_for(kWatchPoll);
  }
}

int cmdSubmit(const Globals& g, const std::string& path, bool wait, std::ostream& out) {
  auto spec = job::loadJobSpec(path);
  if (!spec) throw Failure{2, spec.message()};
  Client client(g);
  pb::SubmitRequest req;
  *req.mutable_spec() = *spec;
  auto resp = client.call<rpc::Master::Submit>(req);
  if (!wait) {
    out << (g.json ? "{\"job_id\":\"" + resp.job_id() + "\"}" : resp.job_id()) << "\n";
    return 0;
  }
  // Flushed: whoever waits with us (a pipe, a script that times out) has the id at once.
  if (!g.json) out << "submitted " << resp.job_id() << "\n" << std::flush;
  return waitForJob(client, resp.job_id(), g, out);
}

int cmdStatus(const Globals& g, const std::string& jobId, bool watch, bool tasks, uint32_t taskOffset,
              uint32_t taskLimit, std::ostream& out) {
  Client client(g);
  if (watch) return waitForJob(client, jobId, g, out);
  pb::JobRequest req;
  req.set_job_id(jobId);
  auto st = client.call<rpc::Master::Status>(req);
  if (!g.json) printStatus(st, out);
  if (tasks) {
    // Page by page (the master caps a page): a 100,000-task job is never one answer.
    uint32_t offset = taskOffset;
    const uint64_t end = taskLimit == 0 ? UINT64_MAX : uint64_t{taskOffset} + taskLimit;
    req.set_tasks(true);
    while (offset < end) {
      req.set_task_offset(offset);
      req.set_task_limit(static_cast<uint32_t>(std::min<uint64_t>(end - offset, UINT32_MAX)));
      auto page = client.call<rpc::Master::Status>(req);
      if (!g.json) printTasks(page, out);
      for (int s = 0; s < page.stages_size() && s < st.stages_size(); ++s) {
        for (const auto& t : page.stages(s).task_placements()) *st.mutable_stages(s)->add_task_placements() = t;
      }
      if (page.next_task_offset() <= offset || page.next_task_offset() >= page.total_tasks()) break;
      offset = page.next_task_offset();
    }
  }
  if (g.json) out << toJson(st) << "\n";
  return 0;
}

// The job's usage and what it cost so far, per site and per site pair (the master prices it
// with each site's published prices when it answers).
int cmdCost(const Globals& g, const std::string& jobId, std::ostream& out) {
  Client client(g);
  pb::JobRequest req;
  req.set_job_id(jobId);
  const auto st = client.call<rpc::Master::Status>(req);
  const auto& cost = st.cost();
  if (g.json) {
    out << fmt::format("{{\"status\":{},\"cost\":{}}}\n", toJson(st.status()), toJson(cost));
    return 0;
  }
  out << st.status().job_id() << "  " << st.status().name() << "  " << jobstate::jobStateName(st.status().state()) << "\n";
  out << fmt::format("  {:<20} {:<10} {:>18} {:>12}\n", "site", "market", "container-seconds", "cost");
  for (const auto& s : cost.sites()) {
    out << fmt::format("  {:<20} {:<10} {:>18.3f} {:>12.4f}{}\n", s.site(), s.priced() ? s.market() : "-",
                       s.container_seconds(), s.container_cost(), s.priced() ? "" : "  (no prices known)");
  }
  out << fmt::format("  {:<31} {:>18} {:>12}\n", "from -> to", "bytes", "cost");
  for (const auto& p : cost.pairs()) {
    out << fmt::format("  {:<31} {:>18} {:>12.4f}{}\n", p.from_site() + " -> " + p.to_site(), p.bytes(), p.egress_cost(),
                       p.priced() ? "" : "  (no prices known)");
  }
  out << fmt::format("  total {:.4f} (containers {:.4f}, egress {:.4f})\n", cost.total(), cost.container_cost(),
                     cost.egress_cost());
  if (cost.unpriced_sites_size() > 0) {
    out << fmt::format("  no prices known for {} (no live master publishes them): charged 0\n",
                       fmt::join(cost.unpriced_sites(), ", "));
  }
  return 0;
}

int cmdList(const Globals& g, std::ostream& out) {
  Client client(g);
  auto resp = client.call<rpc::Master::List>(pb::ListJobsRequest());
  if (g.json) {
    out << toJson(resp) << "\n";
    return 0;
  }
  for (const auto& j : resp.jobs()) {
    out << j.job_id() << "  " << jobstate::jobStateName(j.state()) << "  " << (j.name().empty() ? "-" : j.name())
        << "  sites:";
    for (const auto& s : j.sites()) out << " " << s;
    if (!j.owner().empty()) out << "  by " << j.owner();
    out << "\n";
  }
  for (const auto& j : resp.corrupt()) out << j.job_id() << "  corrupt  " << j.reason() << "\n";
  return 0;
}

int cmdSites(const Globals& g, std::ostream& out) {
  Client client(g);
  auto resp = client.call<rpc::Master::Sites>(pb::ListSitesRequest());
  if (g.json) {
    out << toJson(resp) << "\n";
    return 0;
  }
  for (const auto& s : resp.sites()) {
    out << s.site() << "  master " << s.master_address() << "  workers " << s.workers() << "  containers "
        << s.containers_free() << "/" << s.containers_total() << " free\n";
    for (const auto& d : s.datasets()) {
      uint64_t bytes = 0;
      for (const auto& p : d.partitions()) bytes += p.bytes();
      out << "    dataset " << d.name() << ": " << d.partitions_size() << " partitions, " << bytes << " bytes"
          << (d.residency_local() ? " (residency local)" : "") << "\n";
    }
  }
  return 0;
}

int cmdKill(const Globals& g, const std::string& jobId, std::ostream& out) {
  Client client(g);
  pb::JobRequest req;
  req.set_job_id(jobId);
  auto resp = client.call<rpc::Master::Kill>(req);
  if (g.json) {
    out << toJson(resp) << "\n";
    return 0;
  }
  // What stopped, so that a kill of a job with corrupt or deleted state can be seen to work.
  out << "killed " << jobId << ": " << resp.jms_killed() << " JMs and " << resp.executors_killed()
      << " executors stopped on " << resp.workers_reached() << " workers\n";
  for (const auto& u : resp.unreachable()) out << "not reached: " << u << " (kill again)\n";
  return 0;
}

int cmdResult(const Globals& g, const std::string& jobId, const std::string& output, std::ostream& out) {
  Client client(g);
  std::ofstream file;
  std::ostream* sink = &out;
  if (!output.empty()) {
    file.open(output, std::ios::binary | std::ios::trunc);
    if (!file) throw Failure{1, "cannot write " + output};
    sink = &file;
  }
  runTransfer(g, client.master(), [&](net::RpcClient& conn) -> boost::asio::awaitable<Status> {
    // The first reply says how many tasks the last stage has; each task's output is one
    // object, read in pipelined chunks and checked against its checksum.
    uint32_t tasks = 1;
    for (uint32_t t = 0; t < tasks; ++t) {
      auto readChunk = [&conn, &tasks, &jobId, t](uint64_t offset, uint64_t maxBytes, milliseconds timeout)
          -> boost::asio::awaitable<Result<transfer::ReadReply>> {
        pb::ResultRequest req;
        req.set_job_id(jobId);
        req.set_task(t);
        req.set_offset(offset);
        req.set_max_bytes(static_cast<uint32_t>(maxBytes));
        auto chunk = co_await conn.call<rpc::Master::Result>(req, timeout);
        if (!chunk) co_return chunk.error();
        if (t == 0 && offset == 0) tasks = chunk->tasks();
        transfer::ReadReply reply;
        reply.data = std::move(*chunk->mutable_data());
        reply.totalBytes = chunk->total_bytes();
        if (chunk->has_crc32()) reply.crc32 = chunk->crc32();
        co_return reply;
      };
      auto write = [sink](std::string_view bytes) -> Status {
        sink->write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!*sink) return makeError(ErrorCode::kInternal, "writing the result failed");
        return Status::ok();
      };
      auto read = co_await transfer::readChunked(readChunk, write, transferOptions(g, uint64_t{1} << 40));
      if (!read) co_return read.error().prepend(fmt::format("result of task {}", t));
    }
    co_return Status::ok();
  });
  sink->flush();
  if (!*sink) throw Failure{1, "writing the result failed"};
  return 0;
}

int cmdPut(const Globals& g, const std::string& path, const std::string& dataset, const std::string& site,
           uint32_t partitions, bool residencyLocal, std::ostream& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Failure{2, "cannot read " + path};
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Client client(g);
  // Any master knows every site's master address.
  auto sites = client.call<rpc::Master::Sites>(pb::ListSitesRequest());
  std::string target;
  for (const auto& s : sites.sites()) {
    if (s.site() == site) target = s.master_address();
  }
  if (target.empty()) throw Failure{1, "no live site named '" + site + "'"};
  auto ep = net::Endpoint::parse(target);
  if (!ep) throw Failure{1, "site " + site + " publishes a bad address: " + ep.message()};

  auto cuts = data::lineAlignedSplitPoints(content, partitions);
  // Unique per put (the dataset name is not part of it: it may be up to the name limit itself).
  std::string uploadId = "put-" + std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  runTransfer(g, *ep, [&](net::RpcClient& conn) -> boost::asio::awaitable<Status> {
    for (uint32_t p = 0; p + 1 < cuts.size(); ++p) {
      const uint64_t begin = cuts[p], end = cuts[p + 1];
      pb::PutResponse stored;
      // Chunks of a partition are pipelined; each call sends its request before it first
      // suspends, so they reach the master, and through it the workers, in order.
      auto writeChunk = [&](transfer::Span span, bool last, milliseconds timeout) -> boost::asio::awaitable<Status> {
        pb::PutRequest req;
        req.set_dataset(dataset);
        req.set_partition(p);
        req.set_offset(span.offset);
        req.set_data(content.substr(begin + span.offset, span.length));
        req.set_last_chunk(last);
        req.set_residency_local(residencyLocal);
        req.set_upload_id(uploadId);
        req.set_partitions(static_cast<uint32_t>(cuts.size() - 1));
        auto resp = co_await conn.call<rpc::Master::Put>(req, timeout);
        if (!resp) co_return resp.error();
        if (last) stored = *resp;
        co_return Status::ok();
      };
      Status st = co_await transfer::writeChunked(end - begin, writeChunk, transferOptions(g, end - begin));
      if (!st) co_return st;
      if (!g.json) {
        out << dataset << "[" << p << "] " << (end - begin) << " bytes -> " << site << "/" << stored.worker_id() << "\n";
      }
    }
    co_return Status::ok();
  });
  return 0;
}

struct LogsArgs {
  std::string jobId;
  std::string task;  // STAGE:N
  uint32_t attempt = 0;
  std::string jmSite;
  uint64_t bytes = kChunkBytes;
  bool follow = false;
};

// How often --follow asks for more once it has caught up.
constexpr milliseconds kFollowPoll{500};

// A task's stderr or a JM's log: the last `bytes` of it, then with --follow what is appended
// until its writer ends. Every call returns at most kChunkBytes.
int cmdLogs(const Globals& g, const LogsArgs& a, std::ostream& out) {
  Client client(g);
  pb::LogsRequest req;
  req.set_job_id(a.jobId);
  if (!a.jmSite.empty()) {
    req.set_jm_site(a.jmSite);
  } else {
    auto ref = parseTaskRef(a.task);
    if (!ref) throw Failure{2, ref.message()};
    req.set_stage(ref->stage);
    req.set_task(ref->task);
    req.set_attempt(a.attempt);
  }
  const auto emit = [&](const pb::LogsResponse& r) {
    if (g.json) {
      out << toJson(r) << "\n";
    } else {
      out.write(r.data().data(), static_cast<std::streamsize>(r.data().size()));
    }
    out.flush();
  };
  req.set_tail(true);
  req.set_max_bytes(static_cast<uint32_t>(std::min<uint64_t>(a.bytes, kChunkBytes)));
  auto r = client.call<rpc::Master::Logs>(req);
  // Later calls read this execution, even when the task runs again meanwhile.
  if (r.attempt() > 0) req.set_attempt(r.attempt());
  req.set_tail(false);
  req.set_max_bytes(kChunkBytes);
  uint64_t offset = r.offset() + r.data().size();
  if (a.bytes > kChunkBytes && r.offset() > 0) {
    // More than one call's worth: from `bytes` before the end, forward.
    const uint64_t end = r.size();
    offset = end > a.bytes ? end - a.bytes : 0;
    while (offset < end) {
      req.set_offset(offset);
      r = client.call<rpc::Master::Logs>(req);
      if (r.data().empty()) break;
      if (r.offset() + r.data().size() > end) r.mutable_data()->resize(end - r.offset());
      emit(r);
      offset = r.offset() + r.data().size();
    }
  } else {
    emit(r);
  }
  if (!a.follow) return 0;
  while (!(r.complete() && offset >= r.size())) {
    if (r.data().size() < kChunkBytes) std::this_thread::sleep_for(kFollowPoll);
    req.set_offset(offset);
    r = client.call<rpc::Master::Logs>(req);
    // Shorter than what we read: another file now (a JM log on another worker); from its start.
    if (r.size() < offset) {
      offset = 0;
      continue;
    }
    emit(r);
    offset = r.offset() + r.data().size();
  }
  return 0;
}

// A bash completion script for the commands and options of `app` (`tellus completion bash`).
// Words after a command complete to its options; anything else falls back to file names.
std::string bashCompletion(const CLI::App& app) {
  const auto optionWords = [](const CLI::App& a, bool withValueOnly) {
    std::vector<std::string> words;
    for (const auto* opt : a.get_options()) {
      if (withValueOnly && opt->get_expected_max() == 0) continue;
      if (withValueOnly && opt->get_type_size() == 0) continue;
      for (const auto& n : opt->get_lnames()) words.push_back("--" + n);
      for (const auto& n : opt->get_snames()) words.push_back("-" + n);
    }
    return words;
  };
  const auto join = [](const std::vector<std::string>& words, const char* sep) {
    std::string out;
    for (const auto& w : words) out += (out.empty() ? "" : sep) + w;
    return out;
  };
  const auto globals = optionWords(app, false);
  std::vector<std::string> commands;
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) commands.push_back(sub->get_name());
  std::string script = "# bash completion for tellus (generated by `tellus completion bash`)\n"
                       "_tellus() {\n"
                       "  local cur=${COMP_WORDS[COMP_CWORD]} cmd= i\n"
                       "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
                       "    case ${COMP_WORDS[i]} in\n";
  script += "      " + join(optionWords(app, true), "|") + ") ((i++)) ;;\n";
  script += "      -*) ;;\n"
            "      *) cmd=${COMP_WORDS[i]}; break ;;\n"
            "    esac\n"
            "  done\n"
            "  local words\n"
            "  case $cmd in\n";
  script += "    '') words='" + join(commands, " ") + " " + join(globals, " ") + "' ;;\n";
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    auto words = optionWords(*sub, false);
    if (sub->get_name() == "completion") words.push_back("bash");
    script += "    " + sub->get_name() + ") words='" + join(words, " ") + " " + join(globals, " ") + "' ;;\n";
  }
  script += "  esac\n"
            "  if [[ -z $cmd || $cur == -* || $cmd == completion ]]; then\n"
            "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
            "  fi\n"
            "}\n"
            "complete -o default -F _tellus tellus\n";
  return script;
}

}  // namespace

namespace {

bool isCommand(const CLI::App& app, const std::string& word) {
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == word) return true;
  }
  return false;
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, Terminal terminal) {
  Globals g;
  g.terminal = terminal;
  if (const char* env = std::getenv("TELLUS_MASTER")) g.master = env;
  if (const char* env = std::getenv("TELLUS_TLS_CA")) g.tls.ca_file = env;
  if (const char* env = std::getenv("TELLUS_TLS_CERT")) g.tls.cert_file = env;
  if (const char* env = std::getenv("TELLUS_TLS_KEY")) g.tls.key_file = env;
  if (const char* env = std::getenv("TELLUS_INSECURE")) g.insecure = std::string_view(env) == "1" || std::string_view(env) == "true";

  CLI::App app{"tellus: run jobs over data that stays in its datacenters"};
  app.name("tellus");
  app.set_version_flag("--version", versionString(), "print the version and exit");
  app.footer("Every command talks to any site's master (--master or $TELLUS_MASTER) over mutual TLS.\n"
             "Examples:\n"
             "  tellus submit examples/jobs/wordcount.yaml --wait\n"
             "  tellus <command> --help      the command's options and an example\n"
             "  source <(tellus completion bash)");
  app.require_subcommand(1);
  app.fallthrough();  // global options may also follow the subcommand
  app.add_option("--master", g.master, "any site's master, HOST:PORT (default: $TELLUS_MASTER)");
  app.add_option("--timeout-ms", g.timeoutMs, "deadline of each call to a master")->check(CLI::Range(1u, 3600000u));
  app.add_flag("--json", g.json, "machine-readable output");
  app.add_option("--tls-ca", g.tls.ca_file, "cluster CA certificate, PEM (default: $TELLUS_TLS_CA)");
  app.add_option("--tls-cert", g.tls.cert_file, "your client certificate, PEM (default: $TELLUS_TLS_CERT)");
  app.add_option("--tls-key", g.tls.key_file, "its private key, PEM (default: $TELLUS_TLS_KEY)");
  app.add_flag("--insecure", g.insecure, "plaintext RPC to a cluster run with insecure: true (default: $TELLUS_INSECURE)");

  std::string jobFile, jobId, output, putFile, dataset, site, planFile, policy, shell;
  bool wait = false, watch = false, tasks = false, residencyLocal = false;
  uint32_t partitions = 1, taskOffset = 0, taskLimit = 0;
  LogsArgs logsArgs;

  auto* submit = app.add_subcommand("submit", "submit a job spec (YAML)");
  submit->add_option("JOB", jobFile, "job spec")->required();
  submit->add_flag("--wait", wait, "wait for the job to finish, showing progress (bars per stage on a terminal)");
  submit->footer("Example:\n  tellus submit examples/jobs/wordcount.yaml --wait");
  auto* status = app.add_subcommand("status", "show a job's progress per stage and site");
  status->add_option("JOB", jobId, "job id")->required();
  status->add_flag("--watch", watch, "follow until the job ends (bars per stage on a terminal)");
  auto* tasksFlag = status->add_flag("--tasks", tasks, "also show where each task's output is and how often it ran");
  // Without --tasks the answer is a summary per stage and site, whatever the job's size; the
  // tasks come a page at a time (the master caps a page at 1000).
  status->add_option("--task-offset", taskOffset, "with --tasks: start at this task (stages in order)")->needs(tasksFlag);
  status->add_option("--task-limit", taskLimit, "with --tasks: show at most this many tasks (0: all, fetched a page at a time)")
      ->needs(tasksFlag);
  status->footer(
      "Examples:\n  tellus status job-0000000003 --watch\n"
      "  tellus status job-0000000003 --tasks --task-offset 2000 --task-limit 500   (tasks 2000..2499)");
  auto* costCmd = app.add_subcommand("cost", "show a job's cost so far: container time per site, bytes per site pair");
  costCmd->add_option("JOB", jobId, "job id")->required();
  costCmd->footer("Example:\n  tellus cost job-0000000003 --json");
  auto* list = app.add_subcommand("list", "list jobs");
  list->footer("Example:\n  tellus list --json");
  auto* sites = app.add_subcommand("sites", "list live sites, workers, containers and datasets");
  sites->footer("Example:\n  tellus sites");
  auto* result = app.add_subcommand("result", "print (or write) a finished job's output");
  result->add_option("JOB", jobId, "job id")->required();
  result->add_option("-o,--output", output, "write to this file instead of stdout");
  result->footer("Example:\n  tellus result job-0000000003 -o counts.tsv");
  auto* kill = app.add_subcommand("kill", "kill a job");
  kill->add_option("JOB", jobId, "job id")->required();
  kill->footer("Example:\n  tellus kill job-0000000003");
  auto* put = app.add_subcommand("put", "load a local file into a site as a dataset");
  put->add_option("FILE", putFile, "local text file")->required();
  put->add_option("--dataset", dataset, "dataset name")->required();
  put->add_option("--site", site, "site to store it at")->required();
  put->add_option("--partitions", partitions, "split into K partitions at line boundaries")->check(CLI::Range(1u, 100000u));
  put->add_flag("--residency-local", residencyLocal, "raw partitions may never leave the site");
  put->footer("Example:\n  tellus put big.txt --dataset logs --site eu-west --partitions 8");
  auto* logs = app.add_subcommand("logs", "print a task's stderr or a JM's log, from the worker that holds it");
  logs->add_option("JOB", logsArgs.jobId, "job id")->required();
  auto* logsTask = logs->add_option("--task", logsArgs.task, "STAGE:N: task N of the stage (its name or index)");
  logs->add_option("--attempt", logsArgs.attempt, "with --task: its K-th execution (1 = first; default: the latest)")
      ->check(CLI::Range(1u, UINT32_MAX))
      ->needs(logsTask);
  auto* logsJm = logs->add_option("--jm", logsArgs.jmSite, "the log of the job's JM at this site");
  logsJm->excludes(logsTask);
  logs->add_option("--bytes", logsArgs.bytes, "print at most the last N bytes (default 1 MiB, at most 64 MiB)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{64} << 20));
  logs->add_flag("--follow", logsArgs.follow, "then print what is appended until the executor or JM ends");
  logs->footer("Examples:\n"
               "  tellus logs job-0000000003 --task map:2              stderr of map task 2, latest execution\n"
               "  tellus logs job-0000000003 --task map:2 --attempt 1  its first execution\n"
               "  tellus logs job-0000000003 --jm eu-west --follow     the JM log of site eu-west, as it grows");
  auto* completion = app.add_subcommand("completion", "print a shell completion script");
  completion->add_option("SHELL", shell, "the shell (bash)")->required()->check(CLI::IsMember({"bash"}));
  completion->footer("Example:\n  source <(tellus completion bash)     # or save it under /etc/bash_completion.d/tellus");
  auto* plan = app.add_subcommand("plan", "solve a placement/ordering problem offline (docs/plan.md)");
  plan->add_option("PROBLEM", planFile, "problem YAML")->required();
  plan->add_option("--policy", policy, "policy name (default: the problem's)");
  plan->add_flag("--json", g.json, "print the plan as one JSON document (docs/plan.md)");
  plan->footer("Example:\n  tellus plan examples/plan-tetrium.yaml --policy iridium");

  std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  std::reverse(rest.begin(), rest.end());  // CLI11 takes a reversed vector
  try {
    app.parse(rest);
  } catch (const CLI::CallForVersion& e) {
    out << e.what() << "\n";
    return 0;
  } catch (const CLI::CallForHelp&) {
    out << app.help();  // the command's own help after `tellus <command> --help`
    return 0;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      out << app.help();
      return 0;
    }
    // An unknown command word reaches CLI11 as "a subcommand is required": name it instead.
    for (size_t i = 1; i < args.size(); ++i) {
      if (args[i] == "--master" || args[i] == "--timeout-ms" || args[i].starts_with("--tls-")) {
        ++i;
        continue;
      }
      if (!args[i].empty() && args[i][0] != '-' && !isCommand(app, args[i])) {
        err << "tellus: unknown command '" << args[i]
            << "' (expected submit, status, cost, list, sites, result, kill, put, logs, completion or plan)\n";
        return 2;
      }
      if (!args[i].empty() && args[i][0] != '-') break;
    }
    err << "tellus: " << e.what() << "\n";
    return 2;
  }

  try {
    if (*plan) return plan::runPlanCommand(planFile, policy, g.json, out, err);
    if (*completion) {
      out << bashCompletion(app);
      return 0;
    }
    if (*logs && logsArgs.task.empty() && logsArgs.jmSite.empty()) {
      throw Failure{2, "logs: which log? pass --task STAGE:N or --jm SITE"};
    }
    if (*logs && !logsArgs.task.empty()) {
      if (auto ref = parseTaskRef(logsArgs.task); !ref) throw Failure{2, ref.message()};
    }
    if (g.master.empty()) throw Failure{2, "no master: pass --master HOST:PORT or set TELLUS_MASTER"};
    // A bad address is the first thing to report, before credentials.
    if (auto endpoint = net::Endpoint::parse(g.master); !endpoint) throw Failure{2, "--master: " + endpoint.message()};
    // --insecure is explicit on each run: no warning line (scripts parse stderr).
    if (g.insecure) {
    } else if (g.tls.ca_file.empty() || g.tls.cert_file.empty() || g.tls.key_file.empty()) {
      throw Failure{2, "no TLS credentials: pass --tls-ca, --tls-cert and --tls-key (or set TELLUS_TLS_CA, "
                       "TELLUS_TLS_CERT and TELLUS_TLS_KEY), or --insecure for a cluster run with insecure: true"};
    } else {
      auto tls = net::TlsContext::load(g.tls);
      if (!tls) throw Failure{2, tls.message()};
      g.tlsContext = std::move(*tls);
    }
    if (*submit) return cmdSubmit(g, jobFile, wait, out);
    if (*status) return cmdStatus(g, jobId, watch, tasks, taskOffset, taskLimit, out);
    if (*costCmd) return cmdCost(g, jobId, out);
    if (*list) return cmdList(g, out);
    if (*sites) return cmdSites(g, out);
    if (*result) return cmdResult(g, jobId, output, out);
    if (*kill) return cmdKill(g, jobId, out);
    if (*put) return cmdPut(g, putFile, dataset, site, partitions, residencyLocal, out);
    if (*logs) return cmdLogs(g, logsArgs, out);
  } catch (const Failure& f) {
    // One line, whatever the error carries (a failed command's stderr has several).
    std::string line = f.message;
    std::replace(line.begin(), line.end(), '\n', ' ');
    err << "tellus: " << line << "\n";
    return f.code;
  }
  return 2;
}

}  // namespace tellus::cli
