"""`preflight watch` and `preflight report` of a watch's log: the flags turned into a typed
WatchRequest (or a replay of logs), run, printed, and the exit code."""

from __future__ import annotations

import argparse
import sys
import time

from preflight import replaying, watching
from preflight.act import launches
from preflight.act.recover import ActOptions
from preflight.act.rehearse import Acting
from preflight.cli.args import DEFAULT_CONNECT_TIMEOUT
from preflight.config.errors import UsageError
from preflight.model.watch import WatchPolicy
from preflight.report import jsonreport, terminal
from preflight.watch import page, replay, view


def cmd_watch(args: argparse.Namespace) -> int:
    """Exit 0 when the job runs with no finding, 1 when something holds it (or it could not
    be watched), 130 when interrupted."""
    if args.replay:
        return _watch_replay(args)
    _watch_settings(args)
    result = watching.run(watching.WatchRequest(
        argv=args.argv, transport=args.transport, inventory=args.inventory,
        inventory_format=args.inventory_format, ssh_config=args.ssh_config,
        connect_timeout=args.connect_timeout or DEFAULT_CONNECT_TIMEOUT,
        cli_timeout=args.connect_timeout is not None,
        accept_new_host_keys=args.accept_new_host_keys,
        policy=WatchPolicy(interval_s=args.interval, margin=args.margin,
                           persist_s=args.persist, hang_s=args.hang_after,
                           phase_max_s=args.phase_max, phase_pattern=args.phase_pattern),
        step_pattern=args.step_pattern, plan=args.plan, marker=args.marker or "",
        jobid=args.jobid, any_job=args.any_job, duration_s=args.duration or None,
        once=args.once, metrics_port=args.metrics_port, metrics_address=args.metrics_address,
        metrics_textfile=args.metrics_textfile,
        act=act_options(args) if args.act else None, log=args.log,
        log_max_bytes=int(args.log_max_mb * (1 << 20))))
    if args.once:
        width = terminal.width_of(sys.stdout)
        for f in result.findings:
            print(view.line(f, width))
    return result.code


def _watch_replay(args: argparse.Namespace) -> int:
    """--replay: the logs judged again, with what --act would have done (nothing run)."""
    given = [o for o, v in (("--plan", args.plan), ("-i", args.inventory),
                            ("--once", args.once), ("--act", args.act)) if v]
    if given:
        raise UsageError(f"watch: --replay judges logs, it watches no hosts: {given[0]} "
                         "does not go with it (the log's own settings are used)")
    return replaying.replay_logs(args.replay, Acting(args.act_max, args.act_cooldown,
                                                     args.act_after),
                                 sys.stdout, terminal.width_of(sys.stdout))


def _watch_settings(args: argparse.Namespace) -> None:
    """Refuses settings under which the watch could not judge what it says it judges."""
    if args.persist < 2 * args.interval:
        raise UsageError(f"watch: --persist {args.persist:g}s is shorter than two samples "
                         f"(2 x --interval {args.interval:g}s): nothing could be seen to "
                         f"persist; give --persist {2 * args.interval:g}s or more, or a "
                         "shorter --interval")
    if args.margin <= 0:
        raise UsageError("watch: --margin 0 would name a rank a hair slower than its peers' "
                         "median: give a fraction above 0 and below 1 (0.25: slower than "
                         "0.75 x the median)")


def act_options(args: argparse.Namespace) -> ActOptions:
    """--act's options: the plan's launch to act on, as it was launched."""
    if not args.plan:
        raise UsageError("watch: --act needs --plan REPORT, the report the job was launched "
                         "from: it is checked again without the host named, and launched again")
    if args.any_job:
        raise UsageError("watch: --act acts on the job preflight launch started, not on "
                         "--any-job")
    if args.marker:
        launched = launches.by_token(args.marker)
    else:
        # The newest launch of the plan whose job runs: started just before (`preflight
        # launch ... &`), its record comes once its launchers start; an earlier launch of
        # the same report whose job has ended is never the one to act on.
        launched = launches.running(args.plan, launches.LAUNCH_WAIT_S)
        if launched is None:
            gone = launches.newest(args.plan)
            if gone is not None:
                raise UsageError(
                    f"watch: --act: the newest preflight launch of {args.plan} (marker "
                    f"{gone.token}, started "
                    f"{time.strftime('%H:%M:%S', time.localtime(gone.started))}) no longer "
                    f"runs, and no other started within {launches.LAUNCH_WAIT_S:g} s: "
                    "launch the job with preflight launch --plan, then watch it")
    if launched is None or not launched.script:
        raise UsageError(f"watch: --act: no preflight launch of {args.plan} is recorded on "
                         "this machine with its script (launch the job with preflight launch "
                         f"--plan, then watch it; waited {launches.LAUNCH_WAIT_S:g} s for one)")
    return ActOptions(args.plan, launched, args.act_max, args.act_cooldown,
                      args.accept_new_host_keys, act_after_s=args.act_after)


def watch_report(args: argparse.Namespace) -> int:
    """A watch's log: its course on the terminal, --html its ranks over time; exit 0 when it
    ended with nothing holding the job, 1 otherwise."""
    other = [f for f in ("json", "junit", "markdown") if getattr(args, f, None)]
    if other:
        raise UsageError(f"report: {args.report} is a watch's log: it renders to the terminal "
                         f"and --html, not --{other[0]}")
    log = replay.read(args.report)
    if args.html:
        try:
            jsonreport.write_text_atomic(args.html, page.page(log))
        except OSError as e:
            raise UsageError(f"report: --html {args.html}: {e.strerror or e}") from None
    width = terminal.width_of(sys.stdout)
    for line in page.text(log):
        print(line if width <= 0 or len(line) <= width else line[:width - 3] + "...")
    # A log cut by a kill ends with what was still open then: a failure said and never
    # cleared holds the job as much as one in a last judgement.
    return 0 if all(e.get("status") == "pass" for e in log.final()) else 1
