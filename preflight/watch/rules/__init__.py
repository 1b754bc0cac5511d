"""The watch's rules, one module per cause family, in the order the judgement applies them
(preflight/watch/judge.py holds that order, and what each family yields to):

- ends: stopped, traced and dead ranks, the cause of a chain of deaths, a whole-job stop
  (exits: how each rank's end reads, and which exits caused the others)
- hang: no progress anywhere
- cpu: stragglers by CPU and pace (collective and PS)
- links: a slow link, once the job slowed
- progress: what could not be measured, and the pass line
- shared: what they share (thresholds, a rank's half-windows, AtCheck)
"""
