#!/usr/bin/env python3
"""Runs docker/compose.yaml's services as plain processes on loopback, for hosts without a
Docker engine (like the development machines), and checks the deployment end to end.

    sudo docker/test/compose-without-docker.py [--bin build/bin] [--work-dir DIR]

Each service gets its own 127.0.1.x address and a private mount namespace (so: root) in which
/etc/hosts maps every service name to its address, as Compose DNS does, and the service's bind
mounts are in place. Environment (with `${VAR:-default}` taken from this environment, as
Compose does), commands, volumes, healthchecks and depends_on are read from the compose file
itself; what Docker would provide is replaced: named volumes by directories under the work dir
(bind-mounted where the service mounts them), the images by the entrypoint scripts in docker/,
scripts/make-certs and the binaries in --bin. ZooKeeper servers bind their own address instead of
every interface, since they share one network stack here; everything runs as root, so the
`certs` service gives the keys to root instead of the image's `tellus` user.

It starts the services in depends_on order, waiting for each healthcheck (or, for the one-shot
`certs` service, for it to exit 0), so the daemons and the CLI run with mutual TLS unless
TELLUS_INSECURE=1 is set, and with ZooKeeper ACLs (the credential `certs` makes) unless
TELLUS_ZK_INSECURE=1 is set; runs the word count
of examples/jobs through the `tellus` CLI service's settings and compares the result with a
count computed here; kills a worker (a lost VM) and checks its master notices and a job still
succeeds; kills and restarts a master (its supervisor's job) and runs a job again. Exit 0 and
"ALL OK" when everything held. Everything it started is stopped at the end.
"""
import argparse, os, subprocess, sys, time, signal, json, collections, re, tempfile
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
DOCKER_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(DOCKER_DIR)
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument('--bin', default=os.path.join(REPO, 'build', 'bin'), help='directory with the tellus binaries')
ap.add_argument('--work-dir', default=None, help='where state and logs go (default: a new temporary dir)')
opts = ap.parse_args()
if os.geteuid() != 0:
    sys.exit('needs root (private mount namespaces for /etc/hosts and bind mounts)')
for b in ('tellus-master', 'tellus-worker', 'tellus-jm', 'tellus-executor', 'tellus'):
    if not os.access(os.path.join(opts.bin, b), os.X_OK):
        sys.exit(f'{opts.bin}/{b} not found: run scripts/build first')
ROOT = opts.work_dir or tempfile.mkdtemp(prefix='tellus-compose-')
os.makedirs(ROOT, exist_ok=True)
print(f'state and logs in {ROOT}', flush=True)
# PyYAML resolves the compose file's `<<` merge keys itself.
cfg = yaml.safe_load(open(os.path.join(DOCKER_DIR, 'compose.yaml')))
services = {k: v for k, v in cfg['services'].items() if 'cli' not in (v.get('profiles') or [])}
names = sorted(services)
ip = {n: f'127.0.1.{i + 1}' for i, n in enumerate(names)}
hosts = os.path.join(ROOT, 'hosts')
with open(hosts, 'w') as f:
    f.write('127.0.0.1 localhost\n')
    for n in names:
        f.write(f'{ip[n]} {n}\n')
PATH = f'{DOCKER_DIR}:{os.path.join(REPO, "scripts")}:{os.path.abspath(opts.bin)}:/usr/sbin:/usr/bin:/sbin:/bin'
pids = {}


def interpolate(value):
    # Compose's ${VAR:-default} and ${VAR} (the only forms the file uses).
    def one(m):
        name, default = m.group(1), m.group(3) or ''
        return os.environ.get(name) or default if m.group(2) else os.environ.get(name, '')
    return re.sub(r'\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}', one, str(value))


def env_of(n):
    svc = services[n]
    env = {'PATH': PATH}
    env.update({k: interpolate(v) for k, v in (svc.get('environment') or {}).items()})
    d = os.path.join(ROOT, n)
    if 'ZK_MY_ID' in env:
        env.update(ZK_DATA_DIR=d + '/data', ZK_CONF_DIR=d + '/conf', ZK_QUORUM_LISTEN_ON_ALL_IPS='false',
                   ZK_CLIENT_ADDRESS=ip[n], ZK_HEAP_MB='128')
    elif (svc.get('command') or [None])[0] == 'certs':
        env.update(TELLUS_CERTS_OWNER='root')  # no `tellus` user here: the daemons run as root
    else:
        env.update(TELLUS_RUN_DIR=d + '/run')
    return env


