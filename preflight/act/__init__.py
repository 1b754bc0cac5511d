"""Acting on a verdict where the cluster's scheduler can: drain the nodes a report failed and
resume those that pass again (Slurm)."""
