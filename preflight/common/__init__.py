"""Pure helpers every stage may use, below them all: numbers and host lists as people read
them (units), findings grouped by what they say (grouping), the report's summaries
(summary), which link or host is slow (localise), what NCCL's log says (nccllog), a host's
profile of versions (profile), GPU modes from their raw values (gpumode). They import the
model and one another only: no I/O, no stage."""
