# preflight watch, the sampler's GPU part: what each GPU of the host does now (utilisation,
# SM clock against its maximum, clock event reasons, temperature, power, the processes on it)
# and which GPUs each rank drives.
#
# Joined into the sampler (hostside/ship.py), so: standard library only, Python 3.6
# syntax, every read guarded. Through NVML where the sampler's python can import nvidia-ml-py
# (pynvml); else through one nvidia-smi left running for the sampler's life (--loop-ms),
# whose rows a thread keeps: one process for the whole watch, not one a sample. A host
# without an NVIDIA driver tries neither and its samples carry no GPU part.
import subprocess
import threading
import time

from preflight.hostside.gpu import has_driver as has_driver  # joined
from preflight.hostside.gpu import import_pynvml as import_pynvml  # joined
from preflight.hostside.gpu import smi_fields_after as smi_fields_after  # joined
from preflight.hostside.gpu import which  # joined

NVML_CLOCK_SM = 1  # nvml.h: NVML_CLOCK_SM
NVML_TEMPERATURE_GPU = 0  # nvml.h: NVML_TEMPERATURE_GPU
SMI_FIELDS = ("index", "uuid", "utilization.gpu", "utilization.memory", "clocks.sm",
              "clocks.max.sm", "clocks_event_reasons.active", "temperature.gpu", "power.draw")
SMI_REQUIRED = ("index", "uuid")
SMI_KEYS = {"utilization.gpu": "util", "utilization.memory": "mem_util", "clocks.sm": "sm",
            "clocks.max.sm": "sm_max", "clocks_event_reasons.active": "reasons",
            "clocks_throttle_reasons.active": "reasons", "temperature.gpu": "temp",
            "power.draw": "power_w"}
SMI_START_S = 20.0  # for nvidia-smi to answer its first query
MAX_PIDS = 64  # processes listed a GPU


def gpu_reader(interval_s, always=False):
    """The host's GPU reader: NvmlGpus, else SmiGpus; None on a host without an NVIDIA
    driver (unless always); a dict {"error": why} where neither can be read."""
    if not always and not has_driver():
        return None
    why = []
    try:
        return NvmlGpus(import_pynvml())
    except Exception as e:
        why.append("NVML: %s: %s" % (type(e).__name__, str(e)[:200]))
    smi = which("nvidia-smi")
    if smi is None:
        why.append("no nvidia-smi on the PATH")
        return {"error": "; ".join(why)}
    try:
        return SmiGpus(smi, interval_s)
    except Exception as e:
        why.append("nvidia-smi: %s" % str(e)[:300])
        return {"error": "; ".join(why)}


def text(x):
    return x.decode() if isinstance(x, bytes) else str(x)


class NvmlGpus(object):
    source = "nvml"

    def __init__(self, nvml):
        nvml.nvmlInit()
        self.nvml = nvml
        self.handles, self.uuids, self.sm_max = [], [], []
        for i in range(nvml.nvmlDeviceGetCount()):
            h = self._call(nvml.nvmlDeviceGetHandleByIndex, i)
            ok = not isinstance(h, Exception)
            self.handles.append(h)
            uuid = self._call(nvml.nvmlDeviceGetUUID, h) if ok else None
            self.uuids.append(None if isinstance(uuid, Exception) else text(uuid))
            top = self._call(nvml.nvmlDeviceGetMaxClockInfo, h, NVML_CLOCK_SM) if ok else None
            self.sm_max.append(top if isinstance(top, int) else None)

    @staticmethod
    def _call(fn, *args):
        try:
            return fn(*args)
        except Exception as e:
            return e

    def _reasons(self, h):
        # Drivers before r535 lack the newer call in libnvidia-ml (FunctionNotFound).
        for name in ("nvmlDeviceGetCurrentClocksEventReasons",
                     "nvmlDeviceGetCurrentClocksThrottleReasons"):
            fn = getattr(self.nvml, name, None)
            got = self._call(fn, h) if fn is not None else None
            if isinstance(got, int):
                return got
        return None

    def sample(self):
        n = self.nvml
        out = []
        for i, h in enumerate(self.handles):
            g = {"i": i}  # type: dict
            out.append(g)
            if isinstance(h, Exception):
                g["error"] = "%s: %s" % (type(h).__name__, h)
                continue
            util = self._call(n.nvmlDeviceGetUtilizationRates, h)
            if isinstance(util, Exception):  # a GPU that answers nothing says why once
                g["error"] = "%s: %s" % (type(util).__name__, util)
            else:
                g["util"], g["mem_util"] = int(util.gpu), int(util.memory)
            for key, got in (("sm", self._call(n.nvmlDeviceGetClockInfo, h, NVML_CLOCK_SM)),
                             ("temp", self._call(n.nvmlDeviceGetTemperature, h,
                                                 NVML_TEMPERATURE_GPU)),
                             ("power_w", self._call(n.nvmlDeviceGetPowerUsage, h))):
                if isinstance(got, int):
                    g[key] = round(got / 1000.0, 1) if key == "power_w" else got  # mW
            if self.sm_max[i] is not None:
                g["sm_max"] = self.sm_max[i]
            reasons = self._reasons(h)
            if reasons is not None:
                g["reasons"] = reasons
            procs = self._call(n.nvmlDeviceGetComputeRunningProcesses, h)
            if isinstance(procs, list):
                g["pids"] = [int(p.pid) for p in procs[:MAX_PIDS]]
        return out


