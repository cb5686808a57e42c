// Tellus status page: polls /status and renders it. Everything shown is inserted as text
// nodes (createElement, textContent), never parsed as markup: job, stage and site names come
// from users and peers.
'use strict';

const POLL_MS = 2000;
const TASK_PAGE = 100;
// What the master accepts as a job id (util/names.h): anything else never reaches a URL.
const JOB_ID = /^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$/;

let siteColours = new Map();  // site -> colour class index, stable across refreshes
let taskOffset = 0;
let lastJob = null;           // the job page's last response (for paging buttons)

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === 'class') node.className = value;
    else if (key === 'href') node.setAttribute('href', value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

function colourOf(site) {
  if (!siteColours.has(site)) siteColours.set(site, siteColours.size % 8);
  return 'site-' + siteColours.get(site);
}

function when(unixMs) {
  if (!unixMs) return '';
  const d = new Date(Number(unixMs));
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

// The route from the fragment: #job=ID[&offset=N] or the overview.
function route() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  const job = params.get('job');
  const offset = Number.parseInt(params.get('offset') || '0', 10);
  if (job && JOB_ID.test(job)) return { job, offset: Number.isSafeInteger(offset) && offset >= 0 ? offset : 0 };
  return { job: null, offset: 0 };
}

// A cost as `tellus cost` prints it (4 decimals, in the cluster's one currency: prices carry no
// unit). data-cost keeps the exact number for scripts and tests.
function costText(value) {
  return Number(value).toFixed(4);
}

function costBadge(cost) {
  if (!cost) return null;
  const unpriced = cost.unpriced_sites.length ? ' (no prices known for ' + cost.unpriced_sites.join(', ') + ')' : '';
  return el('span', { class: 'cost', 'data-cost': cost.total,
                      title: 'containers ' + costText(cost.container_cost) + ', egress ' + costText(cost.egress_cost) +
                             '; ' + cost.container_seconds.toFixed(3) + ' container-seconds, ' +
                             cost.bytes_across_sites + ' bytes across sites' + unpriced },
            'cost ', el('b', { class: 'cost-total' }, costText(cost.total)), unpriced);
}

function jobHref(id, offset) {
  return '#job=' + encodeURIComponent(id) + (offset ? '&offset=' + offset : '');
}

// One progress bar per stage: a segment per site, solid for its finished tasks and faded for
// the rest it owns; the label is done/tasks and the percentage.
function stageRow(stage) {
  const bar = el('div', { class: 'bar', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100,
                          'aria-valuenow': stage.percent });
  const total = Math.max(stage.tasks, 1);
  for (const s of stage.sites) {
    const done = el('div', { class: 'seg ' + colourOf(s.site), title: s.site + ': ' + s.done + ' done' });
    done.style.width = (100 * s.done / total) + '%';
    const open = el('div', { class: 'seg open ' + colourOf(s.site), title: s.site + ': ' + (s.owned - s.done) + ' to do' });
    open.style.width = (100 * Math.max(s.owned - s.done, 0) / total) + '%';
    bar.append(done, open);
  }
  const label = el('span', { class: 'pct' }, stage.done + '/' + stage.tasks + ' ',
                   el('b', { class: 'stage-pct' }, stage.percent + '%'),
                   stage.released ? '' : ' (not released)');
  const sites = el('div', { class: 'sites-line' });
  for (const s of stage.sites) {
    sites.append(el('span', { class: 'swatch ' + colourOf(s.site) }), s.site + ' ' + s.done + '/' + s.owned);
  }
  return el('div', { class: 'stage', 'data-stage': stage.name },
            el('span', { class: 'stage-name', title: stage.name }, stage.name), bar, label, sites);
}

function jobCard(job) {
  const head = el('div', { class: 'job-head' },
                  el('a', { class: 'job-id', href: jobHref(job.id, 0) }, job.id),
                  el('span', { class: 'job-name' }, job.name),
                  el('span', { class: 'state ' + job.state }, job.state),
                  el('span', { class: 'muted' }, job.percent + '% · sites ' + job.sites.join(', ') +
                     ' · submitted at ' + job.submit_site + ' ' + when(job.submit_unix_ms)),
                  costBadge(job.cost));
  const card = el('div', { class: 'job', 'data-job': job.id }, head);
  for (const stage of job.stages) card.append(stageRow(stage));
  if (job.error) card.append(el('p', { class: 'error' }, job.error));
  return card;
}

// A job the master could not describe (its status in ZooKeeper is corrupt or unreadable):
// shown, marked, with the reason, rather than left out. No link: it has no task map to page
// through, and `tellus kill ID` still stops it.
function brokenCard(job) {
  const head = el('div', { class: 'job-head' },
                  el('span', { class: 'job-id' }, job.id),
                  el('span', { class: 'state broken' }, job.state),
                  el('span', { class: 'muted' }, 'tellus kill ' + job.id + ' still stops its JMs and tasks'));
  return el('div', { class: 'job broken', 'data-job': job.id, 'data-broken': job.state }, head,
            el('p', { class: 'error broken-reason' }, job.error));
}

function renderSites(status) {
  const body = document.querySelector('#sites tbody');
  clear(body);
  for (const s of status.sites || []) {
    const bar = el('div', { class: 'bar' });
    const used = el('div', { class: 'seg ' + colourOf(s.site) });
    used.style.width = (s.containers_total ? 100 * s.containers_granted / s.containers_total : 0) + '%';
    bar.append(used);
    body.append(el('tr', { 'data-site': s.site }, el('td', null, s.site), el('td', null, s.workers),
                   el('td', null, s.containers_free + ' / ' + s.containers_total),
                   el('td', null, s.containers_granted), el('td', null, bar)));
  }
  if (status.sites_error) body.append(el('tr', null, el('td', { colspan: 5, class: 'error' }, status.sites_error)));
}

function renderFailures(status) {
  const list = document.getElementById('failures');
  clear(list);
  const items = [];
  for (const f of status.failures || []) {
    items.push({ at: f.unix_ms, text: f.kind + (f.job_id ? ' ' + f.job_id : '') + (f.text ? ': ' + f.text : ''),
                 job: f.job_id });
  }
  for (const job of status.jobs || []) {
    if (job.state === 'failed' && job.error) {
      items.push({ at: job.finish_unix_ms, text: 'job ' + job.id + ' (' + job.name + ') failed: ' + job.error, job: job.id });
    }
  }
  items.sort((a, b) => b.at - a.at);
  for (const item of items.slice(0, 30)) {
    list.append(el('li', null, el('span', { class: 'when' }, when(item.at)), item.text));
  }
  if (!items.length) list.append(el('li', { class: 'muted' }, 'none seen'));
}

function renderOverview(status) {
  renderSites(status);
  const jobs = document.getElementById('jobs');
  clear(jobs);
  document.getElementById('jobs-off').hidden = status.http_jobs !== false;
  document.getElementById('jobs-count').textContent =
      status.http_jobs ? '(' + (status.jobs || []).length + ' newest of ' + status.jobs_total + ')' : '';
  for (const job of status.jobs || []) jobs.append(job.broken ? brokenCard(job) : jobCard(job));
  renderFailures(status);
}

function renderJob(job) {
  lastJob = job;
  document.getElementById('job-title').textContent = job.id + ' · ' + job.name;
  document.getElementById('job-meta').textContent = job.state + ' · ' + job.percent + '% · sites ' +
      job.sites.join(', ') + ' · submitted at ' + job.submit_site + ' ' + when(job.submit_unix_ms) +
      (job.finish_unix_ms ? ' · finished ' + when(job.finish_unix_ms) : '');
  const error = document.getElementById('job-error');
  error.hidden = !job.error;
  error.textContent = job.error || '';
  const stages = document.getElementById('job-stages');
  clear(stages);
  for (const stage of job.stages) stages.append(stageRow(stage));

  renderCost(job.cost);

  const jms = document.querySelector('#job-jms tbody');
  clear(jms);
  for (const jm of job.jms) {
    jms.append(el('tr', null, el('td', null, jm.site), el('td', null, jm.role), el('td', null, jm.epoch),
                  el('td', null, jm.desire), el('td', null, jm.granted), el('td', null, jm.worker)));
  }
  if (!job.jms.length) jms.append(el('tr', null, el('td', { colspan: 6, class: 'muted' }, 'no JM registered')));

  const tasks = document.querySelector('#job-tasks tbody');
  clear(tasks);
  for (const t of job.tasks) {
    tasks.append(el('tr', { class: t.executions > 1 ? 'retried' : '' },
                    el('td', null, t.stage_name), el('td', null, t.task), el('td', null, t.owner_site),
                    el('td', null, t.worker), el('td', null, t.executions),
                    el('td', { class: 'state-' + t.state }, t.state)));
  }
  const last = job.task_offset + job.tasks.length;
  document.getElementById('task-range').textContent =
      job.total_tasks ? '(' + (job.tasks.length ? job.task_offset + 1 : 0) + '–' + last + ' of ' + job.total_tasks + ')'
                      : '(no stage released yet)';
  document.getElementById('task-prev').disabled = job.task_offset === 0;
  document.getElementById('task-next').disabled = job.next_task_offset >= job.total_tasks;
}

// The job page's cost: the total, then container time per site and bytes per site pair, as
// `tellus cost` breaks it down.
function renderCost(cost) {
  const total = document.getElementById('job-cost');
  clear(total);
  const sites = document.querySelector('#job-cost-sites tbody');
  const pairs = document.querySelector('#job-cost-pairs tbody');
  clear(sites);
  clear(pairs);
  if (!cost) return;
  total.append(costBadge(cost), ' = containers ' + costText(cost.container_cost) + ' + egress ' + costText(cost.egress_cost));
  for (const s of cost.sites) {
    sites.append(el('tr', { 'data-cost-site': s.site }, el('td', null, s.site), el('td', null, s.priced ? s.market : ''),
                    el('td', null, s.container_seconds.toFixed(3)),
                    el('td', null, s.priced ? costText(s.container_cost) : 'no prices known')));
  }
  if (!cost.sites.length) sites.append(el('tr', null, el('td', { colspan: 4, class: 'muted' }, 'no execution finished yet')));
  for (const p of cost.pairs) {
    pairs.append(el('tr', { 'data-cost-from': p.from, 'data-cost-to': p.to }, el('td', null, p.from + ' → ' + p.to),
                    el('td', null, p.bytes), el('td', null, p.priced ? costText(p.egress_cost) : 'no prices known')));
  }
  if (!cost.pairs.length) pairs.append(el('tr', null, el('td', { colspan: 3, class: 'muted' }, 'nothing sent between sites')));
}

let timer = null;
let inFlight = false;

async function refresh() {
  if (inFlight) return;
  inFlight = true;
  const r = route();
  const conn = document.getElementById('conn');
  try {
    let url = '/status';
    if (r.job) url += '?job=' + encodeURIComponent(r.job) + '&offset=' + r.offset + '&limit=' + TASK_PAGE;
    const response = await fetch(url, { cache: 'no-store' });
    const text = await response.text();
    if (!response.ok) throw new Error(text.trim() || response.statusText);
    const status = JSON.parse(text);
    document.getElementById('site-name').textContent = 'site ' + status.site;
    document.getElementById('overview').hidden = !!r.job;
    document.getElementById('job').hidden = !r.job;
    if (r.job) {
      if (status.job) renderJob(status.job);
    } else {
      renderOverview(status);
    }
    conn.textContent = 'updated ' + new Date().toLocaleTimeString();
    conn.classList.remove('down');
    document.body.dataset.loaded = 'true';
  } catch (e) {
    conn.textContent = 'cannot read /status: ' + e.message;
    conn.classList.add('down');
  } finally {
    inFlight = false;
  }
}

function schedule() {
  clearTimeout(timer);
  refresh().finally(() => { timer = setTimeout(schedule, POLL_MS); });
}

document.getElementById('task-prev').addEventListener('click', () => {
  if (lastJob) location.hash = jobHref(lastJob.id, Math.max(lastJob.task_offset - TASK_PAGE, 0));
});
document.getElementById('task-next').addEventListener('click', () => {
  if (lastJob) location.hash = jobHref(lastJob.id, lastJob.next_task_offset);
});
window.addEventListener('hashchange', schedule);
schedule();
