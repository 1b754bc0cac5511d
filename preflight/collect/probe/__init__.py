"""The probe's parts, plain modules linted as Python 3.6 (standard library only): main (the
facts of one host), nvml (GPUs through pynvml) and paddle_child (Paddle's part, in a child
process with the training environment's python). collect.probe_text joins them into the one
text shipped to every host."""
