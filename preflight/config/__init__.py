"""Operator input: the one YAML loader (duplicate keys refused, file:line:field in every
error), the one reader of documents read back (policy, report, baseline, results log, plan),
and the policy built from a file and flags. Every error is an InputError: one line, exit 2.

- errors: InputError and reading an input file
- yamlfile: YAML with line numbers and no duplicate keys
- policy: the policy file and the command line's flags -> Policy
"""
