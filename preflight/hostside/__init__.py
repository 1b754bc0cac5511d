"""What runs on the hosts: standard library only (the job scripts also Paddle), Python 3.6
syntax, every part guarded so that a failure is an "error" in what it prints, never a crash.

- probe (with its fact families probe_cpu, probe_net, probe_gpu, probe_paddle, and procfs,
  cgroup, container, gpu, nvml, paddle_child): the facts of one host, one round trip
- sampler (with sampler_rank, sampler_gpu, stephook, and procfs, cgroup, gpu): the watch's
  samples of a running job, a line each
- allreduce, ps_round: the Paddle jobs preflight starts, run by Paddle's own launcher
- master_free, port_listener, port_connector, reap: the short helpers of a run (is the
  master's port free, the port reach both ends, the stop of a run's processes)
- ship: joins each program's parts (those its "# joined" lines import, theirs first) into
  one text and packs it for the way it travels (the one module here that is not shipped)
"""
