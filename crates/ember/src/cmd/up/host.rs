//! Whether this process may sample the whole host, asked of the kernel before the agent
//! starts, so that a refusal is said once, prominently, in `ember up`'s own words (the
//! profiler thread would otherwise log it as one error line among the start-up lines).

use ember_sampler::{CallGraph, Options, SamplerError, Session, Target};

/// The sysctl value whole-host sampling needs from a user without root or CAP_PERFMON: the
/// kernel refuses per-CPU events (`pid = -1`) above 0 (`perf_allow_cpu`), and 0 also
/// allows kernel frames. Checked as `nobody` at 0: CPU and off-CPU profiles both arrive.
pub const PARANOID_NEEDED: i32 = 0;

/// Why host sampling is not possible, in words for the user.
#[derive(Debug)]
pub struct Refused {
    /// What the kernel refused and why.
    pub reason: String,
    /// A permission refusal (as opposed to a kernel without perf events, say).
    pub permission: bool,
}

/// Opens (and closes at once) the events the agent's profiler would open: per-CPU CPU-clock
/// sampling, plus the scheduler switches when off-CPU time is asked for.
pub fn check(off_cpu: bool) -> Result<(), Refused> {
    let mut options = Options::new(Target::AllCpus);
    options.frequency = 19;
    options.call_graph = CallGraph::Fp;
    options.off_cpu = off_cpu;
    match Session::start(&options) {
        Ok(session) => {
            drop(session.finish());
            Ok(())
        }
        Err(SamplerError::Permission { what, paranoid }) => Err(Refused {
            reason: format!(
                "the kernel refused {what} to this user (kernel.perf_event_paranoid is \
                 {paranoid}; whole-host sampling needs root, CAP_PERFMON, or \
                 kernel.perf_event_paranoid <= {PARANOID_NEEDED})"
            ),
            permission: true,
        }),
        Err(e) => Err(Refused {
            reason: e.to_string(),
            permission: false,
        }),
    }
}

/// The advice printed with a permission refusal: the one way to allow it, as the README says.
pub fn advice() -> String {
    format!(
        "to allow it, run `ember up` as root, or (until the next reboot) \
         `sudo sysctl -w kernel.perf_event_paranoid={PARANOID_NEEDED}`"
    )
}
