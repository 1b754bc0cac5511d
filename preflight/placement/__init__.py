"""The placement plan: which hosts run what, on which ports, and the launcher commands.

- planner: facts and findings -> Plan (pure)
- launcher: each plan host's launcher command, env file and script
"""
