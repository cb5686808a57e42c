"""What the Python benchmarks under tools/bench share: a throwaway cluster from scripts/cluster,
the CLI's environment for it, and the workers' per-task phase metrics."""
import glob, os, re, socket, subprocess, sys, tempfile, urllib.request

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def scrape(address):
    """(phase seconds, phase samples, tasks, start transactions, task starts) summed from one
    worker's /metrics."""
    with urllib.request.urlopen("http://%s/metrics" % address, timeout=5) as r:
        text = r.read().decode()
    seconds, samples, tasks, transactions, starts = {}, {}, 0.0, 0.0, 0.0
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name_labels, value = line.rsplit(" ", 1)
        name = name_labels.split("{", 1)[0]
        label = name_labels.split('"')[1] if '"' in name_labels else ""
        if name == "tellus_worker_task_phase_seconds_total":
            seconds[label] = float(value)
        elif name == "tellus_worker_task_phase_samples_total":
            samples[label] = float(value)
        elif name == "tellus_worker_tasks_total":
            tasks += float(value)
        elif name == "tellus_worker_start_transactions_total":
            transactions = float(value)
        elif name == "tellus_worker_task_starts_total":
            starts = float(value)
    return seconds, samples, tasks, transactions, starts


def lease_accuracy(run_dir):
    """Paper 004 eq. 3 over every JM of a cluster's run: each logs its executions and their mean
    accuracy when it exits ("lease estimates: N executions, mean accuracy X; M from a compute
    history, mean accuracy Y")."""
    pattern = re.compile(r"lease estimates: (\d+) executions, mean accuracy ([0-9.]+); "
                         r"(\d+) from a compute history, mean accuracy ([0-9.]+)")
    n = [0, 0]
    weighted = [0.0, 0.0]
    for path in glob.glob(os.path.join(run_dir, "**", "jm.log"), recursive=True):
        with open(path, errors="replace") as f:
            for m in pattern.finditer(f.read()):
                for i in (0, 1):
                    n[i] += int(m.group(1 + 2 * i))
                    weighted[i] += int(m.group(1 + 2 * i)) * float(m.group(2 + 2 * i))
    mean = [round(weighted[i] / n[i], 3) if n[i] else None for i in (0, 1)]
    return {"executions": n[0], "mean": mean[0], "from_history": n[1], "from_history_mean": mean[1]}


def srvr_received(zk):
    """ZooKeeper's count of packets received (its `srvr` command) at host:port `zk`."""
    host, port = zk.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"srvr")
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    for line in data.decode().splitlines():
        if line.startswith("Received:"):
            return int(line.split()[1])
    raise RuntimeError("no Received line in srvr output: " + data.decode())


def phase_ms_per_task(before, after, phases):
    """Milliseconds per task of each phase between two scrapes of every worker, the tasks
    run, and each phase's sample count."""
    tasks_run = sum(a[2] - b[2] for a, b in zip(after, before))
    per_task, samples = {}, {}
    for p in phases:
        s = sum(a[0].get(p, 0) - b[0].get(p, 0) for a, b in zip(after, before))
        n = sum(a[1].get(p, 0) - b[1].get(p, 0) for a, b in zip(after, before))
        per_task[p] = round(1000.0 * s / tasks_run, 3) if tasks_run else None
        samples[p] = int(n)
    return per_task, int(tasks_run), samples


class Cluster:
    """`scripts/cluster up` in a fresh run directory on enter, `down` on exit."""

    def __init__(self, bin_dir, sites, workers, containers, insecure=False, extra=()):
        self.bin = bin_dir
        self.sites = ["us-east", "eu-west", "ap-south", "us-west", "eu-north", "sa-east",
                      "me-central", "af-south"][:sites]
        self.workers = workers
        self.args = ["--sites", str(sites), "--workers", str(workers), "--containers", str(containers)]
        self.args += (["--insecure"] if insecure else []) + list(extra)
        self.insecure = insecure
        self.run_dir = tempfile.mkdtemp(prefix="tellus-bench-")
        self.env = dict(os.environ, TELLUS_BIN=bin_dir)
        self.script = os.path.join(root, "scripts", "cluster")

    def __enter__(self):
        subprocess.run([self.script, "up", "--run-dir", self.run_dir] + self.args, env=self.env,
                       check=True, stdout=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc):
        subprocess.run([self.script, "down", "--run-dir", self.run_dir], env=self.env,
                       stdout=subprocess.DEVNULL)

    def read(self, *path):
        with open(os.path.join(self.run_dir, *path)) as f:
            return f.read().strip()

    def master(self, site=None):
        return self.read(site, "master-address") if site else self.read("master")

    def cli_env(self):
        """Environment for the `tellus` CLI: the operator's certificate, or plaintext."""
        if self.insecure:
            return dict(os.environ, TELLUS_INSECURE="1")
        certs = os.path.join(self.run_dir, "certs")
        return dict(os.environ, TELLUS_TLS_CA=os.path.join(certs, "ca.pem"),
                    TELLUS_TLS_CERT=os.path.join(certs, "client.operator.pem"),
                    TELLUS_TLS_KEY=os.path.join(certs, "client.operator.key"))

    def worker_ids(self, site):
        return ["%s-w%d" % (site, w + 1) for w in range(self.workers)]

    def worker_http(self):
        """host:port of every worker's /metrics, all sites."""
        return [self.read(site, w + "-http-address") for site in self.sites for w in self.worker_ids(site)]

    def pids(self):
        """name -> pid of every daemon and ZooKeeper the run directory recorded."""
        out = {}
        for f in os.listdir(os.path.join(self.run_dir, "pids")):
            out[f[:-4]] = int(self.read("pids", f))
        return out

    def tellus(self, *args, timeout_ms=600000):
        """Runs the CLI against the first site's master; raises on failure, returns stdout."""
        out = subprocess.run([os.path.join(self.bin, "tellus"), "--master", self.master(),
                              "--timeout-ms", str(timeout_ms)] + list(args),
                             capture_output=True, text=True, env=self.cli_env())
        if out.returncode != 0:
            raise RuntimeError("tellus %s failed: %s%s" % (" ".join(args), out.stdout[-2000:], out.stderr[-2000:]))
        return out.stdout
