"""Slurm as the transport: the nodes of an allocation, the probe as one job step through srun,
later commands as steps of the same job, the plan as a batch job; and acting on a verdict in
Slurm (drain and resume, a node's own health check)."""
