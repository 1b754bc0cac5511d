# The probe's GPU part: what each GPU is and how healthy (identity, memory, compute
# capability, modes, ECC, retired and remapped pages, clock event reasons), read once per
# check: through NVML (nvml.py, here or in the training environment's child), else nvidia-smi,
# else none; and the kernel log's Xid events. The watch's sampler reads what the GPUs do now
# (sampler_gpu.py); both pick their source through gpu.py.
# Joined into the probe (hostside/ship.py): standard library only, Python 3.6 syntax.

# One import a line (the alias keeps isort from merging them): the join drops lines.
from preflight.hostside.gpu import has_driver as has_driver  # joined
from preflight.hostside.gpu import import_pynvml as import_pynvml  # joined
from preflight.hostside.gpu import smi_fields_after as smi_fields_after  # joined
from preflight.hostside.gpu import which  # joined
from preflight.hostside.nvml import nvml_facts  # joined

SMI_FIELDS = ("index,name,uuid,memory.total,compute_cap,driver_version,vbios_version,"
              "ecc.mode.current,mig.mode.current,persistence_mode,power.limit,"
              "pcie.link.width.current,pcie.link.width.max")
# GPU health as nvidia-smi reports it, in the same terms as NVML's (collect/smi.py reads both):
# where the training environment lacks nvidia-ml-py, nvidia-smi is the only way to see a GPU
# with uncorrectable ECC errors, a pending page retirement or row remapping, or a slowdown.
SMI_HEALTH = ("ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
              "remapped_rows.pending,remapped_rows.failure,clocks_event_reasons.active")
# A field the driver's nvidia-smi does not know fails the whole query: gpu.py's
# smi_fields_after says what to ask for instead.
# Older nvidia-smi releases reject unknown fields (compute_cap came in 11.6-era drivers).
SMI_FIELDS_BASIC = "index,name,uuid,memory.total,driver_version"


def smi_query(smi, query, fmt):
    import subprocess
    p = subprocess.Popen([smi, query, "--format=" + fmt], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return None, "nvidia-smi %s did not answer within 20 s" % query.split("=")[0]
    if p.returncode != 0:
        # stderr apart: a warning there (a GPU nvidia-smi cannot reach) is not a CSV row.
        return None, (err + out).decode("utf-8", "replace").strip()[:300]
    return out.decode("utf-8", "replace"), None


def smi_facts(smi):
    fields = (SMI_FIELDS + "," + SMI_HEALTH).split(",")
    basic = SMI_FIELDS_BASIC.split(",")
    last = ""
    for _ in range(len(fields) + 2):  # bounded: each failure drops a field or ends
        out, last = smi_query(smi, "--query-gpu=" + ",".join(fields), "csv,noheader,nounits")
        if out is not None:
            facts = {"source": "nvidia-smi", "csv_fields": ",".join(fields),
                     "csv": out[:65536]}
            apps, _ = smi_query(smi, "--query-compute-apps=gpu_uuid", "csv,noheader")
            facts["apps"] = None if apps is None else apps[:65536]
            return facts
        again = smi_fields_after(fields, last, basic)
        if again is not None:
            fields = again
        elif fields != basic:
            fields = list(basic)
        else:
            break
    raise RuntimeError("nvidia-smi failed: %s" % last)


def local_pynvml():
    # site-packages (where pynvml usually is) only on a host with an NVIDIA driver.
    try:
        return import_pynvml(add_site=has_driver())
    except Exception:
        return None


XID_LINE = r"NVRM: Xid \(([^)]*)\): (\d+),\s*(.*)"


def xid_events(text=None):
    """The NVRM Xid lines of the kernel log since boot, [pci, code, text] each; or why the log
    could not be read (dmesg_restrict keeps it from users other than root)."""
    import re  # only on GPU hosts (see the imports above)
    pattern = re.compile(XID_LINE)
    if text is None:
        import subprocess
        try:
            p = subprocess.run(["dmesg"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=5)
        except Exception as e:
            return {"error": "dmesg: %s" % e}
        if p.returncode != 0:
            why = p.stderr.decode("utf-8", "replace").strip().splitlines()
            return {"error": "kernel log not readable: %s" % (why[-1][:200] if why else
                                                            "exit %d" % p.returncode)}
        text = p.stdout.decode("utf-8", "replace")
    events = []
    for line in text.splitlines():
        m = pattern.search(line)
        if m:
            events.append([m.group(1)[:64], int(m.group(2)), m.group(3).strip()[:160]])
    return {"events": events[-200:]}


def gpu_facts(pynvml, paddle):
    """GPUs (see gpu_inventory), and on a host with GPUs the Xid events of its kernel log."""
    facts = gpu_inventory(pynvml, paddle)
    if facts.get("devices") or facts.get("csv"):
        facts["xid"] = xid_events()
    return facts


def gpu_inventory(pynvml, paddle):
    """GPUs by NVML (here or in the training env's child), else nvidia-smi, else none."""
    errors = []
    if pynvml is not None:
        try:
            return nvml_facts(pynvml)
        except Exception as e:
            errors.append("NVML: %s: %s" % (type(e).__name__, e))
    child = paddle.get("nvml") if isinstance(paddle, dict) else None
    if isinstance(child, dict):
        if "error" not in child:
            return child
        errors.append("NVML in %s: %s" % (paddle.get("interpreter"), child["error"]))
    smi = which("nvidia-smi")
    if smi:
        return smi_facts(smi)
    if has_driver():
        # A driver without a working NVML or nvidia-smi is a broken install, not "no GPU".
        raise RuntimeError("NVIDIA driver present but no usable NVML or nvidia-smi (%s)"
                           % "; ".join(errors or ["pynvml not installed"]))
    return {"source": "none", "devices": []}

