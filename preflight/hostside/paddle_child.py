# The Paddle part of the probe, run by the probe in a child process with the training
# environment's python: importing Paddle can take seconds, print noise, or crash, and must
# not take the probe down with it. Standard library and Paddle only, Python 3.6 syntax.
import json
import sys
import time

# What the probe passes: the line's marker, whether to read NVML here (the probe's own
# python lacks pynvml), and the source of nvml.py (defining nvml_facts).
MARK, WANT_NVML, NVML_SRC = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
out = {"python": "%d.%d.%d" % tuple(sys.version_info[:3]),
       "executable": sys.executable}  # type: dict
started = time.time()
try:
    import paddle
except BaseException as e:
    out["available"] = False
    out["reason"] = "%s: %s" % (type(e).__name__, str(e)[:300])
else:
    # How long the import took here, every host importing at once as the job's ranks do:
    # the all-reduce sizes the patience of its launch from it.
    out["import_s"] = round(time.time() - started, 3)
    out["available"] = True
    v = paddle.version
    def call(name):
        a = getattr(v, name, None)
        if a is None:
            return None
        try:
            r = a() if callable(a) else a
        except Exception:
            return None
        return r if isinstance(r, (list, int)) else str(r)
    out["version"] = str(getattr(paddle, "__version__", ""))
    out["full_version"] = str(getattr(v, "full_version", ""))
    out["commit"] = str(getattr(v, "commit", ""))
    for key in ("cuda", "cudnn", "nccl", "cuda_archs"):
        out[key] = call(key)
    for key, fn in (("compiled_with_cuda", "is_compiled_with_cuda"),
                    ("compiled_with_distribute", "is_compiled_with_distribute")):
        try:
            out[key] = bool(getattr(paddle, fn)())
        except Exception:
            out[key] = None
    # The protobuf Paddle loaded: 7 removed FieldDescriptor.label, which Paddle's
    # DistributedStrategy reads to set a_sync: a PS job then dies in its first lines.
    pb = sys.modules.get("google.protobuf")
    out["protobuf"] = str(getattr(pb, "__version__", "")) or None
    core = None
    for mod in ("paddle.base.core", "paddle.fluid.core"):
        try:
            core = __import__(mod, fromlist=["core"])
            break
        except Exception:
            pass
    # The PS core is absent from 3.1+ CPU wheels: PS mode then cannot run at all.
    out["ps_core"] = None if core is None else all(
        hasattr(core, n) for n in ("CommContext", "DistCommunicator", "DistFleetWrapper"))
    # What is loaded, not what Paddle was built with: the NCCL of the nvidia-nccl-cu* wheel
    # (2.6 has no paddle.version.nccl at all) and the cuDNN found at run time. GPU builds only.
    def loaded(fn):
        try:
            r = fn()
        except Exception:
            return None
        return str(r) if r else None
    gpu_build = out.get("compiled_with_cuda")
    out["nccl_runtime"] = loaded(core.nccl_version) if gpu_build and core is not None \
        and hasattr(core, "nccl_version") else None
    out["cudnn_runtime"] = loaded(paddle.device.get_cudnn_version) if gpu_build else None
    if gpu_build:
        # A tiny op on every GPU Paddle sees: allocate, compute, bring back. What a build
        # without this GPU's architecture ("no kernel image is available"), a failed CUDA
        # init or a Fabric Manager that is down does, it does here, not in the job.
        try:
            visible = int(paddle.device.cuda.device_count())
        except Exception as e:
            visible = 0
            out["gpu_error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
        out["gpu_visible"] = visible
        ops = []
        for i in range(min(visible, 64)):
            try:
                paddle.set_device("gpu:%d" % i)
                n = 1 << 20
                got = float((paddle.ones([n], dtype="float32") * 2).sum())
                ops.append({"index": i, "error": None if got == 2.0 * n else
                            "computed %r instead of %r" % (got, 2.0 * n)})
            except Exception as e:
                ops.append({"index": i, "error": "%s: %s" % (type(e).__name__,
                                                             str(e).strip()[:300])})
        out["gpu_ops"] = ops
if WANT_NVML:
    try:
        import pynvml
    except Exception:
        pass
    else:
        try:
            nvml = {}  # type: dict
            exec(NVML_SRC, nvml)
            out["nvml"] = nvml["nvml_facts"](pynvml)
        except Exception as e:
            out["nvml"] = {"error": "%s: %s" % (type(e).__name__, str(e)[:300])}
sys.stdout.write("\n" + MARK + json.dumps(out) + "\n")
