#include "progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "jobstate/job_view.h"

namespace tellus::cli {

void Throughput::add(double nowSeconds, uint64_t done) {
  samples_.emplace_back(nowSeconds, done);
  // Keep one sample at or before the window's start as the base of the rate.
  while (samples_.size() > 2 && samples_[1].first <= nowSeconds - window_) samples_.pop_front();
}

std::optional<double> Throughput::perSecond() const {
  if (samples_.size() < 2) return std::nullopt;
  const auto& [t0, d0] = samples_.front();
  const auto& [t1, d1] = samples_.back();
  if (t1 <= t0) return std::nullopt;
  if (d1 <= d0) return 0.0;
  return static_cast<double>(d1 - d0) / (t1 - t0);
}

std::optional<double> Throughput::etaSeconds(uint64_t remaining) const {
  if (remaining == 0) return 0.0;
  auto rate = perSecond();
  if (!rate || *rate <= 0) return std::nullopt;
  return static_cast<double>(remaining) / *rate;
}

void JobProgress::add(double nowSeconds, const pb::JobStatusResponse& status) {
  if (stages_.size() < static_cast<size_t>(status.stages_size())) {
    stages_.resize(static_cast<size_t>(status.stages_size()), Throughput(window_));
  }
  uint64_t done = 0;
  for (int s = 0; s < status.stages_size(); ++s) {
    stages_[static_cast<size_t>(s)].add(nowSeconds, status.stages(s).done());
    done += status.stages(s).done();
  }
  total_.add(nowSeconds, done);
}

std::string progressBar(uint64_t done, uint64_t total, int width) {
  const auto cells = static_cast<uint64_t>(std::max(width, 1));
  const uint64_t filled = total == 0 ? 0 : std::min(cells, done * cells / total);
  // Appended, not concatenated: GCC 12 at -O3 reports a false -Wrestrict on "[" + std::string.
  std::string bar;
  bar.reserve(cells + 2);
  bar += '[';
  bar.append(filled, '#');
  bar.append(cells - filled, '-');
  bar += ']';
  return bar;
}

std::string formatDuration(double seconds) {
  const auto s = static_cast<uint64_t>(std::llround(std::max(seconds, 0.0)));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

std::string redrawFrame(const std::vector<std::string>& lines, size_t previousLines) {
  std::string out;
  // Up to the first line of the previous frame, then each line cleared and rewritten.
  if (previousLines > 0) out += fmt::format("\x1b[{}A", previousLines);
  for (const auto& line : lines) {
    out += "\r\x1b[2K";
    out += line;
    out += '\n';
  }
  // A shorter frame than the last: clear what is left of the old one below it.
  if (previousLines > lines.size()) {
    out += "\x1b[J";
  }
  return out;
}

std::vector<std::string> JobProgress::render(const pb::JobStatusResponse& status, double nowSeconds,
                                             int width) const {
  const auto fit = [width](std::string line) {
    if (width > 0 && line.size() > static_cast<size_t>(width)) line.resize(static_cast<size_t>(width));
    return line;
  };
  std::vector<std::string> lines;
  const auto& st = status.status();
  const bool over = jobstate::isTerminal(st.state());
  uint64_t remaining = 0;
  for (const auto& stage : status.stages()) remaining += stage.tasks() > stage.done() ? stage.tasks() - stage.done() : 0;
  std::string header = fmt::format("{}  {}  {}  {}", st.job_id(), st.name().empty() ? "-" : st.name(),
                                   jobstate::jobStateName(st.state()),
                                   formatDuration(nowSeconds));
  if (!over) {
    auto eta = total_.etaSeconds(remaining);
    header += eta ? fmt::format("  ETA {}", formatDuration(*eta)) : std::string("  ETA --");
  }
  if (!st.error().empty()) header += fmt::format("  error: {}", st.error());
  lines.push_back(fit(std::move(header)));

  // Someone else's job comes without its stage names (docs/security.md): their indexes then.
  std::vector<std::string> names;
  for (int s = 0; s < status.stages_size(); ++s) {
    const auto& name = status.stages(s).name();
    names.push_back(name.empty() ? fmt::format("#{}", s) : name);
  }
  size_t nameWidth = 0;
  for (const auto& name : names) nameWidth = std::max(nameWidth, name.size());
  nameWidth = std::min<size_t>(nameWidth, 16);
  const int barWidth = std::clamp(width / 4, 10, 30);
  for (int s = 0; s < status.stages_size(); ++s) {
    const auto& stage = status.stages(s);
    std::string name = names[static_cast<size_t>(s)].substr(0, nameWidth);
    const uint32_t pct = stage.tasks() == 0 ? 0 : static_cast<uint32_t>(uint64_t{stage.done()} * 100 / stage.tasks());
    std::string line = fmt::format("  {:<{}} {} {:>5}/{:<5} {:>3}%  ", name, nameWidth,
                                   progressBar(stage.done(), stage.tasks(), barWidth), stage.done(), stage.tasks(), pct);
    if (stage.tasks() > 0 && stage.done() >= stage.tasks()) {
      line += "done";
    } else if (!stage.released()) {
      line += "waiting for upstream";
    } else {
      const Throughput* rate = static_cast<size_t>(s) < stages_.size() ? &stages_[static_cast<size_t>(s)] : nullptr;
      auto perSecond = rate ? rate->perSecond() : std::nullopt;
      auto eta = rate ? rate->etaSeconds(stage.tasks() - stage.done()) : std::nullopt;
      line += perSecond ? fmt::format("{:.1f}/s", *perSecond) : std::string("-/s");
      line += eta && !over ? fmt::format("  ETA {}", formatDuration(*eta)) : std::string("  ETA --");
    }
    for (const auto& site : stage.sites()) line += fmt::format("  {} {}/{}", site.site(), site.done(), site.owned());
    lines.push_back(fit(std::move(line)));
  }
  return lines;
}

}  // namespace tellus::cli
