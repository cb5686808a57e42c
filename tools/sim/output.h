#pragma once
// What tellus-sim writes: one CSV row per finished job (streamed, so memory stays flat), and
// per-policy summaries as a table, CSV and JSON, with reductions relative to a baseline.

#include <ostream>
#include <string>
#include <vector>

#include "sim/simulator.h"

namespace tellus::sim {

// Writes "policy,job,name,arrival_s,finish_s,response_s,isolated_s,slowdown,wan_bytes,tasks,stages".
class CsvJobWriter : public JobRecordSink {
 public:
  CsvJobWriter(std::ostream& out, std::string policy, bool header = true);
  void onJobFinished(const JobRecord& record) override;

 private:
  std::ostream& out_;
  std::string policy_;
};

// Slot-seconds over every site of a priced run.
double containerSeconds(const cost::JobCost& cost);

// Percentage reduction of `value` relative to `baseline` (positive = better than baseline).
double reductionPercent(double baseline, double value);

// A fixed-width table: one line per policy, then reductions vs summaries[baseline].
void printSummaryTable(std::ostream& out, const std::vector<RunSummary>& summaries, size_t baseline);
void writeSummaryCsv(std::ostream& out, const std::vector<RunSummary>& summaries, size_t baseline);
std::string summaryJson(const std::vector<RunSummary>& summaries, size_t baseline);

// A file-name-safe form of a policy label ("tetrium+rho=0.5" -> "tetrium_rho-0.5").
std::string fileSafe(const std::string& label);

}  // namespace tellus::sim