def mounts_of(svc):
    # (source, destination, read-only): bind mounts are relative to the compose file; named
    # volumes are directories under the work dir, shared by every service that mounts them.
    out = []
    for v in svc.get('volumes') or []:
        parts = v.split(':')
        src, dst, ro = parts[0], parts[1], parts[2:] == ['ro']
        if src.startswith('.'):
            out.append((os.path.normpath(os.path.join(DOCKER_DIR, src)), dst, ro))
        else:
            out.append((os.path.join(ROOT, 'volumes', src), dst, ro))
    return out


def mount_script(svc):
    script = f'mount --bind {hosts} /etc/hosts'
    for src, dst, ro in mounts_of(svc):
        os.makedirs(src, exist_ok=True)
        script += f' && mount --bind {src} {dst}' + (f' && mount -o remount,bind,ro {dst}' if ro else '')
    return script


def start(n):
    svc = services[n]
    os.makedirs(os.path.join(ROOT, n), exist_ok=True)
    cmd = svc.get('command') or []
    if 'ZK_MY_ID' in (svc.get('environment') or {}):
        argv = ['zookeeper-entrypoint']
    else:
        argv = ['tellus-entrypoint'] + cmd
    script = mount_script(svc) + ' && exec ' + ' '.join(argv)
    log = open(os.path.join(ROOT, n + '.log'), 'w')
    p = subprocess.Popen(['unshare', '-m', '--propagation', 'private', 'bash', '-c', script],
                         env=env_of(n), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    pids[n] = p
    print(f'started {n} pid {p.pid} at {ip[n]}', flush=True)


def in_ns(n, argv, env=None, timeout=30):
    e = env_of(n)
    if env:
        e.update(env)
    return subprocess.run(['nsenter', '-m', '-t', str(pids[n].pid)] + argv, env=e, capture_output=True,
                          text=True, timeout=timeout)


def healthy(n):
    test = services[n]['healthcheck']['test']
    assert test[0] == 'CMD'
    r = in_ns(n, test[1:])
    return r.returncode == 0, (r.stdout + r.stderr).strip()


def wait_healthy(n, deadline_s=90):
    end = time.time() + deadline_s
    while time.time() < end:
        if pids[n].poll() is not None:
            sys.exit(f'{n} exited with {pids[n].returncode}; see {ROOT}/{n}.log')
        ok, msg = healthy(n)
        if ok:
            print(f'healthy {n}: {msg}', flush=True)
            return
        time.sleep(1)
    sys.exit(f'{n} not healthy in {deadline_s}s: {msg}')


def wait_completed(n, deadline_s=120):
    # A one-shot service (depends_on condition service_completed_successfully).
    try:
        rc = pids[n].wait(deadline_s)
    except subprocess.TimeoutExpired:
        sys.exit(f'{n} still running after {deadline_s}s; see {ROOT}/{n}.log')
    if rc != 0:
        sys.exit(f'{n} exited with {rc}; see {ROOT}/{n}.log')
    print(f'completed {n}', flush=True)


def up():
    started, ready = set(), set()
    while len(ready) < len(names):
        progressed = False
        for n in names:
            if n in started:
                continue
            deps = services[n].get('depends_on') or {}
            if all(d in ready for d in deps):
                start(n)
                started.add(n)
                progressed = True
        for n in names:
            if n in started and n not in ready:
                if 'healthcheck' in services[n]:
                    wait_healthy(n)
                else:
                    wait_completed(n)
                ready.add(n)
                progressed = True
                break
        assert progressed


def cli(args, timeout=120):
    # The CLI service: its environment (TELLUS_MASTER, its client certificate) and volumes from
    # the compose file, names resolved like in Compose.
    svc = cfg['services']['tellus']
    tellus_env = {k: interpolate(v) for k, v in svc['environment'].items()}
    assert any(dst == svc['working_dir'] for _, dst, _ in mounts_of(svc))
    script = mount_script(svc) + f' && cd {svc["working_dir"]} && exec tellus "$@"'
    return subprocess.run(['unshare', '-m', '--propagation', 'private', 'bash', '-c', script, 'tellus'] + args,
                          env=dict(PATH=PATH, **tellus_env), capture_output=True, text=True, timeout=timeout)


def down():
    for n, p in pids.items():
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for n, p in pids.items():
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def expected_counts():
    counts = collections.Counter()
    for site in ('us-east', 'eu-west', 'ap-south'):
        d = os.path.join(DOCKER_DIR, 'data', site, 'corpus')
        for f in sorted(os.listdir(d)):
            for w in re.findall(r'[a-z0-9]+', open(os.path.join(d, f)).read().lower()):
                counts[w] += 1
    return counts


def check_job(label):
    r = cli(['submit', '--wait', 'wordcount.yaml'])
    print(r.stdout[-600:], r.stderr[-600:])
    assert r.returncode == 0, f'{label}: submit failed'
    job = re.search(r'(job-\d+)', r.stdout).group(1)
    r = cli(['result', job])
    got = collections.Counter({l.split('\t')[0]: int(l.split('\t')[1]) for l in r.stdout.splitlines() if l})
    exp = expected_counts()
    assert got == exp, f'{label}: result differs: {set(got.items()) ^ set(exp.items())}'
    print(f'{label}: {job} result matches ({len(got)} words, {sum(got.values())} total)', flush=True)


# Bind mounts need their mount points; the ones made here are removed at the end.
made_dirs = []
for svc in list(services.values()) + [cfg['services']['tellus']]:
    for _, dst, _ in mounts_of(svc):
        missing = []
        d = dst
        while not os.path.exists(d):
            missing.append(d)
            d = os.path.dirname(d)
        for d in reversed(missing):
            os.mkdir(d)
            made_dirs.append(d)
try:
    up()
    print(cli(['sites']).stdout, flush=True)
    check_job('job 1')
    # ZooKeeper ACLs: every daemon authenticated with the credential `certs` installed, and
    # ZooKeeper's own client without it is refused the chroot's children.
    zk_env = services['master-us-east']['environment']
    if interpolate(zk_env['TELLUS_ZK_INSECURE']) not in ('1', 'true'):
        for n in names:
            if 'TELLUS_ZK_CREDENTIALS_FILE' in (services[n].get('environment') or {}):
                assert "authenticating as digest user 'tellus'" in open(os.path.join(ROOT, n + '.log')).read(), \
                    f'{n} did not authenticate to ZooKeeper'
        r = in_ns('zk-us-east', ['java', '-cp', '/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar',
                                 'org.apache.zookeeper.ZooKeeperMain', '-server', 'zk-us-east:2181', 'ls',
                                 zk_env['TELLUS_ZK_CHROOT']], timeout=60)
        refusal = re.search(r'Insufficient permission : \S+|NoAuth for \S+', r.stdout + r.stderr)
        assert refusal, f'an unauthenticated ZooKeeper client was not refused: {(r.stdout + r.stderr)[-800:]}'
        print(f'ZooKeeper ACLs on: every daemon authenticated; unauthenticated ls refused ({refusal.group(0)})', flush=True)
    # Drill: a spot VM is lost (`docker compose kill us-east-w2` = SIGKILL to everything in it).
    os.killpg(pids['us-east-w2'].pid, signal.SIGKILL)
    pids['us-east-w2'].wait()
    t0 = time.time()
    while time.time() - t0 < 30:
        st = in_ns('master-us-east', ['bash', '-c', 'exec 3<>/dev/tcp/master-us-east/7180; printf "GET /status HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n" >&3; cat <&3'])
        body = st.stdout.split('\n\n', 1)[-1]
        if not body.strip():
            time.sleep(0.5)
            continue
        w = {x['id']: x['alive'] for x in json.loads(body).get('workers', [])}
        if not w.get('us-east-w2', True):
            print(f'master-us-east saw us-east-w2 die after {time.time() - t0:.1f}s', flush=True)
            break
        time.sleep(0.5)
    else:
        sys.exit('master never marked us-east-w2 dead')
    # ... and the site record in ZooKeeper (what `tellus sites` and other masters see) follows.
    t0 = time.time()
    while True:
        line = next(l for l in cli(['sites']).stdout.splitlines() if l.startswith('us-east '))
        if '  workers 1  ' in line:
            print(f'published after {time.time() - t0:.1f}s: {line}', flush=True)
            break
        if time.time() - t0 > 10:
            sys.exit(f'the us-east site record still says: {line}')
        time.sleep(0.2)
    check_job('job 2 (one worker down)')
    # Drill: the master crashes and its supervisor restarts it (restart: unless-stopped).
    os.kill(pids['master-us-east'].pid, signal.SIGKILL)
    pids['master-us-east'].wait()
    start('master-us-east')
    wait_healthy('master-us-east')
    wait_healthy('us-east-w1')
    check_job('job 3 (after a master restart)')
    # Every connection here presented a certificate of the cluster's CA, the healthchecks' too:
    # a refused handshake in a daemon's log would mean a misissued or misplaced file.
    for n in names:
        refused = [l for l in open(os.path.join(ROOT, n + '.log'), errors='replace') if 'refused connection' in l]
        assert not refused, f'{n} refused connections: {refused[:3]}'
    print('no refused connection in any log')
    print('ALL OK')
finally:
    down()
    for d in reversed(made_dirs):
        os.rmdir(d)
