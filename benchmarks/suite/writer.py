"""writer: RecordActivities messages/s for 1, 4 and 8 concurrent senders, group commit on/off.

Each sender owns one session and asks ``RecordActivities`` with one changed activity in a
loop (every message appends one ``activity_changed`` event) for a fixed time, against a
fresh store opened with ``synchronous=FULL``. The six configurations are interleaved and
the whole round repeated (5 rounds; 2 with ``--quick``) because the disk is noisy; each
figure is the median of its rounds.

Baseline: one sender in the same group-commit mode, measured in the same rounds. Aim: 8
senders at least 5x one sender with group commit on (the off rows show what group commit
buys and have no aim).
"""

from __future__ import annotations

from pathlib import Path

from relaystore.actors.store import EventStore
from relaystore.domain.api_events import ApiActivityState
from relaystore.domain.messages import RecordActivities, SaveSession
from relaystore.testing import example_session
from suite.common import Context, Figure, drive, log, median

NAME = "writer"
SENDERS = (1, 4, 8)
AIM = 5.0
FSYNC_AIM = 0.8


def measure(
    path: Path,
    senders: int,
    group_commit: bool,
    seconds: float,
    synchronous: str = "FULL",
    batches: list[float] | None = None,
) -> float:
    """Messages/s of ``senders`` threads asking RecordActivities on a new store.

    ``batches`` gets the run's mean messages per commit (``StoreMetrics.batch_size_mean``).
    """
    with EventStore.open(
        path,
        max_batch=256 if group_commit else 1,
        synchronous=synchronous,  # type: ignore[arg-type]
    ) as store:
        for n in range(senders):
            store.ask(SaveSession(record=example_session(f"session-{n}", "bench")))
        states = [
            ApiActivityState(
                state=f"running-{i}", is_idle=False, waiting_for_input=False, capacity_retry=False
            )
            for i in range(2)
        ]

        def send(sender: int, i: int) -> None:
            activity = (f"session-{sender}", states[i % 2])  # alternates: always a change
            store.ask(RecordActivities(activities=[activity], recorded_at_ms=i))

        rate = drive(senders, seconds, send)
        written = store.latest_seq
        if batches is not None:
            batches.append(round(store.metrics().batch_size_mean, 2))
    if written == 0:
        raise RuntimeError("the writer benchmark wrote no events")
    return rate


def run(ctx: Context) -> list[Figure]:
    rounds = ctx.scale(5, 2)
    seconds = ctx.scale(20, 6) / 10
    configs = [(group, senders) for group in (True, False) for senders in SENDERS]
    rates: dict[tuple[bool, int], list[float]] = {config: [] for config in configs}
    unsynced: list[float] = []  # 8 senders, group commit on, synchronous=OFF
    batch_means: dict[tuple[bool, int] | str, list[float]] = {c: [] for c in configs}
    batch_means["off"] = []
    for r in range(rounds):
        # Rotate the order each round so no configuration always runs first or last.
        order = configs[r % len(configs) :] + configs[: r % len(configs)]
        for group, senders in order:
            path = ctx.scratch / f"writer-{r}-{senders}-{group}.sqlite3"
            rates[(group, senders)].append(
                measure(path, senders, group, seconds, batches=batch_means[(group, senders)])
            )
        unsynced.append(
            measure(
                ctx.scratch / f"writer-{r}-off.sqlite3",
                max(SENDERS),
                True,
                seconds,
                "OFF",
                batches=batch_means["off"],
            )
        )
        log(
            f"writer round {r + 1}/{rounds}: "
            + ", ".join(f"{s}{'g' if g else ''}={rates[(g, s)][-1]:,.0f}" for g, s in configs)
            + f", {max(SENDERS)}g OFF={unsynced[-1]:,.0f} (messages/commit at 8g FULL "
            f"{batch_means[(True, max(SENDERS))][-1]:.1f}, OFF {batch_means['off'][-1]:.1f})"
        )
    figures = []
    for group, senders in configs:
        value = median(rates[(group, senders)])
        base = median(rates[(group, 1)])
        aimed = group and senders == max(SENDERS)
        figures.append(
            Figure(
                benchmark=NAME,
                name=f"{senders} sender{'s' if senders > 1 else ''}, group commit {'on' if group else 'off'}",
                value=value,
                unit="messages/s",
                baseline=f"1 sender, group commit {'on' if group else 'off'}",
                baseline_value=base,
                aim=f"ratio >= {AIM:.0f}" if aimed else "",
                ok=(value / base >= AIM) if aimed else None,
                details={
                    "rounds": rates[(group, senders)],
                    "seconds_per_run": seconds,
                    "synchronous": "FULL",
                    "messages_per_commit": batch_means[(group, senders)],
                },
            )
        )
    on, off = median(rates[(True, max(SENDERS))]), median(rates[(False, max(SENDERS))])
    figures.append(
        Figure(
            benchmark=NAME,
            name=f"{max(SENDERS)} senders: group commit on vs off",
            value=on,
            unit="messages/s",
            baseline="same senders, group commit off",
            baseline_value=off,
        )
    )
    figures.append(
        Figure(
            benchmark=NAME,
            name=f"{max(SENDERS)} senders, synchronous=FULL vs OFF (how much fsync group commit hides)",
            value=on,
            unit="messages/s",
            baseline="same senders, synchronous=OFF",
            baseline_value=median(unsynced),
            aim=f">= {FSYNC_AIM}",
            ok=on / median(unsynced) >= FSYNC_AIM,
            details={
                "off_rounds": unsynced,
                "messages_per_commit": batch_means[(True, max(SENDERS))],
                "off_messages_per_commit": batch_means["off"],
                # What fsync adds to 8 messages (a full commit of the 8 senders) beyond OFF.
                "fsync_us_per_8_messages": (1 / on - 1 / median(unsynced)) * 1e6 * max(SENDERS),
            },
        )
    )
    return figures
