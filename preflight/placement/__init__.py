"""The placement plan: which hosts run what, on which ports, and the launcher commands.

- planner: facts and findings -> Plan (pure); ps_plan: a PS job's; candidates: the hosts a
  plan may use, their free ports, and why others are left out
- cost: what keeping each left-out host would cost the job's all-reduce (pure)
- launcher: each plan host's launcher command, env file and script
"""
