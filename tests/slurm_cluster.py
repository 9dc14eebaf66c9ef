"""A real single-node SLURM cluster that tests can start and tear down.

Plain Python, no pytest dependency. Usage::

    from slurm_cluster import SlurmCluster, cluster_unavailable_reason

    reason = cluster_unavailable_reason()
    if reason is None:
        with SlurmCluster(tmp_path) as cluster:
            cluster.run("sbatch", "--wrap", "hostname")

What it does (measured on Debian 12 / SLURM 22.05, running as root):

* ``slurm.conf`` and ``gres.conf`` go to ``/etc/slurm`` -- the job-step
  plugin drops ``SLURM_CONF``, so a custom config path does not reach job
  steps.  A pre-existing foreign ``slurm.conf``/``gres.conf`` is backed up and
  restored by :meth:`SlurmCluster.stop`.
* Everything else (state, spool, logs, pid files, the fake GPU device node)
  lives under ``workdir`` -- except munged's pid and log file, which stay in
  /run/munge and /var/log/munge because user munge cannot enter a 0700
  pytest tmp dir.
* One node named after ``hostname -s`` with all CPUs of the machine, a bit
  less memory than the machine has and one fake GPU (a character device
  ``c 195 0``, i.e. what ``/dev/nvidia0`` would be) so that ``--gpus=1`` is
  schedulable.  One partition, :attr:`SlurmCluster.partition`, is default.
* No accounting (no slurmdbd): ``sacct`` does not work, so Snakemake's SLURM
  executor (plugin 2.8.0) needs ``--slurm-status-command squeue`` (profile
  key ``slurm-status-command: squeue``) -- its default is ``sacct`` whenever
  the sacct binary exists, and then it polls forever.  ``MinJobAge=600``
  keeps finished jobs visible to ``squeue``; the plugin silently switches
  back to sacct when MinJobAge < 3 x ``--slurm-init-seconds-before-status-checks``
  (default 40 s).  Rule resource ``gpu: 1`` becomes ``sbatch --gpus=1``.
* ``munged`` runs as user ``munge``; a ``munged`` that already answers is
  reused and left running.

Every external command runs with a timeout, and :meth:`SlurmCluster.stop`
(scancel, then SIGTERM and SIGKILL after a bounded wait) is idempotent, so a
hung daemon cannot hang the test session.  stop() also runs at exit and on
SIGTERM; daemons left by a SIGKILLed session are stopped by the next start().
Only one cluster can run per machine (fixed ports, fixed /etc/slurm).
"""

from __future__ import annotations

import atexit
import os
import platform
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import threading
import time
from pathlib import Path

from processes import _cmdline, _kill_job_leftovers, _kill_pidfile, _pid_alive, _read_pid  # noqa: F401 (re-exported)

REPO = Path(__file__).resolve().parent.parent
INSTALL_SCRIPT = REPO / ".ci" / "install-slurm.sh"

SLURM_CONF_DIR = Path("/etc/slurm")
MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_RUN_DIR = Path("/run/munge")
MUNGE_SOCKET = MUNGE_RUN_DIR / "munge.socket.2"
MUNGED_PIDFILE = MUNGE_RUN_DIR / "munged.pid"
MUNGED_LOG = Path("/var/log/munge/munged.log")
# Written into every config file we own, so that we never clobber (or delete)
# a config we did not write.
MARKER = "# written by crosslayer tests/slurm_cluster.py"
# Pid files of daemons started by any SlurmCluster, so that a later session can
# clean up after one that was killed before it could stop its daemons.
REGISTRY = Path("/run/crosslayer-slurm-pids")

SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
REQUIRED = ("sinfo", "squeue", "sbatch", "scancel", "scontrol", "slurmctld", "slurmd", "munged")

_reason_cache: list[str | None] = []


def _missing_tools() -> list[str]:
    return [t for t in REQUIRED if shutil.which(t, path=_path()) is None]