def smi_value(key, raw):
    raw = raw.strip()
    if not raw or raw.startswith("[") or raw in ("N/A", "Unknown Error"):
        return None  # [N/A], [Not Supported], [Insufficient Permissions], [GPU is lost]
    try:
        if key == "reasons":
            return int(raw, 16)
        if key == "power_w":
            return round(float(raw), 1)
        return int(float(raw))
    except ValueError:
        return None


def smi_row(fields, line):
    """One row of `nvidia-smi --query-gpu=fields --format=csv,noheader,nounits` as a GPU's
    figures; None where it is not one (a warning line, a cut row)."""
    values = [v.strip() for v in line.split(",")]
    if len(values) != len(fields) or not values[0].isdigit():
        return None
    g = {"i": int(values[0])}  # type: dict
    for f, v in zip(fields, values):
        key = SMI_KEYS.get(f)
        if key is not None:
            got = smi_value(key, v)
            if got is not None:
                g[key] = got
    return g


class SmiGpus(object):
    source = "nvidia-smi"

    def __init__(self, smi, interval_s):
        fields = list(SMI_FIELDS)
        for _ in range(len(SMI_FIELDS) + 1):  # bounded: each failure drops or renames one
            p = subprocess.Popen([smi, "--query-gpu=" + ",".join(fields),
                                  "--format=csv,noheader,nounits"], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT)
            try:
                first = p.communicate(timeout=SMI_START_S)[0].decode("utf-8", "replace")
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                raise RuntimeError("no answer within %g s" % SMI_START_S) from None
            if p.returncode == 0:
                break
            again = smi_fields_after(fields, first, SMI_REQUIRED)
            if again is None:
                raise RuntimeError("exit %d: %s" % (p.returncode, first.strip()[:300]))
            fields = again
        else:
            raise RuntimeError("no query it accepts")
        self.fields = fields
        self.rows, self.seen = {}, {}
        self.uuids = []
        for line in first.splitlines():  # its first answer: every GPU's row and UUID
            if self._keep(line):
                self.uuids.append(line.split(",")[1].strip())
        self.lock = threading.Lock()
        # Left running: it prints every GPU's row each loop; it ends with the sampler (its
        # next write to a closed pipe) or when the sampler closes it.
        self.proc = subprocess.Popen(
            [smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits",
             "--loop-ms=%d" % max(100, int(interval_s * 1000))],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.interval_s = interval_s
        t = threading.Thread(target=self._read, name="nvidia-smi")
        t.daemon = True
        t.start()

    def _keep(self, line):
        g = smi_row(self.fields, line)
        if g is not None:
            self.rows[g["i"]], self.seen[g["i"]] = g, time.monotonic()
        return g is not None

    def _read(self):
        stdout = self.proc.stdout
        assert stdout is not None
        for raw in iter(stdout.readline, b""):
            with self.lock:
                self._keep(raw.decode("utf-8", "replace"))

    def sample(self):
        now = time.monotonic()
        with self.lock:
            rows = [(dict(self.rows[i]), now - self.seen[i]) for i in sorted(self.rows)]
        out = []
        for g, age in rows:
            if age > 3 * self.interval_s + 5:  # nvidia-smi stopped answering (a lost GPU)
                g = {"i": g["i"], "error": "nvidia-smi said nothing of it for %.0f s" % age}
            out.append(g)
        if self.proc.poll() is not None:
            raise RuntimeError("nvidia-smi --loop-ms ended (exit %s)" % self.proc.returncode)
        return out

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()


def rank_gpus(pid, who, gpus, uuids):
    """The GPU indices the rank drives: those NVML lists its pid on, else what Paddle's
    launcher gave it (FLAGS_selected_gpus, an index into CUDA_VISIBLE_DEVICES when set: a
    number or a GPU UUID); None where neither says."""
    on = [g["i"] for g in gpus if pid in (g.get("pids") or ())]
    if on:
        return on
    sel = who.get("FLAGS_selected_gpus")
    if not sel:
        return None
    visible = who.get("CUDA_VISIBLE_DEVICES")
    items = [v.strip() for v in visible.split(",")] if visible is not None else None
    out = []
    for s in sel.split(","):
        s = s.strip()
        if not s.isdigit():
            return None
        k = int(s)
        if items is None:
            out.append(k)
            continue
        if k >= len(items):
            return None
        v = items[k]
        if v.isdigit():
            out.append(int(v))
            continue
        # A UUID, whole or the leading part CUDA accepts ("GPU-5a1b").
        found = [i for i, u in enumerate(uuids) if u and v and u.startswith(v)]
        if len(found) != 1:
            return None
        out.append(found[0])
    return out
