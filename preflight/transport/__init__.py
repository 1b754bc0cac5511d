"""How hosts are reached: one Transport per way (ssh, slurm, local), chosen from one table
(table.py). A transport finds the hosts, runs the probe on them, hands out a Remote per host
for the active tests, launches the plan, writes its launch files, and closes what it opened.
The stages before and after (collect's mechanisms, the checks, the plan) know none of them."""