def _path() -> str:
    # slurmctld/slurmd/munged live in /usr/sbin, which a non-login PATH may lack
    path = os.environ.get("PATH", "")
    extra = [p for p in ("/usr/sbin", "/sbin", "/usr/bin") if p not in path.split(":")]
    return ":".join([path, *extra]) if path else ":".join(extra)


def cluster_unavailable_reason() -> str | None:
    """None when a SLURM cluster can be started here, else why not.

    When the SLURM packages are missing and we are root on a Debian-like
    system, installs them with ``.ci/install-slurm.sh`` (bounded in time).
    The answer is cached for the life of the process.
    """
    if not _reason_cache:
        _reason_cache.append(_compute_reason())
    return _reason_cache[0]


def _compute_reason() -> str | None:
    if platform.system() != "Linux":
        return f"a SLURM test cluster needs Linux, this is {platform.system()}"
    if os.geteuid() != 0:
        return (
            "a SLURM test cluster needs root (it writes /etc/slurm/slurm.conf and "
            "runs slurmctld/slurmd/munged); run the tests as root, e.g. in CI"
        )
    missing = _missing_tools()
    if not missing:
        return None
    if shutil.which("apt-get") is None:
        return f"SLURM tools missing ({', '.join(missing)}) and no apt-get to install them"
    if not INSTALL_SCRIPT.exists():
        return f"SLURM tools missing ({', '.join(missing)}) and {INSTALL_SCRIPT} not found"
    try:
        proc = subprocess.run(
            ["bash", str(INSTALL_SCRIPT)],
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "PATH": _path()},
        )
    except subprocess.TimeoutExpired:
        return f"SLURM tools missing ({', '.join(missing)}); {INSTALL_SCRIPT.name} timed out"
    missing = _missing_tools()
    if proc.returncode != 0 or missing:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        return (
            f"SLURM tools missing ({', '.join(missing) or 'none'}); "
            f"{INSTALL_SCRIPT.name} exited {proc.returncode}: " + " | ".join(tail)
        )
    return None


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _mem_total_mb() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    raise RuntimeError("MemTotal not found in /proc/meminfo")


