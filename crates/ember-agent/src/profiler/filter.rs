//! Which processes are profiled: the `profiling.targets` rules.

use regex::Regex;

use super::process::ProcessMeta;
use crate::config::{ConfigError, TargetsConfig};

/// Which processes are profiled.
pub(super) struct Filter {
    all: bool,
    comm: Option<Regex>,
    exe: Option<Regex>,
    pids: Vec<u32>,
    cgroup: Option<Regex>,
}

impl Filter {
    /// Compiles the target rules; a bad regex is an error naming its field.
    pub(super) fn new(targets: &TargetsConfig) -> Result<Filter, ConfigError> {
        // comm and exe must match whole; a cgroup pattern may match any part of the path
        // (a container id or a unit name inside a longer hierarchy).
        let compile = |path: &str, pattern: &Option<String>, anchored: bool| {
            pattern
                .as_ref()
                .map(|p| {
                    let p = if anchored {
                        format!("^(?:{p})$")
                    } else {
                        p.clone()
                    };
                    Regex::new(&p).map_err(|e| ConfigError {
                        path: path.into(),
                        reason: e.to_string(),
                    })
                })
                .transpose()
        };
        Ok(Filter {
            all: targets.all,
            comm: compile("profiling.targets.comm", &targets.comm, true)?,
            exe: compile("profiling.targets.exe", &targets.exe, true)?,
            pids: targets.pids.clone(),
            cgroup: compile("profiling.targets.cgroup", &targets.cgroup, false)?,
        })
    }

    /// Whether a process is profiled: every process with `all`, else any filter matching.
    pub(super) fn matches(&self, meta: &ProcessMeta) -> bool {
        if self.all {
            return true;
        }
        self.pids.contains(&meta.pid)
            || self.comm.as_ref().is_some_and(|r| r.is_match(&meta.comm))
            || self.exe.as_ref().is_some_and(|r| r.is_match(&meta.exe))
            || self
                .cgroup
                .as_ref()
                .is_some_and(|r| r.is_match(&meta.cgroup))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::profiler::process::tests::meta;

    fn filter(yaml: &str) -> Filter {
        Filter::new(&serde_norway::from_str::<TargetsConfig>(yaml).unwrap()).unwrap()
    }

    #[test]
    fn targets_filter_by_comm_exe_pid_and_cgroup() {
        // This test process, read from /proc like any profiled one.
        let me = ProcessMeta::read(std::process::id(), "x");
        let other_pid = me.pid + 1;
        assert!(filter("all: true").matches(&me));
        assert!(!filter("all: false").matches(&me));
        assert!(!filter("{all: false, comm: 'nothing-like-this'}").matches(&me));
        assert!(
            filter(&format!(
                "{{all: false, comm: '{}'}}",
                regex::escape(&me.comm)
            ))
            .matches(&me)
        );
        // exe is anchored: the file name alone does not match the whole path.
        assert!(!filter("{all: false, exe: 'ember_agent-[0-9a-f]+'}").matches(&me));
        assert!(filter("{all: false, exe: '.*/ember_agent-[0-9a-f]+'}").matches(&me));
        assert!(filter(&format!("{{all: false, pids: [{}]}}", me.pid)).matches(&me));
        assert!(!filter(&format!("{{all: false, pids: [{other_pid}]}}")).matches(&me));
        // Any one filter is enough.
        assert!(
            filter(&format!(
                "{{all: false, comm: nope, pids: [{other_pid}, {}]}}",
                me.pid
            ))
            .matches(&me)
        );
        // cgroup (unanchored): a systemd unit, or a container by its id.
        let id = "4f1c0e9a7b2d3c4e5f60718293a4b5c6d7e8f90112233445566778899aabbccd";
        let in_container = ProcessMeta {
            cgroup: format!("/system.slice/docker-{id}.scope"),
            ..meta("/app", "")
        };
        let in_unit = meta("/usr/sbin/nginx", "/system.slice/nginx.service");
        let by_container = filter("{all: false, cgroup: 'docker-4f1c0e9a7b2d'}");
        assert!(by_container.matches(&in_container));
        assert!(!by_container.matches(&in_unit));
        let by_unit = filter("{all: false, cgroup: 'nginx\\.service$'}");
        assert!(by_unit.matches(&in_unit));
        assert!(!by_unit.matches(&in_container));
        // A bad pattern names its field.
        let bad: TargetsConfig = serde_norway::from_str("{exe: '('}").unwrap();
        let err = Filter::new(&bad).err().unwrap();
        assert_eq!(err.path, "profiling.targets.exe");
        let bad: TargetsConfig = serde_norway::from_str("{cgroup: '['}").unwrap();
        assert_eq!(
            Filter::new(&bad).err().unwrap().path,
            "profiling.targets.cgroup"
        );
    }
}
