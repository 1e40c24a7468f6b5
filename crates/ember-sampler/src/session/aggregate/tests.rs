//! Unit tests of the off-CPU accounting: records fed in the orders a loaded host delivers.

use super::super::process_until;
use super::*;

const MS: u64 = 1_000_000;

/// A task of this process (so `/proc/<tid>` exists and it is carried across cuts).
fn task() -> SampleId {
    let pid = std::process::id();
    SampleId {
        pid,
        tid: pid,
        time: 0,
        cpu: 0,
    }
}

fn aggregator() -> Aggregator {
    let mut agg = Aggregator::new(CallGraph::Fp, 0, false);
    // Its state comes from records: no /proc reads.
    agg.known.insert(task().pid);
    agg
}

/// The context-switch event's sample of the task leaving `cpu` at `ms`.
fn out(ms: u64, cpu: u32) -> Record {
    Record::Sample(SampleRecord {
        id: SampleId {
            time: ms * MS,
            cpu,
            ..task()
        },
        ip: 0x1000,
        period: 1,
        callchain: Vec::new(),
        user_regs: Vec::new(),
        user_stack: Vec::new(),
        off_cpu: true,
        raw: Vec::new(),
    })
}

/// The CPU-wide PERF_RECORD_SWITCH of the task arriving on `cpu` at `ms`, from idle.
fn back(ms: u64, cpu: u32) -> Record {
    Record::Switch {
        id: SampleId {
            time: ms * MS,
            cpu,
            ..task()
        },
        out: false,
        other: Some((0, 0)),
    }
}

fn blocked_ns(rec: &Recording) -> u64 {
    rec.off_cpu_stacks().values().map(|v| v.period).sum()
}

/// One poll: these records were drained, the ones older than `horizon_ms` are handled.
fn poll(agg: &mut Aggregator, mut records: Vec<Record>, horizon_ms: u64) {
    process_until(agg, &mut records, Some(horizon_ms * MS));
    assert!(records.is_empty(), "every record is older than the horizon");
}

#[test]
fn switches_late_past_a_cut_do_not_charge_the_cut_time_again() {
    let mut agg = aggregator();
    // The task leaves CPU 0 at 100 ms; a cut at 1 s charges it up to the cut.
    poll(&mut agg, vec![out(100, 0)], 1_000);
    let first = agg.close(1_000 * MS, 0);
    assert_eq!(blocked_ns(&first), 900 * MS);
    // Records stamped before the cut arrive after it (written to CPU 1's buffer after
    // that buffer was drained, as under load): the task came back at 400 ms and left
    // again at 500 ms. It comes back for good at 1.4 s.
    poll(
        &mut agg,
        vec![back(400, 1), out(500, 1), back(1_400, 0)],
        2_000,
    );
    let second = agg.close(2_000 * MS, 0);
    // [100 ms, 1 s] was charged: the episode from 500 ms is charged from 1 s only. (It was
    // charged from 500 ms again, 1.8 s of blocked time within 1.3 s.)
    assert_eq!(blocked_ns(&second), 400 * MS);
    assert_eq!(blocked_ns(&first) + blocked_ns(&second), 1_300 * MS);
}

#[test]
fn a_switch_out_handled_after_a_later_return_does_not_overlap_it() {
    let mut agg = aggregator();
    // Away [100, 300] ms, handled in order.
    poll(&mut agg, vec![out(100, 0), back(300, 1)], 350);
    // A leave at 200 ms on CPU 1 arrives only now, then a return at 400 ms: what the
    // task was charged up to 300 ms is not charged again.
    poll(&mut agg, vec![out(200, 1), back(400, 0)], 500);
    let rec = agg.close(500 * MS, 0);
    assert_eq!(blocked_ns(&rec), 300 * MS, "never more than [100, 400] ms");
    assert_eq!(
        rec.off_cpu_stacks().values().map(|v| v.count).sum::<u64>(),
        2
    );
}

/// The kernel's note that `lost` records of `cpu`'s buffer were dropped.
fn lost(ms: u64, cpu: u32, off_cpu: bool) -> Record {
    Record::Lost {
        id: SampleId {
            time: ms * MS,
            cpu,
            ..task()
        },
        lost: 2,
        off_cpu,
    }
}

/// Another task leaving `cpu` at `ms`: a switch read from that CPU's buffer.
fn other_leaves(ms: u64, cpu: u32) -> Record {
    Record::Switch {
        id: SampleId {
            pid: 1,
            tid: 1,
            time: ms * MS,
            cpu,
        },
        out: true,
        other: Some((0, 0)),
    }
}

#[test]
fn an_episode_open_across_lost_switches_ends_where_the_loss_began() {
    let mut agg = aggregator();
    agg.off_cpu_min_ns = 100 * MS;
    // A 20 ms nap from 0 ms. CPU 1's buffer was read up to 10 ms, then filled: the nap's
    // return at 20 ms and the next leave at 21 ms (into a 300 ms sleep) were lost; the
    // return from that sleep at 321 ms is seen. The nap is known to last until 10 ms only:
    // under the minimum, not charged (it was charged 321 ms).
    poll(
        &mut agg,
        vec![
            out(0, 0),
            other_leaves(10, 1),
            lost(25, 1, true),
            back(321, 0),
        ],
        400,
    );
    // A sleep from 400 ms, with a loss after 600 ms: charged up to 600 ms.
    poll(
        &mut agg,
        vec![
            out(400, 0),
            other_leaves(600, 1),
            lost(650, 1, true),
            back(700, 0),
        ],
        1_000,
    );
    // Losses of the cpu-clock buffers say nothing about switches.
    poll(
        &mut agg,
        vec![out(1_000, 0), lost(1_100, 1, false), back(1_300, 1)],
        2_000,
    );
    let rec = agg.close(2_000 * MS, 0);
    assert_eq!(blocked_ns(&rec), (200 + 300) * MS);
    assert_eq!(
        rec.off_cpu_stacks().values().map(|v| v.count).sum::<u64>(),
        2
    );
    assert_eq!(rec.lost, 6);
}

#[test]
fn episodes_across_cuts_are_split_and_charged_once() {
    let mut agg = aggregator();
    poll(&mut agg, vec![out(100, 0)], 1_000);
    let first = agg.close(1_000 * MS, 0);
    poll(&mut agg, Vec::new(), 2_000);
    let second = agg.close(2_000 * MS, 0);
    poll(&mut agg, vec![back(2_500, 1), out(2_600, 1)], 3_000);
    let third = agg.close(3_000 * MS, 0);
    assert_eq!(
        [first, second, third].map(|r| blocked_ns(&r)),
        [900 * MS, 1_000 * MS, 900 * MS]
    );
    // Charge times are kept only for tasks charged since the previous cut.
    poll(&mut agg, vec![back(3_100, 0)], 4_000);
    agg.close(4_000 * MS, 0);
    assert_eq!(agg.charged.len(), 1);
    agg.close(5_000 * MS, 0);
    assert!(agg.charged.is_empty());
}
