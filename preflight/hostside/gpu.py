# What the probe and the watch's sampler share of reading a host's GPUs: whether the host has
# an NVIDIA driver, nvidia-ml-py's pynvml where the host's python has it, nvidia-smi on the
# PATH, and the one rule for a query nvidia-smi rejects. Joined into both texts
# (hostside/ship.py), so: standard library only, Python 3.6 syntax.
import os
import sys

DRIVER_FILES = ("/proc/driver/nvidia/version", "/dev/nvidiactl")
# A field the driver's nvidia-smi does not know fails the whole query ('Field "F" is not a
# valid field to query.'): its older name is tried (r535 renamed clocks_throttle_reasons),
# else it is left out, one field at a time.
SMI_OLDER = {"clocks_event_reasons.active": "clocks_throttle_reasons.active"}
SMI_REJECTED = ('Field "', '" is not a valid field to query')


def has_driver():
    return any(os.path.exists(p) for p in DRIVER_FILES)


def import_pynvml(add_site=True):
    """nvidia-ml-py's pynvml; raises where it cannot be imported. Hosts start preflight's
    programs with -S (site costs ~1.5 ms per host) and pynvml is usually in site-packages:
    with add_site they are added first."""
    if add_site and sys.flags.no_site:
        import site
        site.main()
    import pynvml
    return pynvml


def which(name):
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def rejected_field(text):
    """The field nvidia-smi named in its refusal of a query; None where it named none."""
    start = text.find(SMI_REJECTED[0])
    end = text.find(SMI_REJECTED[1], start + 1)
    return text[start + len(SMI_REJECTED[0]):end] if start >= 0 and end > start else None


def smi_fields_after(fields, refusal, keep):
    """The fields to ask for again after nvidia-smi refused a query with the text refusal:
    the field it named under its older name, else without it (unless it is one of keep);
    None where neither applies."""
    bad = rejected_field(refusal)
    if bad in SMI_OLDER and bad in fields:
        return [SMI_OLDER[bad] if f == bad else f for f in fields]
    if bad in fields and bad not in keep:
        return [f for f in fields if f != bad]
    return None