class SlurmCluster:
    """A single-node SLURM cluster (munged + slurmctld + slurmd) for tests."""

    partition = "debug"

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir).resolve()
        self.hostname = socket.gethostname().split(".")[0]
        self.cpus = os.cpu_count() or 1
        mem = _mem_total_mb()
        # a bit below the machine's memory: slurmd drains a node whose
        # RealMemory is above what it measures
        self.real_memory_mb = max(256, min(mem - 512, int(mem * 0.9)))
        self.def_mem_per_cpu_mb = max(100, min(1000, self.real_memory_mb // self.cpus))
        self.gpu_device = self.workdir / "dev" / "nvidia0"
        self.slurm_conf = SLURM_CONF_DIR / "slurm.conf"
        self.gres_conf = SLURM_CONF_DIR / "gres.conf"
        self._started_munged = False
        self._backups: dict[Path, Path] = {}
        self._written: list[Path] = []
        self._env = {**os.environ, "PATH": _path()}
        self._env.pop("SLURM_CONF", None)
        self._old_sigterm = None

    # -- paths -----------------------------------------------------------------

    @property
    def log_dir(self) -> Path:
        """Directory holding slurmctld.log and slurmd.log.

        munged (run as user munge) logs to /var/log/munge/munged.log instead.
        """
        return self.workdir / "log"

    @property
    def state_dir(self) -> Path:
        return self.workdir / "state"

    @property
    def spool_dir(self) -> Path:
        return self.workdir / "spool"

    @property
    def run_dir(self) -> Path:
        return self.workdir / "run"

    @property
    def slurmctld_pidfile(self) -> Path:
        return self.run_dir / "slurmctld.pid"

    @property
    def slurmd_pidfile(self) -> Path:
        return self.run_dir / "slurmd.pid"

    @property
    def munged_pidfile(self) -> Path:
        return MUNGED_PIDFILE

    def pids(self) -> dict[str, int | None]:
        """Pids of the daemons this cluster started (None where unknown)."""
        out = {
            "slurmctld": _read_pid(self.slurmctld_pidfile),
            "slurmd": _read_pid(self.slurmd_pidfile),
        }
        if self._started_munged:
            out["munged"] = _read_pid(self.munged_pidfile)
        return out

    # -- context manager -------------------------------------------------------

    def __enter__(self) -> "SlurmCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- commands --------------------------------------------------------------

    def run(self, *args, timeout=30) -> subprocess.CompletedProcess:
        """Run a SLURM client command (sinfo, squeue, sbatch, ...), text output.

        Never raises on a non-zero exit; raises subprocess.TimeoutExpired when
        the command takes longer than timeout seconds.
        """
        return subprocess.run(
            [str(a) for a in args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self._env,
            stdin=subprocess.DEVNULL,
        )

    def _daemon(self, argv: list[str], timeout: float = 30) -> None:
        """Start a self-daemonizing program; it must fork and return quickly."""
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self._env,
            start_new_session=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
                + self._log_tails()
            )

    def _log_tails(self, lines: int = 30) -> str:
        out = []
        logs = sorted(self.log_dir.glob("*.log")) if self.log_dir.exists() else []
        for log in [*logs, MUNGED_LOG]:
            try:
                tail = log.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            out.append(f"\n--- {log} (last {lines} lines) ---\n" + "\n".join(tail))
        return "".join(out)

    # -- start -----------------------------------------------------------------

    def start(self, timeout=90) -> "SlurmCluster":
        """Write configs, start munged/slurmctld/slurmd, wait until the node is idle."""
        reason = cluster_unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"cannot start a SLURM cluster: {reason}")
        deadline = time.monotonic() + timeout
        self._guard_exit()
        try:
            self._clean_leftovers()
            for port in (SLURMCTLD_PORT, SLURMD_PORT):
                if _port_in_use(port):
                    raise RuntimeError(
                        f"port {port} is already in use: another slurmctld/slurmd runs "
                        "on this machine; stop it first"
                    )
            self._make_dirs()
            self._write_configs()
            self._start_munged()
            self._add_registry(self.slurmctld_pidfile)
            self._add_registry(self.slurmd_pidfile)
            self._daemon(["slurmctld", "-c"])
            self._wait_for(
                lambda: self.run("scontrol", "ping", timeout=10).stdout.count("UP") > 0,
                deadline,
                "slurmctld to answer `scontrol ping`",
            )
            self._daemon(["slurmd"])
            self._wait_for(self._node_idle, deadline, f"node {self.hostname} to become idle")
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for(self, cond, deadline: float, what: str) -> None:
        while True:
            try:
                if cond():
                    return
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}" + self._log_tails())
            time.sleep(0.5)

    def _node_idle(self) -> bool:
        proc = self.run("sinfo", "-h", "-N", "-n", self.hostname, "-o", "%t", timeout=10)
        state = proc.stdout.strip()
        if state.startswith(("drain", "drng", "inval", "fail")):
            reason = self.run("scontrol", "show", "node", self.hostname, timeout=10).stdout
            raise RuntimeError(f"node {self.hostname} is {state}:\n{reason}" + self._log_tails())
        return state == "idle"

    def _make_dirs(self) -> None:
        for d in (self.workdir, self.log_dir, self.state_dir, self.spool_dir, self.run_dir,
                  self.gpu_device.parent):
            d.mkdir(parents=True, exist_ok=True)
        if not self.gpu_device.exists():
            os.mknod(self.gpu_device, 0o666 | stat.S_IFCHR, os.makedev(195, 0))

    def slurm_conf_text(self) -> str:
        return "\n".join([
            MARKER,
            "ClusterName=crosslayer",
            f"SlurmctldHost={self.hostname}(127.0.0.1)",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"SlurmctldPort={SLURMCTLD_PORT}",
            f"SlurmdPort={SLURMD_PORT}",
            "AuthType=auth/munge",
            "CryptoType=crypto/munge",
            "MpiDefault=none",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "SchedulerType=sched/backfill",
            # start jobs right after submission instead of the next periodic pass
            "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0",
            "GresTypes=gpu",
            "ReturnToService=2",
            # finished jobs stay in squeue for 10 min: Snakemake's squeue
            # status command needs >= 3 x its initial status-check interval
            "MinJobAge=600",
            f"DefMemPerCPU={self.def_mem_per_cpu_mb}",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=60",
            "InactiveLimit=0",
            "KillWait=5",
            "Waittime=0",
            f"StateSaveLocation={self.state_dir}",
            f"SlurmdSpoolDir={self.spool_dir}",
            f"SlurmctldPidFile={self.slurmctld_pidfile}",
            f"SlurmdPidFile={self.slurmd_pidfile}",
            f"SlurmctldLogFile={self.log_dir / 'slurmctld.log'}",
            f"SlurmdLogFile={self.log_dir / 'slurmd.log'}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            f"NodeName={self.hostname} NodeAddr=127.0.0.1 CPUs={self.cpus} "
            f"RealMemory={self.real_memory_mb} Gres=gpu:1 State=UNKNOWN",
            f"PartitionName={self.partition} Nodes={self.hostname} Default=YES "
            "MaxTime=INFINITE State=UP",
            "",
        ])

    def gres_conf_text(self) -> str:
        return f"{MARKER}\nNodeName={self.hostname} Name=gpu File={self.gpu_device}\n"

    def _write_configs(self) -> None:
        SLURM_CONF_DIR.mkdir(parents=True, exist_ok=True)
        for path, text in ((self.slurm_conf, self.slurm_conf_text()),
                           (self.gres_conf, self.gres_conf_text())):
            if path.exists() and MARKER not in path.read_text(errors="replace"):
                backup = path.with_name(path.name + ".crosslayer-backup")
                shutil.copy2(path, backup)
                self._backups[path] = backup
            path.write_text(text)
            path.chmod(0o644)
            self._written.append(path)

    # -- munge -----------------------------------------------------------------

    def _munge_works(self) -> bool:
        if not MUNGE_SOCKET.exists() or shutil.which("munge", path=_path()) is None:
            return False
        try:
            cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=10,
                                  env=self._env, stdin=subprocess.DEVNULL)
            if cred.returncode != 0:
                return False
            check = subprocess.run(["unmunge"], input=cred.stdout, capture_output=True,
                                   timeout=10, env=self._env)
            return check.returncode == 0
        except (subprocess.TimeoutExpired, OSError):
            return False

    def _start_munged(self) -> None:
        if self._munge_works():
            return  # a munged already runs (e.g. systemd's); reuse, leave it alone
        munge = pwd.getpwnam("munge")
        uid, gid = munge.pw_uid, munge.pw_gid
        for d, mode in ((MUNGE_KEY.parent, 0o700), (Path("/var/lib/munge"), 0o711),
                        (Path("/var/log/munge"), 0o700), (MUNGE_RUN_DIR, 0o755)):
            d.mkdir(parents=True, exist_ok=True)
            os.chown(d, uid, gid)
            d.chmod(mode)
        if not MUNGE_KEY.exists():
            with open(MUNGE_KEY, "wb") as fh:
                fh.write(os.urandom(1024))
        os.chown(MUNGE_KEY, uid, gid)
        MUNGE_KEY.chmod(0o400)
        # munged runs as user munge, which cannot enter a 0700 pytest tmp dir,
        # so its pid and log files stay in the standard munge-owned places
        MUNGED_LOG.touch()
        os.chown(MUNGED_LOG, uid, gid)
        self._daemon([
            "setpriv", f"--reuid={uid}", f"--regid={gid}", "--init-groups",
            "munged", "--force", f"--pid-file={self.munged_pidfile}", f"--log-file={MUNGED_LOG}",
        ])
        self._started_munged = True
        self._add_registry(self.munged_pidfile)
        deadline = time.monotonic() + 15
        self._wait_for(self._munge_works, deadline, "munged to answer")

    # -- stop ------------------------------------------------------------------

    def _add_registry(self, pidfile: Path) -> None:
        try:
            lines = set(REGISTRY.read_text().split()) if REGISTRY.exists() else set()
            lines.add(str(pidfile))
            REGISTRY.write_text("\n".join(sorted(lines)) + "\n")
        except OSError:
            pass

    def _clean_leftovers(self) -> None:
        """Stop daemons a previous SlurmCluster started but never stopped."""
        if not REGISTRY.exists():
            return
        for line in REGISTRY.read_text().split():
            pidfile = Path(line)
            name = pidfile.stem  # slurmctld / slurmd / munged
            _kill_pidfile(pidfile, name)
        REGISTRY.unlink(missing_ok=True)

    def _guard_exit(self) -> None:
        """Make sure stop() runs when the process exits or gets SIGTERM.

        atexit covers a normal exit without stop(); SIGTERM (e.g. from
        `timeout` in CI) is turned into SystemExit so that `finally` blocks,
        context managers and pytest fixture teardowns run -- but only when no
        one else installed a SIGTERM handler. SIGKILL cannot be caught: the
        next start() stops such leftovers via the pid-file registry.
        """
        atexit.register(self.stop)
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
            def _on_sigterm(signum, frame):
                raise SystemExit(128 + signum)

            self._old_sigterm = signal.signal(signal.SIGTERM, _on_sigterm)

    def _unguard_exit(self) -> None:
        atexit.unregister(self.stop)
        if self._old_sigterm is not None:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, self._old_sigterm)
            self._old_sigterm = None

    def stop(self) -> None:
        """Cancel all jobs and stop the daemons this cluster started. Idempotent."""
        self._unguard_exit()
        ctld = _read_pid(self.slurmctld_pidfile)
        if ctld is not None and _pid_alive(ctld) and "slurmctld" in _cmdline(ctld):
            try:
                self.run("scancel", "--full", "--quiet", "--user", "root", timeout=10)
                # give slurmd a moment to kill job steps before it goes away
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    q = self.run("squeue", "-h", "-t", "PD,R,CG,S", "-o", "%i", timeout=10)
                    if q.returncode != 0 or not q.stdout.strip():
                        break
                    time.sleep(0.5)
            except (subprocess.TimeoutExpired, OSError):
                pass
        _kill_pidfile(self.slurmd_pidfile, "slurmd")
        _kill_pidfile(self.slurmctld_pidfile, "slurmctld")
        _kill_job_leftovers()
        stopped = [self.slurmd_pidfile, self.slurmctld_pidfile]
        if self._started_munged:
            _kill_pidfile(self.munged_pidfile, "munged")
            stopped.append(self.munged_pidfile)
            self._started_munged = False
        for path in self._written:
            try:
                if path.exists() and MARKER in path.read_text(errors="replace"):
                    path.unlink()
            except OSError:
                pass
        self._written.clear()
        for path, backup in self._backups.items():
            try:
                shutil.move(str(backup), str(path))
            except OSError:
                pass
        self._backups.clear()
        if REGISTRY.exists():
            try:
                ours = {str(p) for p in stopped}
                keep = [line for line in REGISTRY.read_text().split() if line not in ours]
                if keep:
                    REGISTRY.write_text("\n".join(keep) + "\n")
                else:
                    REGISTRY.unlink()
            except OSError:
                pass
